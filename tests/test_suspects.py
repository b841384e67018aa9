"""Which rank hung: suspects from real hangs (tests/data/hang, made by its recipe with
PyTorch 2.13 CPU and Gloo), from real public NCCL watchdog logs, and hostile dumps."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from faildex import Diagnosis, DumpError, diagnose
from faildex import cli, frdump
from faildex.suspects import is_artifact

ROOT = Path(__file__).resolve().parent.parent
HANG = ROOT / "tests" / "data" / "hang"
SCENARIOS = sorted(p.name for p in HANG.iterdir() if (p / "expected.yaml").exists())
KINDS_OF_EVIDENCE = ("logs", "fr", "fr-json", "stacks")


def expected(scenario: str) -> dict:
    return YAML(typ="safe").load((HANG / scenario / "expected.yaml").read_text())


def pairs(report: dict) -> list[list]:
    return [[s["rank"], s["kind"]] for s in report["suspects"]]


def run_cli(capsys, index, *args) -> tuple[int, str, str]:
    code = cli.main(list(args), index_path=index)
    out, err = capsys.readouterr()
    return code, out, err


def test_there_are_six_real_scenarios():
    assert {"skip", "late", "op", "size", "dtype", "two-groups"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("evidence", KINDS_OF_EVIDENCE)
def test_each_kind_of_evidence_names_the_expected_suspects_in_the_cli(capsys, index, scenario, evidence):
    folder = HANG / scenario / evidence
    want = expected(scenario)["suspects"][evidence]
    code, out, err = run_cli(capsys, index, "--format", "json", "--no-progress", "--jobs", "1", str(folder))
    assert code == 0, err
    report = json.loads(out)
    assert pairs(report) == want
    for s in report["suspects"]:
        assert s["why"] and s["evidence"], s
        assert all(e["source"].startswith(str(folder)) for e in s["evidence"])
        assert s["rank_scope"] == "global"     # from the file names: ranks in the job


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_everything_together_puts_the_culprit_first_through_the_engine_api(index, scenario):
    exp = expected(scenario)
    d = Diagnosis(index)
    for path in sorted((HANG / scenario).rglob("*")):
        if not path.is_file() or path.parent == HANG / scenario:
            continue
        data = path.read_bytes()
        name = str(path.relative_to(HANG))
        if is_artifact(data[:8192]):
            d.add_dump(name, data)
        else:            # a log (or an empty stack file: a rank that died before the dump)
            d.feed(name, data)
            d.close(name)
    report = d.report()
    assert pairs(report)[:1] == [exp["suspects"]["all"][0]]
    assert pairs(report) == exp["suspects"]["all"]
    # every dump is listed as an input, with what it was read as
    kinds = [i["kind"] for i in report["inputs"] if "/fr" in i["name"]]
    assert len(kinds) == len(list((HANG / scenario).glob("fr*/*")))
    assert all(k.startswith("flight-recorder dump") for k in kinds)


def test_text_and_markdown_show_suspects_first_with_the_rank(capsys, index):
    folder = HANG / "skip" / "fr"
    code, out, _ = run_cli(capsys, index, "--no-progress", str(folder))
    assert code == 0
    # one sentence first (who), then the suspects with their evidence
    lines = out.splitlines()
    assert lines[0].startswith("Rank 2 is the first suspect: ") and "never did" in lines[0]
    at = lines.index("Suspects (the rank that stopped the others)")
    assert at < 4 and lines[at + 1].startswith("  rank 2: missing")
    code, out, _ = run_cli(capsys, index, "--format", "markdown", "--no-progress", str(folder))
    assert "### Suspect ranks" in out and "| 2 |  | missing |" in out


def test_json_and_pickle_dumps_of_a_rank_read_the_same():
    for scenario in SCENARIOS:
        for p in sorted((HANG / scenario / "fr").iterdir()):
            j = HANG / scenario / "fr-json" / (p.name + ".json")
            a = frdump.load(p.name, p.read_bytes())
            b = frdump.load(j.name, j.read_bytes())
            assert (a["rank"], a["form"], b["form"]) == (b["rank"], "pickle", "json")
            keep = ("pg", "seq", "op", "in_sizes", "in_dtypes", "created_ns")
            assert [[e[k] for k in keep] for e in a["entries"]] == \
                   [[json.loads(json.dumps(e[k])) for k in keep] for e in b["entries"]]


def test_the_safe_reader_agrees_with_pickle_on_plain_data():
    value = {"a": [1, -2, 3.5, None, True, False, "ü", (1, 2), ()],
             "big": 2 ** 70, "neg": -(2 ** 40), "nested": [[{"k": "v"}]] * 3, "": {}}
    for proto in range(0, 6):
        assert frdump.read_pickle(pickle.dumps(value, protocol=proto)) == value
    # bytes are plain data from protocol 3 on (older protocols build them with a GLOBAL)
    for proto in range(3, 6):
        assert frdump.read_pickle(pickle.dumps([b"\x00\xff"], protocol=proto)) == [b"\x00\xff"]


@pytest.mark.parametrize("name,rank", [("nccl_trace_rank_3", 3), ("/tmp/x/nccl_trace_rank_12.json", 12),
                                       ("fr_dump.rank7.pkl", 7), ("trace", None), ("rank_2.tar.gz", None)])
def test_the_rank_comes_from_the_file_name(name, rank):
    assert frdump.rank_from_name(name) == rank


# ---------------------------------------------------------------- hostile pickles


class _RunsAShell:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _hostile_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    marker = tmp_path / "it-ran"
    real = (HANG / "skip" / "fr" / "nccl_trace_rank_0").read_bytes()
    evil = pickle.dumps({"version": "2.10", "entries": [_RunsAShell(marker)]}, protocol=2)
    assert b"\x85R" in evil or b"R" in evil      # a GLOBAL then a REDUCE of os.system
    files = {
        "global-reduce": (tmp_path / "nccl_trace_rank_0", evil, "refused: the pickle asks to import or call code"),
        # a string that claims a terabyte: refused without allocating it
        "huge-claim": (tmp_path / "nccl_trace_rank_1",
                       b"\x80\x04\x8d" + (1 << 40).to_bytes(8, "little") + b"x" * 100 + b".",
                       "truncated pickle"),
        "truncated": (tmp_path / "nccl_trace_rank_2", real[:len(real) // 2], "truncated pickle"),
    }
    for path, data, _ in files.values():
        path.write_bytes(data)
    return {k: (p, msg) for k, (p, _, msg) in files.items()}


@pytest.mark.parametrize("kind", ["global-reduce", "huge-claim", "truncated"])
def test_hostile_pickles_get_one_line_and_nothing_runs(capsys, index, tmp_path, kind):
    path, message = _hostile_files(tmp_path)[kind]
    code, out, err = run_cli(capsys, index, "--no-progress", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(path) in err and message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "it-ran").exists()
    with pytest.raises(DumpError):
        Diagnosis(index).add_dump(path.name, path.read_bytes())
    assert not (tmp_path / "it-ran").exists()


def test_a_dump_over_the_size_cap_is_refused(capsys, index, tmp_path, monkeypatch):
    monkeypatch.setattr(frdump, "MAX_DUMP_BYTES", 1 << 20)
    big = tmp_path / "nccl_trace_rank_0"
    big.write_bytes(pickle.dumps({"entries": [f"{i:01000d}" for i in range(2000)]}, protocol=4))
    code, _, err = run_cli(capsys, index, "--no-progress", str(big))
    assert code == 2 and "over the 1 MiB limit" in err and err.count("\n") == 1


def test_a_deep_or_self_referencing_pickle_is_only_data():
    deep = b"\x80\x04" + b"]" * 200_000 + b"a" * 199_999 + b"."
    got = frdump.read_pickle(deep)
    assert isinstance(got, list)
    with pytest.raises(DumpError, match="not a flight-recorder dump"):
        frdump.load("nccl_trace_rank_0", deep)


# ---------------------------------------------------------------- real public NCCL logs


def test_rank_missing_from_the_watchdog_lines_is_named(index):
    # LlamaFactory#2424: rank 0 was still tokenizing; ranks 1-3 timed out in SeqNum 2
    report = diagnose([str(ROOT / "tests" / "corpus" / "dev" / "053-nccl-watchdog-tokenize-30min.log")], index)
    assert pairs(report) == [[0, "missing"]]
    why = report["suspects"][0]["why"]
    assert "ranks 1,2,3" in why and "#2 ALLREDUCE" in why


def test_ranks_from_old_watchdog_lines_are_ranks_within_the_group(index, capsys):
    # LlamaFactory#2424's lines are PyTorch 2.0/2.1's "[E ProcessGroupNCCL.cpp:475] [Rank 1]
    # Watchdog caught ...": "[Rank R]" is the rank in the process group
    # (ProcessGroupNCCL::createLogPrefix) and nothing names the rank in the job
    log = ROOT / "tests" / "corpus" / "dev" / "053-nccl-watchdog-tokenize-30min.log"
    [s] = diagnose([str(log)], index)["suspects"]
    assert (s["rank"], s["rank_scope"]) == (0, "group") and "pg" not in s
    assert "within the process group" in s["why"] and "no global rank" in s["why"]
    code, out, _ = run_cli(capsys, index, "--no-progress", str(log))
    lines = out.splitlines()
    assert lines[lines.index("Suspects (the rank that stopped the others)") + 1].startswith(
        "  rank 0 within its process group: missing")
    code, out, _ = run_cli(capsys, index, "--no-progress", "--format", "markdown", str(log))
    assert "| 0 within its process group |  | missing |" in out


def test_per_rank_files_give_old_watchdog_lines_their_global_rank(index, tmp_path):
    # the same three lines, one per file named by the rank that printed it (one log per
    # rank, as the launcher writes them): the file name is the rank in the job
    lines = (ROOT / "tests" / "corpus" / "dev" / "053-nccl-watchdog-tokenize-30min.log").read_text().splitlines()
    paths = []
    for line in lines[:3]:
        rank = line.split("[Rank ", 1)[1].split("]", 1)[0]
        paths.append(tmp_path / f"rank_{rank}.log")
        paths[-1].write_text(line + "\n")
    [s] = diagnose([str(p) for p in paths], index)["suspects"]
    assert (s["rank"], s["kind"], s["rank_scope"]) == (0, "missing", "global")
    assert "within the process group" not in s["why"]


@pytest.mark.parametrize("line,rank,scope", [
    # ProcessGroupNCCL's prefix without the launcher's: the rank within the group
    ("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
     "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.",
     1, "group"),
    # torchrun's "[rankN]:" before it: the rank in the job (NVIDIA/nccl#1610)
    ("[rank13]:[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] [PG ID 11 PG GUID 119 Rank 1] Exception (either "
     "an error or timeout) detected by watchdog at work: 216, last enqueued NCCL work: 220, last completed NCCL work: "
     "215.", 13, "global"),
])
def test_the_rank_scope_of_a_watchdog_line(line, rank, scope):
    from faildex.lines import parse_prefix
    from faildex.suspects import HangLines
    h = HangLines()
    meta, _ = parse_prefix(line)
    h.add(line, meta, 1, "x.log")
    assert (h.items[0]["rank"], h.items[0]["rank_scope"]) == (rank, scope)


DEV = ROOT / "tests" / "corpus"
# two real pastes (development logs, threads in their manifests) where a tqdm bar lost its
# carriage return and runs into rank 3's / rank 0's first watchdog line
BAR_JOINED = [("dev-3/u016-minicpmo-lora-ddp-broadcast-shape-mismatch-hang.log", 3, [3, "size-mismatch"]),
              ("dev-5/a004-qwen-vl-finetune-mixed-modality-allreduce-desync-timeout.log", 0, [0, "order-mismatch"])]


@pytest.mark.parametrize("log,rank,first", BAR_JOINED)
def test_a_progress_bar_run_into_a_line_leaves_its_rank_prefix_read(log, rank, first, index):
    from faildex.lines import parse_prefix
    line = (DEV / log).read_text(encoding="utf-8").splitlines()[0]
    assert "it]" in line.split("[rank", 1)[0] or "it/s]" in line.split("[rank", 1)[0]
    meta, rest = parse_prefix(line)
    assert meta.get("rank") == rank and "rank_from" not in meta and rest.startswith("[E")
    report = diagnose([str(DEV / log)], index)
    assert pairs(report)[0] == first
    assert report["primary"]["id"] == "collective-mismatch-desync"


def test_a_bar_without_a_prefix_after_it_is_left_whole():
    from faildex.lines import parse_prefix
    line = "Epoch 3:  42%|####      | 2100/5000 [01:02<01:26, 33.5it/s, loss=2.14] saved [rank3]: no prefix here"
    meta, rest = parse_prefix(line)
    # not cut: the rank is only a word of the message, as in any line that mentions one
    assert rest == line and meta == {"rank": 3, "rank_from": "word"}


def test_a_rank_timing_out_in_a_collective_its_peers_completed_ran_another_one(index):
    """a004 (Qwen-VL-Series-Finetune#17, text-only batches on some ranks): rank 0's watchdog
    fires in SeqNum 959 while ranks 1, 2, 4, 5 fire in 963; they completed 959, which needs
    rank 0's call there, so rank 0's call was another collective or size. With rank 0's
    line alone left out of the comparison (two reporters only), no such claim is made."""
    lines = (DEV / BAR_JOINED[1][0]).read_text(encoding="utf-8").splitlines()
    report = Diagnosis(index)
    report.feed("x.log", "\n".join(lines).encode())
    report.close("x.log")
    r = report.report()
    top = r["suspects"][0]
    assert (top["rank"], top["kind"]) == (0, "order-mismatch")
    assert "SeqNum 959" in top["why"] and "SeqNum 963" in top["why"] and "ranks 1,2,4,5" in top["why"]
    # the same lines without two of the later ranks: one rank at 963 is no majority
    few = [ln for ln in lines if "[Rank 4]" not in ln and "[Rank 5]" not in ln and "[Rank 2]" not in ln]
    d = Diagnosis(index)
    d.feed("x.log", "\n".join(few).encode())
    d.close("x.log")
    assert "order-mismatch" not in [s["kind"] for s in d.report()["suspects"]]


def test_deepspeeds_rank_prefix_is_the_rank_in_the_job():
    # DeepSpeed's log_dist prints "[Rank R]" with the global rank: not a process group's
    from faildex.lines import parse_prefix
    line = next(ln for p in sorted((ROOT / "entries" / "healthy").glob("deepspeed*.log"))
                for ln in p.read_text(errors="replace").splitlines() if "[Rank 0]" in ln)
    meta, _ = parse_prefix(line)
    assert meta["rank"] == 0 and meta["rank_from"] == "word"


def test_a_rank_that_aborted_on_a_bigger_message_and_its_sender_are_both_named(index):
    # the Gloo size-mismatch run (4 ranks; rank 3 all_reduces 2048 elements, the others 1024):
    # rank 2 aborts (terminate called ... EnforceNotMet). In Gloo's all_reduce ring rank 2
    # receives from rank 3, and the logs cannot tell which of the two is odd: both are named,
    # the one that aborted first, and the headline says it cannot tell
    report = diagnose([str(p) for p in sorted((HANG / "size" / "logs").iterdir())], index)
    first, second = report["suspects"][:2]
    assert (first["rank"], first["kind"], second["rank"], second["kind"]) == (2, "size-mismatch", 3, "size-mismatch")
    assert first["evidence"][0]["source"].endswith("rank_2.log")
    assert "receives from rank 3" in first["why"]
    assert "rank 3" in report["verdict"] and "cannot tell" in report["verdict"]


def test_a_lone_logs_trailing_number_is_not_a_rank(index, tmp_path):
    # One log, no rank in its lines: "...-137.log" names the exit code, not rank 137, and
    # with one input there are no "other ranks" to call collateral.
    lone = tmp_path / "learner-killed-137.log"
    lone.write_text("/usr/local/bin/train.sh: line 18:    36 Killed                  python3 train.py\n"
                    "Job exited with error code 137\n")
    report = diagnose([str(lone)], index)
    assert report["primary"] is not None
    assert not [s for s in report["suspects"] if s["kind"] == "crashed"], report["suspects"]
    # the same file among per-rank logs still takes its rank from the name
    other = tmp_path / "learner-killed-3.log"
    other.write_text("step 10 loss 2.1\n")
    report = diagnose([str(lone), str(other)], index)
    assert [s["rank"] for s in report["suspects"] if s["kind"] == "crashed"] == [137]


# ---------------------------------------------------------------- progress and stacks the NCCL watchdog prints
# (tests/data/hang/nccl-logs: short excerpts of public reports, see tests/data/hang/README.md)

NCCL_LOGS = HANG / "nccl-logs"


def test_a_rank_whose_last_completed_work_is_lower_is_behind(index):
    # vllm-project/vllm#23448: in PG GUID 67 rank 0 times out in #5730 having completed
    # #5729; rank 3 is still in #5729 ("failure detected by watchdog at work sequence id",
    # PyTorch 2.7 on: a line no signature anchors, seen only through suspects.SCAN_ANCHORS)
    report = diagnose([str(NCCL_LOGS / "vllm-23448-rank-behind.log")], index)
    assert pairs(report) == [[3, "behind"]]
    s = report["suspects"][0]
    assert "#5728" in s["why"] and "#5729" in s["why"] and "PG 67" in s["why"]
    assert s["evidence"][0]["line"] == 6 and "last completed work: 5728" in s["evidence"][0]["text"]


def test_progress_of_two_subgroups_with_the_same_pg_id_is_not_compared(index):
    # NVIDIA/nccl#1610: PG ID 11 is GUID 119 on rank 13 and GUID 112 on rank 15, two
    # different groups; their sequence numbers (215 and 56) say nothing about each other
    report = diagnose([str(NCCL_LOGS / "nccl-1610-two-subgroups.log")], index)
    assert not [s for s in report["suspects"] if s["kind"] == "behind"], report["suspects"]


@pytest.mark.parametrize("wording,line,rank,group_rank", [
    # mila-iqia/milabench#269
    ("2.2-2.5", "[rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] Timeout at "
                "NCCL work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069.", 3, 3),
    # NVIDIA/nccl#1610
    ("2.4-2.6", " 2025-02-18 12:54 [rank13]:[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] [PG ID 11 PG GUID 119 "
                "Rank 1] Exception (either an error or timeout) detected by watchdog at work: 216, last enqueued NCCL "
                "work: 220, last completed NCCL work: 215.", 13, 1),
    # PrimeIntellect-ai/prime-rl#3186
    ("2.7+", "[rank13]:[E804 23:05:54.517045067 ProcessGroupNCCL.cpp:2303] [PG ID 3 PG GUID "
             "d03ba143833c6bf31b072ffdb22f1745957fcbfb Rank 1]  failure detected by watchdog at work sequence id: 1438 "
             "PG status: last enqueued work: 1441, last completed work: 1437", 13, 1),
    ("dump signal", "[rank0]:[E804 23:05:54.817424543 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
                    "Received a dump signal due to a collective timeout from  rank 13 and we will try our best to dump "
                    "the debug info. Last enqueued NCCL work: 1261, last completed NCCL work: 1259.This is most likely "
                    "caused by incorrect usages of collectives", 0, 0),
])
def test_every_progress_wording_is_read_with_the_global_rank(wording, line, rank, group_rank):
    from faildex.lines import parse_prefix
    from faildex.suspects import HangLines
    h = HangLines()
    meta, _ = parse_prefix(line)
    h.add(line, meta, 1, "x.log")
    assert len(h.items) == 1, wording
    it = h.items[0]
    assert (it["kind"], it["rank"], it["group_rank"]) == ("progress", rank, group_rank)
    assert int(it["completed"]) < int(it["enqueued"])


def _frames(index, name: str) -> list:
    d = Diagnosis(index)
    data = (NCCL_LOGS / name).read_bytes()
    d.feed(name, data)
    d.close(name)
    return [it for it in d.sources[name].hang.items if it["kind"] == "stack"]


@pytest.mark.parametrize("name,rank,first,count", [
    ("prime-rl-3186-stack.log", 13, ("all_to_all_single", 4829), 5),
    ("vllm-41160-stack.log", 3, ("broadcast", 2968), 8),
])
def test_the_stack_of_the_failed_collective_is_read_from_a_plain_log(index, name, rank, first, count):
    [stack] = _frames(index, name)
    assert stack["rank"] == rank and len(stack["frames"]) == count
    f0 = stack["frames"][0]
    assert (f0["func"], f0["line"]) == first and f0["file"].endswith("torch/distributed/distributed_c10d.py")
    assert [f["at"] for f in stack["frames"]] == list(range(stack["line"] + 1, stack["line"] + 1 + count))
    if name.startswith("prime-rl"):
        # the "failure detected" line just before gives the stack its process group
        assert stack["guid"].startswith("d03ba143")


def test_frames_cut_by_another_line_end_the_stack(index, tmp_path):
    lines = (NCCL_LOGS / "vllm-41160-stack.log").read_text().splitlines()
    (tmp_path / "cut.log").write_text("\n".join(lines[:3] + ["step 7 loss 2.1"] + lines[3:]) + "\n")
    d = Diagnosis(index)
    d.feed("cut.log", (tmp_path / "cut.log").read_bytes())
    d.close("cut.log")
    [stack] = [it for it in d.sources["cut.log"].hang.items if it["kind"] == "stack"]
    assert [f["func"] for f in stack["frames"]] == ["broadcast", "wrapper"]


def test_the_rank_whose_failed_collective_differs_is_an_op_mismatch(index):
    # constructed from the real format of prime-rl#3186 (see the README): ranks 12-14 print
    # that report's stack, rank 15 an all_reduce called from another place
    report = diagnose([str(NCCL_LOGS / "constructed-four-ranks-stack.log")], index)
    assert pairs(report) == [[15, "op-mismatch"]]
    why = report["suspects"][0]["why"]
    assert "all_reduce" in why and "train.py:512" in why and "ranks 12,13,14" in why and "all_to_all_single" in why


def test_two_ranks_with_different_stacks_name_nobody(index, tmp_path):
    lines = (NCCL_LOGS / "constructed-four-ranks-stack.log").read_text().splitlines()
    two = lines[:6] + lines[-4:]          # rank 12 and rank 15: no majority
    (tmp_path / "two.log").write_text("\n".join(two) + "\n")
    report = diagnose([str(tmp_path / "two.log")], index)
    assert not report["suspects"], report["suspects"]


def test_a_rank_that_never_enqueued_the_collective_is_missing(index, tmp_path):
    # Constructed from vllm-project/vllm#23448's lines (tests/data/hang/README.md): a third
    # rank of PG GUID 67 prints the heartbeat monitor's dump-signal line (its wording
    # from HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg, see suspects._DUMP_SIGNAL)
    # with a last enqueued work below the #5730 that rank 0 times out in: it never
    # entered that collective, which makes it the rank the others wait for.
    real = (NCCL_LOGS / "vllm-23448-rank-behind.log").read_text()
    odd = ("[rank5]:[E822 16:31:17.000000000 ProcessGroupNCCL.cpp:1500] [PG ID 4 PG GUID 67 Rank 5] "
           "Received a dump signal due to a collective timeout from rank 0 and we will try our best "
           "to dump the debug info. Last enqueued NCCL work: 5727, last completed NCCL work: 5727.\n")
    log = tmp_path / "job.log"
    log.write_text(real + odd)
    report = diagnose([str(log)], index)
    assert pairs(report) == [[5, "missing"]], report["suspects"]
    why = report["suspects"][0]["why"]
    assert "#5730" in why and "#5727" in why and "never entered" in why


# ---------------------------------------------------------------- chunk and range boundaries
# The frames of a stack are the lines after its header and hold no anchor; the scan reads
# them across read chunks (Source._follow) and parallel ranges (HangLines.merge). Every
# cut must give what one whole read gives.

STACK_LOGS = ("prime-rl-3186-stack.log", "vllm-41160-stack.log", "constructed-four-ranks-stack.log")


def _stacks(src) -> list:
    return [(it["rank"], it.get("guid"), it["line"], [(f["func"], f["line"], f["at"]) for f in it["frames"]])
            for it in src.hang.items if it["kind"] == "stack"]


def _in_ranges(d: Diagnosis, name: str, data: bytes, cuts: list[int], chunk: int = 0):
    """Scan data as the ranges that start at cuts (line starts), each fed in chunks of
    `chunk` bytes, each part through pickle (as the browser's workers hand them over)."""
    bounds = [0] + cuts + [len(data)]
    parts = []
    for lo, hi in zip(bounds, bounds[1:]):
        part = d.scan_range(name, lo, data[max(0, lo - 8192):lo])
        step = chunk or max(hi - lo, 1)
        for at in range(lo, hi, step):
            part.feed(data[at:min(hi, at + step)])
        parts.append(pickle.loads(pickle.dumps(part.end_range(is_last=hi == len(data)))))
    d.adopt_ranges(name, parts)
    return d.sources[name]


def _line_starts(data: bytes) -> list[int]:
    return [i + 1 for i, c in enumerate(data[:-1]) if c == ord("\n")]


@pytest.mark.parametrize("name", STACK_LOGS)
@pytest.mark.parametrize("eol", ["lf", "crlf"])
def test_stack_frames_survive_a_chunk_cut_at_every_byte(index, name, eol):
    data = (NCCL_LOGS / name).read_bytes()
    if eol == "crlf":
        data = data.replace(b"\n", b"\r\n")
    d = Diagnosis(index)
    d.feed("whole", data)
    d.close("whole")
    whole = _stacks(d.sources["whole"])
    assert whole and all(len(s[3]) >= 3 for s in whole)     # every header got its frames
    cut_wrong = []
    for p in range(1, len(data)):
        key = f"cut{p}"
        d.feed(key, data[:p])
        d.feed(key, data[p:])
        d.close(key)
        if _stacks(d.sources[key]) != whole:
            cut_wrong.append(p)
    assert cut_wrong == []
    # and in chunks of a few bytes: many cuts in one stack
    for size in (1, 7, 64):
        key = f"small{size}"
        for at in range(0, len(data), size):
            d.feed(key, data[at:at + size])
        d.close(key)
        assert _stacks(d.sources[key]) == whole, size


@pytest.mark.parametrize("name", STACK_LOGS)
def test_stack_frames_and_their_group_survive_a_range_cut_at_every_line(index, name):
    data = (NCCL_LOGS / name).read_bytes()
    d = Diagnosis(index)
    d.feed("whole", data)
    d.close("whole")
    whole = _stacks(d.sources["whole"])
    starts = _line_starts(data)
    wrong = [c for c in starts if _stacks(_in_ranges(d, f"r{c}", data, [c])) != whole]
    assert len(starts) == data.count(b"\n") - (1 if data.endswith(b"\n") else 0) and wrong == []
    # one range per line (a range of frames only, between two others), fed 7 bytes at a time
    assert _stacks(_in_ranges(d, "every", data, starts, chunk=7)) == whole
    if name.startswith("prime-rl"):
        # the stack's process group comes from the "failure detected" line before it
        assert whole[0][1].startswith("d03ba143")


def _four_ranks_with_progress() -> bytes:
    """Four ranks of one PG, each printing PyTorch 2.7's "failure detected" line and its
    stack, in the exact form of prime-rl#3186 (tests/data/hang/README.md); built from
    that report's lines as constructed-four-ranks-stack.log is: ranks 12-14 print its
    stack, rank 15 the all_reduce from train.py:512 of that constructed file."""
    real = (NCCL_LOGS / "prime-rl-3186-stack.log").read_text().splitlines()
    failure, header, frames = real[1], real[2], real[3:]
    other = (NCCL_LOGS / "constructed-four-ranks-stack.log").read_text().splitlines()[-3:]
    out = []
    for rank in (12, 13, 14, 15):
        def mine(line):
            return line.replace("[rank13]:", f"[rank{rank}]:").replace(" Rank 1]", f" Rank {rank - 12}]")
        out += [mine(failure), mine(header)] + (other if rank == 15 else frames)
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("log", ["four-ranks-progress", "vllm-23448-rank-behind.log", "nccl-1610-two-subgroups.log",
                                 "053-nccl-watchdog-tokenize-30min.log"])
def test_suspects_of_a_log_scanned_in_ranges_equal_one_scan(index, log):
    if log == "four-ranks-progress":
        data = _four_ranks_with_progress()
    elif log.startswith("053"):
        data = (ROOT / "tests" / "corpus" / "dev" / log).read_bytes()
    else:
        data = (NCCL_LOGS / log).read_bytes()
    d = Diagnosis(index)
    d.feed(log, data)
    d.close(log)
    whole = d.report()["suspects"]
    if log == "four-ranks-progress":
        assert pairs({"suspects": whole}) == [[15, "op-mismatch"]] and "PG d03ba143" in whole[0]["why"]
    starts = _line_starts(data)
    splits = [[c] for c in starts] + [starts[::k] for k in range(1, len(starts))]
    for cuts in splits:
        d = Diagnosis(index)
        _in_ranges(d, log, data, cuts)
        assert d.report()["suspects"] == whole, cuts


def test_the_clis_parallel_scan_gives_the_suspects_of_one_scan(index, tmp_path, monkeypatch):
    # parallel.scan_file: forked processes, one range each, cut near size*i/parts (so
    # inside the stacks of this small file); on by size, forced here for a small file
    from faildex import parallel
    log = tmp_path / "job.log"
    log.write_bytes(_four_ranks_with_progress())
    one = diagnose([str(log)], index)["suspects"]
    monkeypatch.setattr(parallel, "MIN_PARALLEL", 0)
    for workers in (2, 3, 5, 8):
        parts = parallel.scan_file(str(log), str(log), 0, Diagnosis(index).plan, False, workers)
        assert parts is not None and len(parts) == workers     # it did split
        assert diagnose([str(log)], index, workers=workers)["suspects"] == one, workers
    assert pairs({"suspects": one}) == [[15, "op-mismatch"]]


def test_two_disagreeing_dumps_are_settled_by_the_rank_that_received_more(index):
    # dev r22 (a real 3-rank Gloo job; rank 1 all-reduced float64 where the others used float32):
    # rank 0 aborted on Gloo's preamble check and wrote no dump; ranks 1 and 2 dumped and disagree
    run = ROOT / "tests" / "corpus" / "ranks" / "dev" / "r22-logdir-colldtype-w3-fr"
    logs = [str(p) for p in sorted(run.rglob("*.log"))]
    dumps = [str(p) for p in sorted((run / "fr").iterdir())]
    top = diagnose(logs + dumps, index)["suspects"][0]
    assert (top["rank"], top["kind"]) == (1, "dtype-mismatch") and "more bytes than it expected" in top["why"]
    # the dumps alone: two ranks that disagree, and nothing says which one is odd
    loaded = [frdump.load(Path(p).name, Path(p).read_bytes()) for p in dumps]
    assert not [s for s in frdump.analyze(loaded) if s["kind"].endswith("mismatch")]
    assert [s["rank"] for s in frdump.analyze(loaded, received_more=[0]) if s["kind"].endswith("mismatch")] == [1]


# ---------------------------------------------------------------- Gloo's size check: who sent, who received
# (tests/data/hang/size-pairs, made by recipe/make_size_pairs.py: one rank's tensor is bigger,
# smaller or float64; the case says which rank, not any diagnoser)
SIZE_PAIRS = YAML(typ="safe").load((HANG / "size-pairs" / "cases.yaml").read_text())


@pytest.mark.parametrize("case", sorted(SIZE_PAIRS))
def test_a_size_mismatch_names_the_odd_rank_among_the_two_the_algorithm_leaves(index, case):
    want = SIZE_PAIRS[case]
    report = diagnose([str(HANG / "size-pairs" / case / "console.log")], index)
    top = report["suspects"][:2]
    if case == "broadcast-root-bigger":
        # three children of the root aborted, all receiving from rank 0: it is decided
        assert (top[0]["rank"], top[0]["kind"]) == (want["odd"], "size-mismatch")
        assert report["verdict"].startswith(f"Rank {want['odd']} called broadcast with a bigger tensor")
    elif case == "broadcast-relay-bigger":
        # no rank printed a traceback: the collective, and so the sender, is unknown; only the
        # rank that aborted is named, with both possibilities
        assert len(report["suspects"]) == 1 and report["suspects"][0]["rank"] != want["odd"]
        assert "a peer sent a bigger one" in report["suspects"][0]["why"]
    else:
        assert [s["kind"] for s in top] == ["size-mismatch", "size-mismatch"]
        assert want["odd"] in [s["rank"] for s in top]
        receiver, sender = top[0]["rank"], top[1]["rank"]
        assert report["job"]["size_pair"] == {"op": want["op"], "sender": sender, "receivers": [receiver]}
        assert "cannot tell" in report["verdict"] and f"in {want['op']}" in report["verdict"]


# NCCL RAS status documents (`ncclras -f json`), printed by NCCL's own JSON writer for a
# set state (tests/data/ras/make_ras_json.py says how)
RAS = ROOT / "tests" / "data" / "ras"


def test_an_nccl_ras_json_status_is_a_dump_not_a_log():
    head = (RAS / "ras-2.30.7-rank5-behind.json").read_bytes()[:8192]
    assert is_artifact(head) == "ras"
    # a flight-recorder dump in JSON form is not taken for one
    assert is_artifact(b'{"version": "2.9", "pg_config": {}, "entries": []}') == "fr"


def test_a_rank_that_launched_fewer_collectives_is_the_hang_named_from_ras_json(index):
    r = diagnose([str(RAS / "ras-2.30.7-rank5-behind.json")], index)
    top = r["suspects"][0]
    assert (top["rank"], top["kind"], top["host"]) == (5, "behind", "10.0.77.185")
    assert [s["rank"] for s in r["suspects"]] == [5]
    assert r["primary"]["id"] == "collective-hang-one-rank-stuck"
    ev = top["evidence"][0]
    # the line of rank 5's entry in the document, as printed
    line = (RAS / "ras-2.30.7-rank5-behind.json").read_text().splitlines()[ev["line"] - 1]
    assert line.strip() == '"rank": 5,'
    assert r["verdict"].startswith("Rank 5 on 10.0.77.185 is the first suspect")


def test_a_missing_rank_in_nccl_2_28_ras_json_is_read_despite_its_missing_comma(index, capsys):
    path = RAS / "ras-2.28.9-rank3-missing.json"
    with pytest.raises(ValueError):
        json.loads(path.read_text())      # NCCL 2.28.7-2.28.9 print it so (fixed in 2.29.2)
    r = diagnose([str(path)], index)
    top = r["suspects"][0]
    assert (top["rank"], top["kind"], top["host"]) == (3, "missing", "10.0.77.186")
    assert "not answering" in top["why"] and r["primary"]["id"] == "collective-hang-one-rank-stuck"
    code, out, _ = run_cli(capsys, index, str(path))
    assert code == 0 and "Rank 3 on 10.0.77.186 is the first suspect" in out


def test_a_healthy_ras_json_status_names_nobody(index):
    r = diagnose([str(RAS / "ras-2.29.7-healthy.json")], index)
    assert r["suspects"] == [] and r["primary"] is None
    assert r["inputs"][-1]["kind"] == "NCCL RAS status (JSON, NCCL 2.29.7, 2 communicators)"


def test_a_broken_ras_json_status_gets_one_line(capsys, index, tmp_path):
    bad = tmp_path / "ras.json"
    bad.write_text('{"nccl_version": "2.29.7", "communicators": [ {\n')
    code, _, err = run_cli(capsys, index, str(bad))
    assert code == 2 and f"{bad}: not an NCCL RAS JSON status" in err and err.count("\n") == 1
