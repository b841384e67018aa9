"""The engine: scanning, prefixes, reasoning, renderings, the CLI contract."""
from __future__ import annotations

import ast
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from faildex import Diagnosis, diagnose
from faildex.lines import parse_prefix, shape
from faildex.render import redact, to_json, to_markdown, to_text

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "pyodide_app" / "faildex"
TIMEOUT_LINE = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"


def run_text(index, text: str | bytes, chunk: int | None = None, name: str = "job.log") -> dict:
    data = text.encode() if isinstance(text, str) else text
    d = Diagnosis(index)
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        d.feed(name, data[i:i + step])
    d.close(name)
    return d.report()


def primary_id(report) -> str | None:
    return report["primary"]["id"] if report["primary"] else None


# Imported inside a function, only where that function needs them: the fleet page's
# renderer (faildex[fleet]) and the repository tools of a checkout.
OPTIONAL_IMPORTS = {"fleet.py": {"jinja2", "material"}, "command.py": {"generator"}, "indexfile.py": {"generator"},
                    "scan.py": {"re2"},   # faildex[fast]: the prefilter's DFA (scan.RE2_NOTE)
                    "browser.py": {"js", "pyodide"}}   # only under Pyodide, in the worker (use_js_hit_finder)


def test_engine_imports_only_the_standard_library():
    allowed = set(sys.stdlib_module_names)
    for path in ENGINE.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                optional = root in OPTIONAL_IMPORTS.get(path.name, ()) and id(node) not in top_level
                assert root in allowed or optional, f"{path.name} imports {name}"


@pytest.mark.parametrize("prefix,expect", [
    ("[rank3]:", {"rank": 3}),
    ("[default5]:", {"local_rank": 5}),
    ("[trainer12]:", {"local_rank": 12}),
    ("[W1202 12:25:31.309826 4242 TCPStore.cpp:106] ", {"pid": 4242}),
    ("12: ", {"rank": 12}),
    ("E1202 10:11:12.345678 4242 torch/csrc/distributed/c10d/TCPStore.cpp:123] ", {"pid": 4242}),
    ("gpu-node-007:4242:4300 [3] NCCL WARN ", {"host": "gpu-node-007", "pid": 4242}),
    ("2024-03-01T10:11:12.123456789Z ", {"ts": 1709287872.123456}),
    ("[pod/trainer-worker-1/pytorch] ", {"host": "trainer-worker-1"}),
    ("Dec  2 10:11:12 node17 ", {"host": "node17"}),
    ("2024-03-01 10:11:12,500 - root - ERROR - ", {"ts": 1709287872.5}),
    # k2/icefall's setup_logger: call site, then (rank/world size) (dev-7 a006, VALL-E)
    ("2023-04-13 16:00:05,621 INFO [trainer.py:650] (5/8) ", {"rank": 5, "ts": 1681401605.621}),
])
def test_prefixes(prefix, expect):
    meta, rest = parse_prefix(prefix + "RuntimeError: boom")
    for k, v in expect.items():
        assert meta.get(k) == pytest.approx(v) if k == "ts" else meta.get(k) == v, (k, meta)


def test_nested_prefixes():
    meta, rest = parse_prefix("2024-03-01T10:11:12Z [pod/w-3/main] [rank7]:RuntimeError: x")
    assert meta["rank"] == 7 and meta["host"] == "w-3" and meta["ts"] == pytest.approx(1709287872)
    assert rest == "RuntimeError: x"


def test_a_shippers_host_word_is_read_only_before_a_known_prefix():
    # "TIMESTAMP HOST [rankN]: ..." as a log shipper writes a job's lines (dev sealed-f-f08): the
    # rank is the torchrun prefix's, the host the shipper's word
    meta, rest = parse_prefix("2026-12-05T15:50:43.096Z gpu-host-3 [rank0]: AssertionError: x")
    assert (meta["rank"], meta["host"], meta.get("rank_from"), rest) == (0, "gpu-host-3", None, " AssertionError: x")
    meta, rest = parse_prefix("2026-12-05 15:50:44 node-1.cluster.internal E1205 15:50:44.105000 25 api.py:1] failed")
    assert (meta["host"], meta["pid"], rest) == ("node-1.cluster.internal", 25, "failed")
    # a message's first word is no host
    meta, rest = parse_prefix("2026-12-05T15:50:43Z Epoch 3: loss 2.1")
    assert "host" not in meta and rest == "Epoch 3: loss 2.1"


def test_mpirun_and_pdsh_prefixes_give_the_task_and_the_host():
    # Open MPI's `mpirun --tag-output` ("[jobid,rank]<stream>:") and pdsh's "host: ", the
    # transport of DeepSpeed's multi-node runner, around torchrun's or c10d's own prefix
    meta, rest = parse_prefix("[1,3]<stderr>:[rank3]: RuntimeError: boom")
    assert (meta["task"], meta["rank"], meta.get("rank_from"), rest) == (3, 3, None, " RuntimeError: boom")
    meta, rest = parse_prefix("[1,0]<stdout>:step 3 loss 0.5")
    assert (meta["rank"], meta["rank_from"], rest) == (0, "task", "step 3 loss 0.5")
    meta, rest = parse_prefix("worker-1: [rank0]: Traceback (most recent call last):")
    assert (meta["host"], meta["rank"], rest) == ("worker-1", 0, " Traceback (most recent call last):")
    meta, rest = parse_prefix("node1: [2026-12-05 10:00:00,123] [INFO] [launch.py:262:sigkill_handler] x")
    assert meta["host"] == "node1" and "ts" in meta
    # a message is no host, whatever follows it
    for line in ("RuntimeError: [rank0]: x", "Epoch 3: [rank0]: loss"):
        assert "host" not in parse_prefix(line)[0], line


def test_vllm_logger_and_process_prefixes():
    # vLLM's logger, new ("[file.py:N]") and old ("file.py:N]") forms, behind its process tag,
    # as entries/healthy/vllm-*.log and vLLM issue threads print them
    meta, rest = parse_prefix("(EngineCore_0 pid=1358) INFO 09-03 00:36:27 [core.py:636] Engine started")
    assert (meta["pid"], meta["level"], rest) == (1358, "I", "Engine started") and "ts" in meta
    meta, rest = parse_prefix("ERROR 06-13 02:36:52 async_llm_engine.py:532] Engine iteration timed out.")
    assert (meta["level"], rest) == ("E", "Engine iteration timed out.")
    meta, rest = parse_prefix("(RayWorkerWrapper pid=1234, ip=10.0.0.5) ERROR 11-02 10:00:01 worker_base.py:12] x")
    assert (meta["host"], rest) == ("10.0.0.5", "x")
    assert parse_prefix("INFO: Started server process [7]")[1] == "INFO: Started server process [7]"


def test_shape_folds_variable_parts():
    a = shape("[rank3]:2024-01-01 10:00:00,001 step 1234 at 0x7f00aa /data/run1/x.pt failed")
    b = shape("[rank9]:2024-02-02 11:11:11,999 step 99 at 0x1234 /other/path.pt failed")
    assert a == b


def test_found_in_any_chunking(index):
    text = "noise line\n" * 5000 + "  raise RendezvousTimeoutError\n" + TIMEOUT_LINE + "tail\n" * 100
    for chunk in (7, 4096, 65536, None):   # byte-sized chunks: the property tests
        r = run_text(index, text, chunk)
        assert primary_id(r) == "torchrun-rendezvous-timeout", chunk
        assert r["evidence"][0]["line"] == 5001


def test_line_numbers_with_crlf_and_carriage_returns(index):
    text = "a\r\nb\r\n" + "\rEpoch 1: 10%|#| 1/10" * 200 + "\r" + TIMEOUT_LINE
    r = run_text(index, text)
    ev = r["evidence"][0]
    assert ev["line"] == 3
    assert ev["text"] == TIMEOUT_LINE.strip()  # the progress segments are not part of the line


def test_ansi_colour_codes_do_not_hide_the_error(index):
    r = run_text(index, "\x1b[31m" + TIMEOUT_LINE.strip() + "\x1b[0m\n")
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    assert "\x1b" not in r["evidence"][0]["text"]


def test_colour_codes_as_syslog_writes_them_do_not_hide_the_rank_or_the_error(index):
    # rsyslog writes the ESC byte as "#033" (vllm-project/vllm#1160 shows "#033[2m#033[33m(raylet)")
    r = run_text(index, "#033[2m[rank3]:#033[0m " + TIMEOUT_LINE.strip() + "#033[0m\n")
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    ev = r["evidence"][0]
    assert "#033" not in ev["text"] and ev.get("rank") == 3, ev


def test_invalid_utf8_and_nul_bytes_before_the_error(index):
    data = b"ok\n\xff\xfe\xfa bad bytes \x00\x00 here\n" * 100 + TIMEOUT_LINE.encode()
    r = run_text(index, data)
    assert primary_id(r) == "torchrun-rendezvous-timeout"


def test_utf16_log_is_decoded(index):
    data = ("start\n" + TIMEOUT_LINE).encode("utf-16")
    r = run_text(index, data, chunk=33)
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    assert "UTF-16" in " ".join(r["inputs"][0]["messages"])


def test_very_long_line_ending_in_the_error(index):
    data = b"x" * (5 << 20) + b" " + TIMEOUT_LINE.encode()
    r = run_text(index, data, chunk=1 << 20)
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    assert len(r["evidence"][0]["text"]) <= 1000


def test_empty_and_binary_inputs(index):
    r = run_text(index, b"")
    assert r["primary"] is None and r["inputs"][0]["status"] == "empty"
    blob = bytes(range(256)) * 4096
    r = run_text(index, blob)
    assert r["primary"] is None and r["inputs"][0]["status"] == "binary"


HEALTHY = sorted((ROOT / "entries" / "healthy").glob("*.log"))


@pytest.mark.parametrize("log", HEALTHY, ids=lambda p: p.name)
def test_healthy_log_has_no_diagnosis_and_few_candidates(index, log):
    """A healthy run is diagnosed as nothing, and the prefilter passes at most 1% of its
    lines to the signatures (what makes NCCL_DEBUG=INFO or vLLM request logs fast)."""
    r = diagnose([str(log)], index)
    assert r["primary"] is None, r["primary"]
    assert r["alternatives"] == []
    got = r["inputs"][0]
    # Lines that say "error" are candidates by design (an unknown failure still gets its
    # first error and last exception): they are counted apart, and healthy NCCL SHARP
    # start-ups print them by the dozen. Every other candidate is a cost the anchor choice
    # must avoid: at most 1% of the lines (a short excerpt may hold up to 8, e.g. a
    # completion marker and a C++ exception trace).
    budget = max(0.01 * got["lines"], 8)
    others = got["candidates"] - got["error_lines"]
    assert others <= budget, f"{others} of {got['lines']} lines were candidates without an error"
    assert got["error_lines"] <= max(0.02 * got["lines"], 8), f"{got['error_lines']} error lines"
    recorded = index["healthy_candidate_rates"][f"entries/healthy/{log.name}"]
    assert recorded * got["lines"] <= max(0.02 * got["lines"], 16)


def test_healthy_corpus_is_there():
    assert len(HEALTHY) >= 40, "entries/healthy/ must hold the healthy corpus"


def test_json_is_deterministic(index, tmp_path):
    p = tmp_path / "a.log"
    p.write_text("[rank1]:x\n" + TIMEOUT_LINE)
    a = to_json(diagnose([str(p)], index))
    b = to_json(diagnose([str(p)], index))
    assert a == b
    data = json.loads(a)
    for key in ("faildex_report", "primary", "alternatives", "collateral", "evidence", "facts",
                "missing", "next_action"):
        assert key in data
    assert set(data["primary"]) >= {"id", "title", "confidence"}


def test_unknown_error_reports_first_error_and_last_exception(index):
    text = ("step 1 ok\nERROR: something odd in user code\n"
            "Traceback (most recent call last):\n  File \"train.py\", line 3\n"
            "KeyError: 'labels'\n")
    r = run_text(index, text)
    assert r["primary"] is None
    u = r["unmatched"]
    assert u["first_error"]["line"] == 2
    assert u["last_exception"]["text"] == "KeyError: 'labels'"


def test_gzip_and_truncated_gzip(index, tmp_path):
    body = ("noise\n" * 20000 + TIMEOUT_LINE).encode()
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(gzip.compress(body))
    r = diagnose([str(gz)], index)
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(TIMEOUT_LINE.encode() + "".join(f"noise {i}\n" for i in range(200000)).encode())[:-2000])
    r = diagnose([str(cut)], index)
    assert primary_id(r) == "torchrun-rendezvous-timeout"
    assert r["inputs"][0]["status"] == "truncated"


def test_baseline_lists_new_events_first(index, tmp_path):
    good = tmp_path / "good.log"
    bad = tmp_path / "bad.log"
    common = "".join(f"[rank0]:W1130 10:00:{i % 60:02d}.000000 1 x.py:1] UserWarning: old warning {i}\n"
                     for i in range(50))
    good.write_text(common)
    bad.write_text(common + "[rank1]:RuntimeError: brand new failure at step 77\n")
    r = diagnose([str(bad)], index, baseline=[str(good)])
    new = r["baseline"]["new_events"]
    assert [e["line"] for e in new] == [51]
    assert "brand new failure" in new[0]["text"]


def test_redaction_is_stable_and_complete():
    text = ("node-a.cluster.internal:123:456 [0] NCCL WARN x\nfailed at node-a.cluster.internal\n"
            "10.1.2.3 connect to 10.1.2.3 and fe80::1:2:3:4\n/home/alice/run.py\nbob@example.com\n"
            "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx WANDB_API_KEY=0123456789abcdef AKIAABCDEFGHIJKLMNOP\n"
            "Authorization: Bearer abc.def.ghijklmnop\n")
    out = redact(text)
    for secret in ("node-a", "10.1.2.3", "fe80", "alice", "bob@", "hf_abc", "0123456789abcdef",
                   "AKIA", "abc.def"):
        assert secret not in out, (secret, out)
    assert out.count("<ip-1>") == 2  # same value, same placeholder
    assert out.count("<host-1>") == 2


def test_markdown_ticket_keeps_hostile_log_text_inert(index):
    """A log line with backtick fences and HTML stays inside a code block of the ticket."""
    import markdown
    hostile = "```</code><script>alert(1)</script><img src=x onerror=alert(2)> ````"
    r = run_text(index, hostile + "\n" + TIMEOUT_LINE)
    md = to_markdown(r)
    html = markdown.markdown(md, extensions=["fenced_code", "tables"])
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "RendezvousTimeoutError" in html


def test_text_rendering_names_the_entry(index):
    out = to_text(run_text(index, TIMEOUT_LINE))
    assert "torchrun-rendezvous-timeout" in out and "Next:" in out


# ---------------------------------------------------------------- CLI contract

@pytest.fixture(scope="module")
def index_file(index, tmp_path_factory):
    path = tmp_path_factory.mktemp("index") / "index.json"
    path.write_text(json.dumps(index))
    return str(path)


def faildex(*args, stdin: bytes | None = None, index: str | None = None):
    extra = ["--index", index] if index else []
    return subprocess.run([sys.executable, "-m", "faildex", "diagnose", *extra, *args],
                          cwd=ROOT, input=stdin, capture_output=True, timeout=300)


def test_cli_builds_its_own_index_and_reads_stdin(entries):
    p = faildex("--format", "json", "-", stdin=TIMEOUT_LINE.encode())
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["primary"]["id"] == "torchrun-rendezvous-timeout"


@pytest.mark.parametrize("make,needle", [
    (lambda t: str(t / "missing.log"), "no such file"),
    (lambda t: str(t), "is a directory"),
])
def test_cli_unreadable_inputs_exit_2_with_one_line(tmp_path, index_file, make, needle):
    p = faildex(make(tmp_path), index=index_file)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert needle in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_cli_permission_denied(tmp_path, index_file):
    p = tmp_path / "secret.log"
    p.write_text("x")
    p.chmod(0)
    r = faildex(str(p), index=index_file)
    assert r.returncode == 2 and "permission denied" in r.stderr.decode()


def test_cli_markdown_redacted(tmp_path, index_file):
    p = tmp_path / "a.log"
    p.write_text("hostname=gpu-17.corp.example.com\n/home/carol/x.py\n" + TIMEOUT_LINE)
    r = faildex("--format", "markdown", "--redact", str(p), index=index_file)
    out = r.stdout.decode()
    assert r.returncode == 0 and "carol" not in out and "gpu-17" not in out


# ---------------------------------------------------------------- reasoning across ranks

def _example(entries, entry_id: str, i: int = 0) -> str:
    from generator.validate import example_text
    e = next(e for e in entries if e.id == entry_id)
    return example_text(e, e.data["examples"][i])


def _quoted(entries, entry_id: str, needle: str) -> str:
    """The shortest line of an entry's examples that holds needle: a line as a real
    report printed it."""
    e = next(e for e in entries if e.id == entry_id)
    return min((ln for i in range(len(e.data["examples"]))
                for ln in (_example(entries, entry_id, i) or "").splitlines() if needle in ln), key=len)


def test_rank_that_died_first_is_primary_and_the_rest_collateral(entries, index, tmp_path):
    """Rank 3 runs out of memory; ranks 0-2 then time out in the watchdog and the
    agent prints ChildFailedError. The logs are the entries' own real examples."""
    files = []
    for rank in range(3):
        p = tmp_path / f"rank{rank}.log"
        p.write_text(_example(entries, "nccl-watchdog-timeout"))
        files.append(str(p))
    oom = tmp_path / "rank3.log"
    oom.write_text(_example(entries, "cuda-out-of-memory"))
    agent = tmp_path / "agent.log"
    agent.write_text(_example(entries, "elastic-child-failed"))
    r = diagnose(files + [str(oom), str(agent)], index)
    assert r["primary"]["id"] == "cuda-out-of-memory"
    assert r["primary"]["first_seen"]["source"].endswith("rank3.log")
    collateral = {c["id"] for c in r["collateral"]}
    assert {"nccl-watchdog-timeout", "elastic-child-failed"} <= collateral
    assert "nccl-watchdog-timeout" not in {a["id"] for a in r["alternatives"]}


def test_downstream_report_alone_names_itself_and_asks_for_the_cause(entries, index):
    r = run_text(index, _example(entries, "elastic-child-failed"))
    assert r["primary"]["id"] == "elastic-child-failed"
    assert r["primary"]["confidence"] <= 0.6
    assert any(m["fact"] == "initiating_log" for m in r["missing"])


def test_versions_decide(entries, index):
    """Entries that declare a PyTorch range: the report says whether the version in the
    log is affected (and by which release it is fixed), and a version outside the range
    lowers the confidence."""
    checked = 0
    for e in entries:
        for a in e.data.get("affects", []):
            if a["software"] != "pytorch" or not (a.get("introduced") or a.get("fixed")):
                continue
            inside = a.get("introduced") or "1.13.0"
            if a.get("fixed"):
                outside = a["fixed"]
            else:
                major, minor = (int(x) for x in a["introduced"].split(".")[:2])
                outside = f"{major}.{minor - 1}.0" if minor else f"{major - 1}.13.0"
            log = _example(entries, e.id)
            old = run_text(index, f"PyTorch version: {inside}\n" + log)
            new = run_text(index, f"PyTorch version: {outside}\n" + log)
            assert old["primary"]["id"] == e.id
            assert any(v.startswith(f"{e.id}: Your PyTorch {inside} is in the affected range")
                       for v in old["versions"]), old["versions"]
            if a.get("fixed"):
                assert any(f"{a['fixed']} fixes it" in v for v in old["versions"])
            assert any(v.startswith(f"{e.id}: Your PyTorch {outside} is outside") for v in new["versions"])
            new_conf = new["primary"]["confidence"] if new["primary"] and new["primary"]["id"] == e.id else 0
            assert new_conf < old["primary"]["confidence"]
            checked += 1
    assert checked, "no entry declares a PyTorch version range"


def test_report_links_point_at_the_site():
    from faildex.render import SITE
    site_url = re.search(r"^site_url:\s*(\S+)", (ROOT / "mkdocs.yml").read_text(), re.M).group(1)
    assert SITE == site_url


# ---------------------------------------------------------------- guesses: look-alikes and nearest

DEV_LOGS = sorted((ROOT / "tests" / "corpus" / "dev").glob("*.log"))


def test_lookalikes_fill_the_alternatives_from_the_primarys_discriminators(index):
    """With a diagnosis made, the free alternative slots hold the failures its
    discriminators tell it from (what to rule out next), as guesses below every ranked
    finding, each saying which check tells them apart."""
    filled = 0
    for log in DEV_LOGS:
        r = diagnose([str(log)], index)
        if r["primary"] is None:
            continue
        named: dict[str, list] = {}
        for d in index["entries"][r["primary"]["id"]]["discriminators"]:
            named.setdefault(d["elsewhere"], []).append(d["elsewhere_when"].rstrip("."))
        ids = [a["id"] for a in r["alternatives"]]
        assert len(ids) == len(set(ids)) and r["primary"]["id"] not in ids, log.name
        guessed = [a for a in r["alternatives"] if a["why"].startswith("Not ruled out")]
        ranked = [a for a in r["alternatives"] if not a["why"].startswith("Not ruled out")]
        if guessed:
            filled += 1
            assert len(r["alternatives"]) <= 3, log.name
            assert r["alternatives"][-len(guessed):] == guessed, "guesses come after ranked findings"
        for a in guessed:
            assert a["id"] in named and a["band"] == "guess" and a["count"] == 0, (log.name, a)
            assert a["confidence"] <= 0.15 < r["primary"]["confidence"], (log.name, a)
            assert any(w in a["why"] for w in named[a["id"]]), (log.name, a["why"])
        assert len(guessed) <= max(0, 3 - len(ranked)), log.name
    assert filled >= 70, f"only {filled} dev logs got look-alikes"   # 83 of 98 on 2026-12-03


def test_lookalikes_prefer_the_one_whose_words_the_diagnosis_does_not_explain(index, entries):
    """nccl-fallback-to-socket names four look-alikes; the log's own lines decide their
    order (each line taken from a real report quoted in an entry's examples)."""
    from faildex.reason import Candidate, lookalikes

    refused = _quoted(entries, "nccl-docker-interface", "failed : Connection refused")
    ib = _quoted(entries, "nccl-ib-retry-exceeded", "Got completion from peer")
    table = index["entries"]
    primary = Candidate("nccl-fallback-to-socket", table["nccl-fallback-to-socket"])
    assert [a["id"] for a in lookalikes(primary, [refused], table, set(), 1, {})] == ["nccl-docker-interface"]
    assert [a["id"] for a in lookalikes(primary, [ib], table, set(), 1, {})] == ["nccl-ib-retry-exceeded"]
    assert lookalikes(primary, [ib], table, {"nccl-ib-retry-exceeded"}, 1, {})[0]["id"] != "nccl-ib-retry-exceeded"
    assert lookalikes(primary, [ib], table, set(), 0, {}) == []


def test_a_lookalike_whose_check_the_log_cannot_make_comes_first_and_one_it_rules_out_goes(index):
    """worker-sigkill-host-oom tells itself from the Slurm and Kubernetes memory-limit
    kills by the constraint in the kernel's oom-kill line. Without that line (a bare
    exit -9 / 137) neither is ruled out and they lead the look-alikes; with
    CONSTRAINT_NONE the host ran out of RAM and both are ruled out."""
    from faildex.reason import Candidate, lookalikes

    table = index["entries"]
    primary = Candidate("worker-sigkill-host-oom", table["worker-sigkill-host-oom"])
    checked = {d["elsewhere"] for d in primary.meta["discriminators"] if d.get("fact") == "oom_constraint"}
    assert checked == {"slurm-oom-kill", "k8s-pod-oomkilled"}
    bare = lookalikes(primary, [], table, set(), 3, {})
    assert {a["id"] for a in bare[:2]} == checked
    assert all("lacks the line" in a["why"] for a in bare[:2]) and "lacks the line" not in bare[2]["why"]
    host = lookalikes(primary, [], table, set(), 9, {"oom_constraint": "CONSTRAINT_NONE"})
    assert host and not checked & {a["id"] for a in host}
    # CONSTRAINT_MEMCG answers the check against the primary: the others stay, first
    memcg = lookalikes(primary, [], table, set(), 2, {"oom_constraint": "CONSTRAINT_MEMCG"})
    assert {a["id"] for a in memcg} == checked and all("points to it" in a["why"] for a in memcg)


def test_a_log_that_ends_in_an_error_line_gets_nearest_guesses_and_one_that_goes_on_does_not(index):
    """No signature and no exception: an error line at the end of a log is where it
    died, and the nearest entries come back as guesses; the same line followed by a
    healthy run's progress is something the run survived."""
    # what pip prints when no wheel fits (pip's _internal/index/package_finder.py)
    error = ("ERROR: Could not find a version that satisfies the requirement torch==2.99.0 "
             "(from versions: none)\nERROR: No matching distribution found for torch==2.99.0\n")
    died = run_text(index, "step 1 loss 2.0\nstep 2 loss 1.9\n" + error)
    assert died["primary"] is None and died["unmatched"]
    assert died["alternatives"] and all(a["band"] == "guess" for a in died["alternatives"])
    survived = run_text(index, error + "".join(f"step {i} loss 1.{i % 10}\n" for i in range(40)))
    assert survived["primary"] is None and survived["alternatives"] == []


def test_a_wrapper_never_outranks_a_specific_finding_even_a_downstream_one(entries, index):
    """vLLM's "Engine core initialization failed. See root cause above." only says the
    engine process failed; a Gloo connect failure printed after it (downstream itself:
    a peer that went away) still names the failure. Both lines are quoted from the
    entries' real examples."""
    engine = _quoted(entries, "vllm-engine-dead", "Engine core initialization failed")
    gloo = _quoted(entries, "gloo-connection-error", "connectFullMesh failed")
    assert index["entries"]["vllm-engine-dead"]["wrapper"] and index["entries"]["gloo-connection-error"]["downstream"]
    alone = run_text(index, engine + "\n")
    assert alone["primary"]["id"] == "vllm-engine-dead"
    both = run_text(index, engine + "\n" + gloo + "\n")
    assert both["primary"]["id"] == "gloo-connection-error"
    assert "vllm-engine-dead" in {c["id"] for c in both["collateral"]}


def test_warnings_the_log_goes_on_after_without_error_do_not_make_a_diagnosis(index):
    """A line that only supports a failure (here PyTorch's size-mismatch message without
    the tab its RuntimeError adds, as a non-strict loader logs it) names the failure
    when the log ends there, and is set aside when the run goes on for WENT_ON_LINES
    without an error line. The messages are the entry's reproduced example; the lines
    after them are a real healthy HF Trainer run."""
    from faildex.reason import WENT_ON_LINES

    ex = ROOT / "entries" / "checkpoint" / "state-dict-size-mismatch" / "non-strict-load-messages.log"
    messages = ex.read_text()
    healthy = (ROOT / "entries" / "healthy" / "hf-trainer-tiny-bert-cpu.log").read_text().splitlines()
    assert not any("rror" in line for line in healthy[:WENT_ON_LINES + 5])
    alone = run_text(index, messages)
    assert primary_id(alone) == "state-dict-size-mismatch"
    went_on = run_text(index, messages + "\n".join(healthy[:WENT_ON_LINES + 5]) + "\n")
    assert went_on["primary"] is None
    assert [a["id"] for a in went_on["alternatives"]].count("state-dict-size-mismatch") == 1
    assert went_on["alternatives"][0]["id"] == "state-dict-size-mismatch"
    # the same lines followed by an error: they may be why it failed
    failed = run_text(index, messages + "\n".join(healthy[:WENT_ON_LINES + 5])
                      + "\nRuntimeError: shape '[4, 10]' is invalid for input of size 4000\n")
    assert primary_id(failed) == "state-dict-size-mismatch"


def test_a_downstream_report_the_log_goes_on_after_is_still_named(entries, index):
    """Only warnings are set aside when the log goes on: torchrun's "CHILD PROCESS FAILED"
    summary (the entry's MetaICL#8 example) reports a failure, and training-step lines
    after it (here WENT_ON_LINES of a real healthy run) do not make it harmless. Found by
    test_hostile's noise property: three step lines after the summary's heading lost it."""
    from faildex.reason import WENT_ON_LINES

    e = next(x for x in entries if x.id == "elastic-child-failed")
    summary = next(ex["log"] for ex in e.data["examples"] if "MetaICL" in ex["source"])
    healthy = (ROOT / "entries" / "healthy" / "hf-trainer-tiny-bert-cpu.log").read_text().splitlines()
    assert not any("rror" in line for line in healthy[:WENT_ON_LINES + 5])
    assert index["entries"]["elastic-child-failed"]["downstream"]
    for text in (summary, summary + "\n".join(healthy[:WENT_ON_LINES + 5]) + "\n"):
        assert primary_id(run_text(index, text)) == "elastic-child-failed"


def test_the_run_id_in_the_agents_log_directory_tells_a_closed_rendezvous_from_a_shared_one(index, entries):
    """torchelastic names each run's log directory after the run id (<run_id>_ and 8
    random characters). A RendezvousClosedError under torchrun's default id "none" may
    be another job's rendezvous closing: that look-alike comes first; under a job's own
    id the log rules it out. Both log-directory lines are real torchelastic output found
    in public repositories (run id 11 from torch 1.9; "none", torchrun's default)."""
    closed = _quoted(entries, "rendezvous-closed", "RendezvousClosedError")
    shared = ("INFO:torch.distributed.elastic.agent.server.local_elastic_agent:"
              "log directory set to: /tmp/torchelastic_2zzg5_sz/none_mjqneoph\n")
    own = "[INFO] 2021-06-29 12:04:55,398 local_elastic_agent: log directory set to: /tmp/torchelastic_qi74idlt/11_geuufdh6\n"
    r = run_text(index, shared + closed + "\n")
    assert primary_id(r) == "rendezvous-closed"
    assert r["alternatives"][0]["id"] == "rendezvous-duplicate-run-id"
    r = run_text(index, own + closed + "\n")
    assert primary_id(r) == "rendezvous-closed"
    assert "rendezvous-duplicate-run-id" not in [a["id"] for a in r["alternatives"]]


def test_ncclcheck_return_code_trace_names_the_failing_bootstrap(index):
    """When the WARN line that names the address is cut, NCCL's own error trace
    ("file.cc:line -> code", printed by NCCLCHECK at INFO) still shows a system error
    (code 2) leaving bootstrap.cc: the TCP bootstrap failed. The lines are the trace
    of the entry's real IPoIB example; the same trace with code 6 (a remote error) or
    through another file is not this evidence."""
    example = (ROOT / "entries/nccl/nccl-wrong-interface/ipoib-link-local.log").read_text()
    trace = [ln for ln in example.splitlines() if re.search(r"NCCL INFO [\w/]+\.cc:\d+ -> \d", ln)]
    assert any("bootstrap.cc:270 -> 2" in ln for ln in trace) and not any("WARN" in ln for ln in trace)
    r = run_text(index, "\n".join(trace) + "\n")
    assert primary_id(r) == "nccl-wrong-interface"
    assert r["primary"]["confidence"] < 0.5, "a trace alone supports, it does not prove"
    other = [ln.replace(" -> 2", " -> 6") for ln in trace]
    assert primary_id(run_text(index, "\n".join(other) + "\n")) != "nccl-wrong-interface"
    no_bootstrap = [ln for ln in trace if "bootstrap.cc" not in ln]
    assert primary_id(run_text(index, "\n".join(no_bootstrap) + "\n")) != "nccl-wrong-interface"


def test_stack_frames_do_not_make_entries_look_alike(index, entries):
    """A C++ or Python frame names code (c10::Error::Error, site-packages paths), not
    the failure: a log of frames alone resembles no entry, and the frames do not move
    the similarity of the message line they follow. Lines from the watchdog entry's
    real example."""
    from faildex.reason import is_frame_line, nearest

    lines = _example(entries, "nccl-watchdog-timeout", 1).splitlines()
    frames = [ln for ln in lines if is_frame_line(ln)]
    assert len(frames) == 4 and not any(is_frame_line(ln) for ln in lines if "what():" in ln)
    assert is_frame_line('  File "/opt/venv/lib/python3.11/site-packages/torch/serialization.py", line 1018, in save')
    assert is_frame_line("[rank0]: frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x890")
    assert nearest(frames, index["entries"]) == []
    message = [ln for ln in lines if not is_frame_line(ln)]
    assert nearest(message + frames, index["entries"]) == nearest(message, index["entries"])


def test_a_watchdog_line_cut_after_its_message_is_still_the_watchdog_timeout(index, entries):
    """The WorkNCCL(...) details are facts when they are there, never required: the
    entry's own real line cut right after "operation timeout" keeps its diagnosis, and
    the whole line still yields the facts."""
    line = next(ln for ln in _example(entries, "nccl-watchdog-timeout", 2).splitlines()
                if "Watchdog caught collective operation timeout: WorkNCCL(" in ln)
    whole = run_text(index, line + "\n")
    assert whole["primary"]["id"] == "nccl-watchdog-timeout"
    assert whole["primary"]["first_seen"]["facts"].get("op_type") == "ALLREDUCE"
    cut = line[:line.index("operation timeout") + len("operation timeout")]
    assert run_text(index, cut + "\n")["primary"]["id"] == "nccl-watchdog-timeout"


class _CountingBytes(bytes):
    """bytes that add up how many bytes their find/rfind/count calls really look at
    (memchr stops at the hit), to measure the scan's work without a clock."""
    looked = 0

    @staticmethod
    def _range(buf, args):
        start = args[1] if len(args) > 1 and args[1] is not None else 0
        end = args[2] if len(args) > 2 and args[2] is not None else len(buf)
        return max(0, start), min(len(buf), end)

    def find(self, *args):
        hit = bytes.find(self, *args)
        start, end = self._range(self, args)
        _CountingBytes.looked += (hit + 1 - start) if hit != -1 else max(0, end - start)
        return hit

    def rfind(self, *args):
        hit = bytes.rfind(self, *args)
        start, end = self._range(self, args)
        _CountingBytes.looked += (end - hit) if hit != -1 else max(0, end - start)
        return hit

    def count(self, *args):
        start, end = self._range(self, args)
        _CountingBytes.looked += max(0, end - start)
        return bytes.count(self, *args)


def test_work_per_candidate_does_not_grow_with_the_chunk(index):
    """Issue 10: every per-candidate step is bounded by its line (or WINDOW), so the
    bytes the scan looks at do not depend on how big the chunks are. Before, finding
    a candidate's line end searched the rest of the chunk for a \\r: 8 MB chunks did
    ~8x the work of 1 MB ones on a log with no \\r. Counted, not timed."""
    info = b"node1:2041:2121 [3] NCCL INFO Channel 05/32 : 3 0 via P2P/CUMEM/read\n"
    hit = b"[rank3]: RuntimeError: something failed here\n"
    block = info * 29 + hit                  # a candidate every 30th line
    data = block * ((8 << 20) // len(block))
    looked = {}
    for mb in (1, 8):
        chunk = (mb << 20) - (mb << 20) % len(block)   # whole lines: each chunk is scanned as fed
        d = Diagnosis(index)
        part = d.scan_range("job.log", 0)              # Diagnosis.feed would copy the chunks
        part.feed(b"start\n")
        _CountingBytes.looked = 0
        for i in range(0, len(data), chunk):
            part.feed(_CountingBytes(data[i:i + chunk]))
        looked[mb] = _CountingBytes.looked
        d.adopt_ranges("job.log", [part.end_range(is_last=True)])
        got = d.report()["inputs"][0]
        assert got["candidates"] >= len(data) // len(block), got["candidates"]
    # the same work whatever the chunk, and a few looks per byte, not a chunk per line
    assert looked[8] <= 1.05 * looked[1], looked
    assert looked[8] <= 40 * len(data), looked


def test_a_plan_is_compiled_once_per_index_and_mode(index):
    """Diagnosis reuses the compiled Plan of the same index object (scan.plan_for); a
    different index, the baseline mode or a host's hit finder gets its own, and a
    reused Plan gives the same report as a fresh one."""
    import copy

    from faildex import scan

    text = TIMEOUT_LINE * 3
    first, again = Diagnosis(index), Diagnosis(index)
    assert first.plan is again.plan
    assert Diagnosis(index, baseline=True).plan is not first.plan
    other = copy.deepcopy(index)
    assert Diagnosis(other).plan is not first.plan
    assert run_text(index, text) == run_text(other, text)
    try:
        scan.set_hit_finder(lambda anchors: None)
        assert Diagnosis(index).plan is not first.plan
    finally:
        scan.set_hit_finder(None)


def test_the_head_stops_reading_a_line_once_it_has_read_it_enough(index, entries):
    """The first HEAD_BYTES of an input are read for context (versions, the launcher,
    context signatures), each word from at most HEAD_KEY_LINES lines. A log whose every
    line is the tokenizers fork warning (a context signature's literal; the line is the
    entry's own) used to walk all ~15,000 lines of the head in Python; now the head is
    read in slices whose passes leave out the words already read enough. Counted, not
    timed: the lines the head looks at stay within the first slice."""
    from faildex import scan

    line = _quoted(entries, "tokenizers-fork-deadlock", "just got forked").encode() + b"\n"
    data = line * (scan.HEAD_BYTES // len(line) + 100)
    plan = scan.Plan(index)

    class Counting:
        def __init__(self, rx):
            self.rx, self.calls = rx, 0

        def __call__(self, seg):
            self.calls += 1
            return self.rx(seg)

    plan.head_words_in = Counting(plan.head_words_in)
    src = scan.Source("job.log", 0, plan)
    src.feed(data)
    src.close(None)
    per_slice = scan.HEAD_SLICE // len(line) + 1
    assert scan.HEAD_KEY_LINES < per_slice < len(data) // len(line) // 4
    assert plan.head_words_in.calls <= per_slice, plan.head_words_in.calls
    found = [n for n, s in enumerate(index["signatures"]) if s["entry"] == "tokenizers-fork-deadlock"
             and n in src.findings]
    assert found, "the warning was still read"


def test_a_pass_finds_every_line_holding_one_of_its_anchors_whether_its_key_is_rare_or_not():
    """A pass (scan._keyed_trie + _collect_spans) keys its anchors on one byte they all
    hold, at their start or inside them (a lookbehind checks what precedes the key).
    Where the key is rare the pass hops with bytes.find; where it is frequent it hands
    the rest of the buffer to re's own scan: either way it marks exactly the lines
    that hold an anchor."""
    import random

    from faildex.scan import _collect_spans, _keyed_trie

    anchors = [b"CUDA error", b"GPU has fallen", b"UDA driver", b"Unexpected key", b"CPU"]
    rx = re.compile(_keyed_trie(b"U", anchors))
    rng = random.Random(7)
    words = [b"CUDA", b"error", b"GPU", b"CPU", b"has", b"fallen", b"Unexpected", b"key", b"UDA", b"driver",
             b"INFO", b"NCCL", b"ok"]
    for dense in (False, True):
        lines = []
        for _ in range(5000):
            pool = words if dense else [w for w in words if b"U" not in w]
            line = b" ".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
            if not dense and rng.random() < 0.01:
                line += b" " + rng.choice(anchors)
            lines.append(line)
        buf = b"\n".join(lines) + b"\n"
        spans: dict[int, int] = {}
        calls = {"match": 0, "search": 0}

        class Counted:   # the pass's regex, counting how it is used
            def match(self, *a):
                calls["match"] += 1
                return rx.match(*a)

            def search(self, *a):
                calls["search"] += 1
                return rx.search(*a)

        _collect_spans([(b"U", Counted())], buf, len(buf), False, spans)
        # sparse: memchr hops and a match at each key; dense: re's own scan took over
        assert (calls["search"] > 0) == dense, calls
        want, pos = {}, 0
        for line in lines:
            if any(a in line for a in anchors):
                want[pos] = pos + len(line)
            pos += len(line) + 1
        assert spans == want, dense


def test_a_comparison_is_worded_as_the_values_stand():
    """A discriminator's check says what the log's values are: "above" when the
    comparison holds, "at most" when it does not (it once printed the operator's word
    whatever the outcome, telling the user 127 MiB "is at most" 90 MiB)."""
    from faildex.reason import check

    d = {"compare": "reserved_unallocated > tried"}
    holds, facts, words = check(d, {"reserved_unallocated": "127.09 MiB", "tried": "90.00 MiB"})
    assert holds is True and facts == ("reserved_unallocated", "tried")
    assert "(127.09 MiB) is above tried (90.00 MiB)" in words
    holds, _, words = check(d, {"reserved_unallocated": "20.00 MiB", "tried": "90.00 MiB"})
    assert holds is False
    assert "(20.00 MiB) is at most tried (90.00 MiB)" in words


# ---------------------------------------------------------------- live candidates (issue 31)

def _benign_anchor_lines(anchor: str, n: int, seed: int) -> bytes:
    """INFO lines that carry an anchor among ids and numbers (bench/engine.py anchor_line_file)."""
    import random
    rng = random.Random(f"{anchor}/{seed}")
    return "".join(f"[2026-12-05 10:{rng.randrange(60):02d}:{rng.randrange(60):02d},{rng.randrange(1000):03d}] INFO "
                   f"[rank{rng.randrange(64)}] worker {rng.getrandbits(32):08x}: step {rng.randrange(10**6)} "
                   f"note {anchor} (batch {rng.randrange(4096)})\n" for _ in range(n)).encode()


def _literals(index) -> frozenset:
    """The signatures' literals (or their anchors, for those without one): a benign line
    holding none of them and no reader's word is skipped by any sorting of candidates."""
    words = {s["literal"] for s in index["signatures"] if s["literal"]}
    words |= {a for s in index["signatures"] if not s["literal"] for a in s["anchors"]}
    return frozenset(w.encode() for w in words)


def test_candidates_sorted_in_bulk_give_the_reports_of_reading_each_one(index, monkeypatch, tmp_path):
    """A buffer's candidate lines are sorted in bulk: one search for the readers' words
    (scan.Source._live), one with the union of the signatures' supersets over the rest
    (Source._signature_lines): a line that holds no reader's word and that no signature
    matches is not read one by one. Read so or read line by line (BULK_LINES
    past any buffer), every log of both corpora, the healthy corpus, every profile line type and
    benign lines around every 8th anchor with a real failure planted among them get the same
    report; and the planted files are mostly skipped (counted, not timed)."""
    from bench.profiles import generate_line_type, line_types
    from faildex import scan

    logs = sorted((ROOT / "tests" / "corpus").glob("*/*.log")) + HEALTHY
    for n, lt in enumerate(line_types()):
        generate_line_type(tmp_path / f"{n:02d}.log", lt, 60_000, seed=2)
        logs.append(tmp_path / f"{n:02d}.log")
    failure = TIMEOUT_LINE.encode()
    planted = []
    for n, anchor in enumerate(index["anchors"][::8]):
        p = tmp_path / f"anchor{n:03d}.log"
        p.write_bytes(_benign_anchor_lines(anchor, 300, n) + failure + _benign_anchor_lines(anchor, 300, -n))
        planted.append(p)
    logs += planted
    read = {}
    original = scan.Source._candidate

    def counted(self, *args):
        read[self.name] = read.get(self.name, 0) + 1
        return original(self, *args)

    monkeypatch.setattr(scan.Source, "_candidate", counted)
    got = {}
    for bulk in (1, 10 ** 9):
        monkeypatch.setattr(scan, "BULK_LINES", bulk)
        read.clear()
        got[bulk] = [diagnose([str(p)], index) for p in logs]
        if bulk == 1:
            skipped = sum(r["inputs"][0]["candidates"] - read.get(str(p), 0) for p, r in zip(planted, got[bulk][-len(planted):]))
    assert len(logs) > 300
    for path, a, b in zip(logs, got[1], got[10 ** 9]):
        assert a == b, path.name
    cands = sum(r["inputs"][0]["candidates"] for r in got[1][-len(planted):])
    # the lines of 23 of these 110 anchors are read in full (a reader's word such as "Error",
    # or a signature matches them): 79 % of the candidates are skipped today
    assert cands > 10_000 and skipped > 0.65 * cands, (skipped, cands)
    # the planted line is found among the benign ones (some anchors' lines are findings too)
    named = [{c["id"] for c in [r["primary"] or {}] + r["alternatives"] if c} for r in got[1][-len(planted):]]
    assert all("torchrun-rendezvous-timeout" in ids for ids in named), named


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_a_benign_line_holding_a_signatures_literal_is_not_checked_line_by_line(index, monkeypatch, tmp_path, kind):
    """A benign warning that holds an anchor and common words of signatures (PyTorch's
    autograd-fallback UserWarning, printed by every rank on every step of the 64-rank
    profile: 9.5 % of its lines, too few for the anchor to be demoted, DENSE_NOTE) is checked
    in bulk with the union of the signatures' supersets (Source._signature_lines), not line
    by line (Source._matches), and no line of it is read in full; the failure after it is
    found."""
    from bench.profiles import generate_profile
    from faildex import scan

    _prefilter(kind, monkeypatch)
    path = tmp_path / "torchrun64.log"
    generate_profile(path, "torchrun-64", 3_000_000, seed=3, healthy=True)
    data = path.read_bytes()
    path.write_bytes(data + TIMEOUT_LINE.encode())
    warnings = data.count(b"an autograd kernel was not registered")
    assert 0.05 * data.count(b"\n") < warnings < data.count(b"\n") / scan.DENSE_SHARE
    calls = {"_matches": 0, "_candidate": 0}
    for name in calls:
        original = getattr(scan.Source, name)
        monkeypatch.setattr(scan.Source, name, lambda self, *a, _o=original, _n=name: calls.__setitem__(_n, calls[_n] + 1) or _o(self, *a))
    got = diagnose([str(path)], index)
    assert got["inputs"][0]["candidates"] >= warnings
    assert calls["_matches"] + calls["_candidate"] < 0.02 * warnings, (calls, warnings)
    assert got["primary"]["id"] == "torchrun-rendezvous-timeout"


def test_benign_lines_of_every_anchor_are_checked_without_exhausting_re2(index, capfd, tmp_path):
    """bench/engine.py's anchor-mix (issue 31): a 64-rank log where one line in five is a
    benign INFO line holding some anchor of the index. Checked in bulk, their signatures
    span the whole index: one RE2 union of all of them ran out of DFA memory, fell back to
    RE2's NFA (1.5 MB/s) and printed "DFA out of memory" to stderr for every block. The
    signatures are cut into groups (Plan.signature_groups): nothing on stderr, and the
    report is the one of reading every line."""
    pytest.importorskip("re2")
    from bench.engine import anchor_mix_file
    from faildex import scan

    path = tmp_path / "mix.log"
    anchor_mix_file(path, index, 3_000_000, seed=1)
    got = diagnose([str(path)], index)
    assert "out of memory" not in capfd.readouterr().err
    assert got["primary"]["id"] == "cuda-out-of-memory"
    plan = scan.plan_for(index)
    groups: dict[int, int] = {}
    for n, g in plan.signature_groups().items():
        groups[g] = groups.get(g, 0) + len(plan.superset[n])
    assert max(groups.values()) <= max(scan.UNION_CHARS, *map(len, plan.superset.values()))


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_a_repeated_line_with_escapes_is_counted_by_its_shape(index, monkeypatch, tmp_path, kind):
    """vLLM logs each request with its prompt's repr, `\\n`s and all; a backslash is a reader's
    word (the line may be a flattened traceback), so where such a line also held an anchor
    (until the healthy corpus got one, `prompt_embeds` did) each was read in full (~70 us; a
    vLLM server's log at 10 MB/s). Lines of one shape are now counted once reading them
    changes nothing, the union of supersets checked on each line as it is and unescaped
    (Source._repeats); the report is the one of reading every line. The lines here hold an
    anchor whose plain benign line is no finding (bench/engine.py's benign_anchors)."""
    import random

    from bench.engine import benign_anchors
    from faildex import scan

    _prefilter(kind, monkeypatch)
    plan = scan.plan_for(index)
    reader = plan.reader_words({}) - {b"\\"}
    anchor = next(a for a in benign_anchors(index) if a.isascii() and not any(w.decode() in a for w in reader))
    rng = random.Random(5)
    data = "".join(f"INFO 07-31 09:{i // 60 % 60:02d}:{i % 60:02d} [logger.py:41] Received request cmpl-{rng.getrandbits(64):016x}: "
                   f"prompt: 'Summarize\\nthe note {anchor} in {rng.randrange(9)} sentences', params: SamplingParams(n=1, "
                   f"max_tokens={rng.randrange(4096)}), prompt_token_ids: None, lora_request: None.\n"
                   for i in range(6000)).encode()
    path = tmp_path / "requests.log"
    path.write_bytes(data + TIMEOUT_LINE.encode())
    read = []
    original = scan.Source._candidate
    monkeypatch.setattr(scan.Source, "_candidate", lambda self, *a: read.append(1) or original(self, *a))
    got = diagnose([str(path)], index)
    assert got["inputs"][0]["candidates"] > 0.9 * data.count(b"\n")
    assert len(read) < 200, len(read)
    monkeypatch.setattr(scan, "REPEAT_MIN", 10 ** 9)
    assert diagnose([str(path)], index) == got
    assert got["primary"]["id"] == "torchrun-rendezvous-timeout"


def test_a_shapes_few_signatures_spread_over_many_groups_get_unions_of_their_own(index, monkeypatch, tmp_path):
    """bench/engine.py --anchor-lines (issue 31): benign lines that each hold "KeyError:" have
    42 signatures that may match them (Plan.shape_signatures), long ones (24,000 characters
    of supersets) spread over half of the RE2 groups: the block of such lines was searched
    with 18 group unions (11 MB/s). Unions of these signatures alone are 5: fewer regexes
    searched, and the report is the one of reading every line, with the real KeyError line
    among them found."""
    pytest.importorskip("re2")
    from bench.engine import anchor_line_file
    from faildex import scan

    _prefilter("re2", monkeypatch)
    path = tmp_path / "keyerror.log"
    anchor_line_file(path, "KeyError:", 600_000, seed=3)
    lines = path.read_bytes().splitlines(keepends=True)
    # torchrun without LOCAL_RANK in the environment (entries/elastic/launcher-local-rank-arg)
    real = b"KeyError: 'LOCAL_RANK'\n"
    path.write_bytes(b"".join(lines[:3000]) + real + b"".join(lines[3000:]) + TIMEOUT_LINE.encode())
    plan = scan.plan_for(index)
    shape = lines[0].rstrip(b"\n").translate(None, scan._SHAPE_DELETE)
    ids = plan.shape_signatures(shape)
    groups = plan.signature_groups()
    touched = {groups[n] for n in ids if n in groups}
    searched = []
    original = scan._block_lines
    monkeypatch.setattr(scan, "_block_lines", lambda union, block, ls: searched.append(len(union)) or original(union, block, ls))
    got = diagnose([str(path)], index)
    assert searched and max(searched) < len(touched) / 2, (searched, len(touched))
    assert any(f["text"].startswith("KeyError: 'LOCAL_RANK'") for f in got["evidence"]) or \
        "launcher-local-rank-arg" in [got["primary"]["id"]] + [a["id"] for a in got["alternatives"]]
    monkeypatch.setattr(scan, "REPEAT_MIN", 10 ** 9)
    assert diagnose([str(path)], index) == got


@pytest.mark.parametrize("finder", ["re2-set", "trie"])
def test_a_shapes_signatures_are_those_of_every_anchor_its_shape_holds(index, tmp_path, monkeypatch, finder):
    """Plan.shape_signatures finds the anchors a line shape may hold in one pass over the
    shape (a set of their digit-free cuts) instead of an `in` test per anchor (~80 us a shape;
    1.2 s of a fresh CLI run on bench/engine.py's anchor-mix, 14,600 shapes): the same
    signatures as that test, on shapes of healthy logs and of benign lines of every kind of
    anchor."""
    from bench.engine import anchor_mix_file
    from faildex import scan

    if finder == "trie":           # the standard library's search (the browser's; no RE2)
        monkeypatch.setattr(scan, "_re2_set", lambda words: None)
    elif scan._re2_set([b"x"]) is None:
        pytest.skip("google-re2 not installed")
    plan = scan.Plan(index)
    cuts = [(a.translate(None, scan._SHAPE_DELETE), a) for a in plan.sigs_by_anchor]
    path = tmp_path / "mix.log"
    anchor_mix_file(path, index, 400_000, seed=2)
    lines = path.read_bytes().splitlines()
    for log in sorted((ROOT / "entries" / "healthy").glob("*.log"))[:6]:
        lines += log.read_bytes().splitlines()[:200]
    shapes = {ln.translate(None, scan._SHAPE_DELETE) for ln in lines}
    assert len(shapes) > 500
    for shape in shapes:
        want = frozenset(n for cut, a in cuts if cut in shape for n, *_ in plan.sigs_by_anchor[a])
        assert plan.shape_signatures(shape) == want, shape


def test_skipped_lines_still_give_the_ranks_and_the_time_a_finding_inherits(index, monkeypatch):
    """A skipped candidate line is still read for its origin (Source._origin): every one until
    ORIGIN_QUIET in a row name no new rank or host, then one in ORIGIN_SAMPLE, and always the
    last one before a line that is read. A 64-rank log far past the quiet point, ending in an
    error line with no time of its own, gets the report of reading every line: all 64 ranks,
    and the time of the line just before the error."""
    from faildex import scan

    plan = scan.Plan(index)
    words = plan.reader_words({}) | _literals(index)
    anchor = next(a for a in index["anchors"] if not any(w in f"INFO step 1 note {a}".encode() for w in words))
    n = 3 * scan.ORIGIN_QUIET
    lines = [f"[rank{i % 64}]:[2026-12-05 10:{i // 3600 % 60:02d}:{i // 60 % 60:02d},{i % 1000:03d}] INFO step {i} "
             f"note {anchor}\n" for i in range(n)]
    data = ("".join(lines) + TIMEOUT_LINE).encode()
    read = []
    original = scan.Source._candidate
    monkeypatch.setattr(scan.Source, "_candidate", lambda self, *a: read.append(1) or original(self, *a))
    got = {}
    for bulk in (1, 10 ** 9):
        monkeypatch.setattr(scan, "BULK_LINES", bulk)
        read.clear()
        got[bulk] = run_text(index, data)
        if bulk == 1:
            assert len(read) < n // 100, len(read)      # the benign lines were skipped
    assert got[1] == got[10 ** 9]
    assert got[1]["facts"]["ranks"] == list(range(64))
    assert got[1]["primary"]["id"] == "torchrun-rendezvous-timeout"


def test_skipped_lines_are_read_for_their_origin_less_often_while_they_name_nothing_new(index, monkeypatch):
    """Past ORIGIN_QUIET, the gap between skipped lines read for their origin doubles while
    they name no new rank or host (a parsed prefix costs ~80 us: one line in 32 held a file of
    benign anchor lines under 32 MB/s), and ranks that start printing late are still seen."""
    from faildex import scan

    plan = scan.Plan(index)
    words = plan.reader_words({}) | _literals(index)
    anchor = next(a for a in index["anchors"] if not any(w in f"INFO step 1 note {a}".encode() for w in words))
    n = 40 * scan.ORIGIN_QUIET
    late = n - 10 * scan.ORIGIN_SAMPLE_MAX     # ranks 64-127 join here: every other line, in turn
    lines = [f"[rank{64 + i // 2 % 64 if i >= late and i % 2 else i % 64}]:[2026-12-05 10:{i // 3600 % 60:02d}:"
             f"{i // 60 % 60:02d},{i % 1000:03d}] INFO step {i} note {anchor}\n" for i in range(n)]
    read = []
    original = scan.Source._origin
    monkeypatch.setattr(scan.Source, "_origin", lambda self, raw: read.append(1) or original(self, raw))
    got = run_text(index, "".join(lines) + TIMEOUT_LINE)
    assert got["facts"]["ranks"] == list(range(128))
    # every line until ORIGIN_QUIET in a row named nothing new, a few more as the gap grows and
    # after the late ranks; one line in ORIGIN_SAMPLE would have been ~2,300 more
    assert len(read) < 3 * scan.ORIGIN_QUIET + n // 1000, len(read)
    assert got["primary"]["id"] == "torchrun-rendezvous-timeout"


# ---------------------------------------------------------------- the RE2 prefilter (scan.RE2_NOTE)

def _reports_by_prefilter(index, paths, monkeypatch) -> dict[str, list]:
    from faildex import scan
    out = {}
    for kind in ("re2", "passes"):
        if kind == "passes":
            monkeypatch.setenv("FAILDEX_PREFILTER", "passes")
        else:
            monkeypatch.delenv("FAILDEX_PREFILTER", raising=False)
        assert scan.plan_for(index).prefilter == kind
        out[kind] = [diagnose([str(p)], index) for p in paths]
    return out


def test_the_re2_prefilter_gives_the_reports_of_the_stdlib_passes(index, monkeypatch):
    """With google-re2 installed (faildex[fast], which `make setup` installs) the CLI finds
    the anchors with one RE2 DFA instead of the stdlib passes. Every log of both corpora,
    the healthy corpus and every line type of the benchmark profiles gets the same
    report, candidate counts included, either way."""
    pytest.importorskip("re2", reason="google-re2 (faildex[fast]) is not installed")
    import tempfile

    from bench.profiles import generate_line_type, line_types

    logs = sorted((ROOT / "tests" / "corpus").glob("*/*.log")) + HEALTHY
    with tempfile.TemporaryDirectory() as tmp:
        for n, lt in enumerate(line_types()):
            generate_line_type(Path(tmp) / f"{n:02d}.log", lt, 60_000, seed=1)
        logs += sorted(Path(tmp).glob("*.log"))
        got = _reports_by_prefilter(index, logs, monkeypatch)
    assert len(logs) > 300
    for path, a, b in zip(logs, got["re2"], got["passes"]):
        assert a == b, path.name
    assert sum(r["inputs"][0]["candidates"] for r in got["re2"]) > 600   # 837 today: lines were compared


def test_the_re2_alternation_finds_every_line_holding_an_anchor():
    """Anchors with bytes RE2 would read as syntax ("(", "\\", ".", "[", a space, UTF-8),
    written as \\xHH: each line that holds one is marked, the others are not, and a
    tqdm line is cut at its carriage returns like everywhere else."""
    re2 = pytest.importorskip("re2", reason="google-re2 (faildex[fast]) is not installed")
    from faildex.scan import _collect_spans, _re2_alternation

    anchors = [b"CUDA error", b"(most recent call", b"a\\b", b"x.y", b"[rank", b"a|b", b"\xef\xbc\x9a", b"$HOME"]
    rx = _re2_alternation(re2, anchors)
    lines = [b"ok " + a + b" end" for a in anchors]
    lines += [b"CUDA errors", b"x-y", b"a b", b"rank", b"\xef\xbc", b"HOME", b"most recent call"]
    lines += [b"10%|#   \r20%|##  \rCUDA error: out of memory"]
    buf = b"\n".join(lines) + b"\n"
    spans: dict[int, int] = {}
    _collect_spans([(b"", rx)], buf, len(buf), True, spans)
    found = sorted(buf[a:b] for a, b in spans.items())
    assert found == sorted(lines[:len(anchors)] + [b"CUDA errors", b"CUDA error: out of memory"])


# ---------------------------------------------------------------- dense anchors (scan.DENSE_NOTE)

def _example_lines(entries) -> dict[str, list[str]]:
    """Each entry's example lines, by entry id."""
    from generator.validate import example_text
    return {e.id: [ln for ex in e.data["examples"] for ln in (example_text(e, ex) or "").splitlines()]
            for e in entries}


def test_the_re2_superset_of_a_signature_keeps_every_match():
    """A demoted anchor's signatures run as one RE2 search over a whole buffer: lookarounds
    dropped, backreferences, atomic groups and possessive quantifiers loosened, names and
    `^` dropped, counts past RE2's limit unbounded; what is left matches more, never less."""
    pytest.importorskip("re2", reason="google-re2 (faildex[fast]) is not installed")
    from faildex.scan import _re2_superset

    assert _re2_superset(r"^foo(?!bar)x{1,3000}(?P<n>a)(?P=n)[^\]a^](?<=q)z\Z") == r"foox{1,}(?:a).*[^\]a^]z$"
    assert _re2_superset(r"(?:^|[Ee]rror: )(?P<lib>[^\s:]{1,300}\.so)") == r"(?:|[Ee]rror: )(?:[^\s:]{1,300}\.so)"
    assert _re2_superset(r"a*+(?>b|c)\(\^\)") == r"a*(?:b|c)\(\^\)"
    assert _re2_superset(r"(?:, \d{1,6}){0,200}", loose=True) == r"(?:, \d{1,}){0,}"


def test_every_signatures_re2_superset_matches_its_examples_inside_a_block(entries, index):
    """Over every line of every entry's examples that a signature matches (on the line, or on
    its message after the prefix where the signature starts with `^`), the signature's RE2
    superset, compiled as the scan does (one `(?m)` alternation, Latin-1), finds a match on
    that line when the line sits between two others in a block; and RE2 runs all but a few
    signatures (the rest keep their anchors out of demotion: Plan.demotable)."""
    pytest.importorskip("re2", reason="google-re2 (faildex[fast]) is not installed")
    from faildex import scan

    plan = scan.Plan(index)
    lines = _example_lines(entries)
    checked = refused = 0
    for n, sig in enumerate(index["signatures"]):
        sup = scan._re2_signature(plan._re2, sig["regex"])
        if sup is None:
            refused += 1
            continue
        rx = scan._re2_compile(plan._re2, ("(?m)(?:" + sup + ")").encode())
        py = re.compile(sig["regex"])
        for ln in lines.get(sig["entry"], []):
            rest = parse_prefix(ln)[1]
            if not (py.search(ln) or py.search(rest)) or not ln.isascii():
                continue
            block = b"INFO before\n" + ln.encode() + b"\nINFO after\n"
            m = rx.search(block, 0, len(block))
            assert m is not None and m.start() <= 12 + len(ln), (sig["id"], ln)
            checked += 1
    assert checked > 1300 and refused < 0.01 * len(index["signatures"]), (checked, refused)   # 1,421 and 0 today


def test_the_stdlib_unions_split_alternatives_and_match_every_example_inside_a_block(entries, index, monkeypatch):
    """With the standard library's regex, a signature's union (Plan.signature_union) is one
    regex per leading literal of each of its superset's alternatives (a family signature's
    superset is an alternation, which sre tried branch by branch at every position): over
    every example line a signature matches, its union still finds that line inside a block."""
    from faildex import scan

    monkeypatch.setenv("FAILDEX_PREFILTER", "passes")
    plan = scan.Plan(index)
    assert plan._re2 is None
    lines = _example_lines(entries)
    checked = split = 0
    for n, sig in enumerate(index["signatures"]):
        if plan._superset(n) is None:
            continue
        union = plan.signature_union(frozenset({n}))
        assert union, sig["id"]
        split += len(union) > 1
        py = re.compile(sig["regex"])
        for ln in lines.get(sig["entry"], []):
            if not (py.search(ln) or py.search(parse_prefix(ln)[1])) or not ln.isascii():
                continue
            block = [b"INFO before", ln.encode(), b"INFO after"]
            assert 1 in scan._block_lines(union, b"\n".join(block), block), (sig["id"], ln)
            # and the union of only the alternatives these lines' shapes can hold
            shapes = {b.translate(None, scan._SHAPE_DELETE) for b in block}
            narrow = plan.signature_union(frozenset({n}), shapes=shapes)
            assert 1 in scan._block_lines(narrow, b"\n".join(block), block), (sig["id"], ln)
            checked += 1
    assert checked > 1300 and split > 100, (checked, split)
    # a line holding "KeyError:" may hold an anchor of 42 signatures, most of them families of
    # "...Error: (?:...|...)" whose alternatives its shape rules out
    line = _benign_anchor_lines("KeyError:", 1, 0).rstrip(b"\n")
    shape = line.translate(None, scan._SHAPE_DELETE)
    ids = plan.block_signatures({shape}, line)
    assert len(ids) > 10
    assert 3 * len(plan.signature_union(ids, shapes={shape})) < len(plan.signature_union(ids))


def test_a_repeated_line_type_no_reader_wants_is_blanked_after_its_first_slice(index, monkeypatch, tmp_path):
    """3 MB of a benign line type that holds an anchor and no reader's word (64 ranks' autograd
    warning on every step), then the failure, with the standard library's passes: its shape
    is learnt from the first slice's unread candidates (Source._learn_inert), the rest of its
    lines are blanked and counted (Source._mask), and the report is the one read without
    shapes."""
    from bench.profiles import generate_line_type
    from faildex import scan

    _prefilter("passes", monkeypatch)
    path = tmp_path / "warn.log"
    generate_line_type(path, "torchrun-64/autograd-warning", 3_000_000, seed=2)
    data = path.read_bytes() + TIMEOUT_LINE.encode()
    total = data.count(b"\n")
    plan = scan.Plan(index)
    first = data[:data.index(b"\n") + 1]
    assert plan.anchors_in(first) and not any(w in first for w in plan.reader_words({}))
    counted = _count_blanked(monkeypatch, scan)
    fast = run_text(index, data, chunk=8 << 20)
    assert sum(counted) > 0.9 * total, (sum(counted), total)
    monkeypatch.setattr(scan, "REPEAT_MIN", 10 ** 9)
    plain = run_text(index, data, chunk=8 << 20)
    assert fast == plain
    assert fast["primary"]["id"] == "torchrun-rendezvous-timeout"
    assert fast["facts"]["ranks"] == list(range(64)) and fast["inputs"][0]["candidates"] == total


def _count_blanked(monkeypatch, scan) -> list:
    """A list that gets, for each buffer blanked (Source._masked_lines), how many of its
    lines were counted, not read."""
    counted = []
    original = scan.Source._masked_lines

    def spy(self, masked, spans):
        original(self, masked, spans)
        counted.append(len(masked.starts))
    monkeypatch.setattr(scan.Source, "_masked_lines", spy)
    return counted


def _force_dense(monkeypatch, scan, on: bool) -> None:
    """Demote, on every buffer, every anchor of the first sampled lines (on), or never."""
    if on:
        for k, v in dict(DENSE_MIN_BYTES=0, DENSE_PROBE=1 << 40, DENSE_MIN_LINES=1, DENSE_SHARE=10 ** 9,
                         DENSE_OF=10 ** 9).items():
            monkeypatch.setattr(scan, k, v)
    else:
        monkeypatch.setattr(scan, "DENSE_MIN_BYTES", 1 << 60)


def _prefilter(kind: str, monkeypatch) -> None:
    if kind == "passes":
        monkeypatch.setenv("FAILDEX_PREFILTER", "passes")
    else:
        pytest.importorskip("re2", reason="google-re2 (faildex[fast]) is not installed")
        monkeypatch.delenv("FAILDEX_PREFILTER", raising=False)


def _plant_examples(anchors, index, lines, tmp_path, prefix: str, n_benign: int) -> list:
    """For each anchor with a real example line of its own signature (one that holds the
    anchor): a file of benign lines carrying the anchor around that example line."""
    out = []
    for n, anchor in enumerate(anchors):
        own = next((ln for sig in index["signatures"] if anchor in sig["anchors"]
                    for ln in lines.get(sig["entry"], []) if anchor in ln and re.search(sig["regex"], ln)), None)
        if own is None:
            continue
        p = tmp_path / f"{prefix}{n:03d}.log"
        p.write_bytes(_benign_anchor_lines(anchor, n_benign, n) + own.encode() + b"\n"
                      + _benign_anchor_lines(anchor, n_benign, -n))
        out.append(p)
    return out


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_demoted_anchors_give_the_reports_of_the_plain_scan(entries, index, monkeypatch, tmp_path, kind):
    """With every anchor of a buffer's first candidate lines demoted (found by the searches
    of DenseChecks instead of the prefilter), every log of both corpora, the healthy corpus,
    every profile line type, the multi-rank dev runs, and benign lines around every 8th anchor
    with a real example line of that anchor's own signature planted among them (where an
    example holds the anchor), get the report of the plain scan; with RE2 and with the
    standard library's passes."""
    from bench.profiles import generate_line_type, line_types
    from faildex import scan

    _prefilter(kind, monkeypatch)
    assert scan.plan_for(index).prefilter == kind

    logs = sorted((ROOT / "tests" / "corpus").glob("*/*.log")) + HEALTHY
    logs += sorted((ROOT / "tests" / "corpus" / "ranks" / "dev").glob("*/*.log"))
    for n, lt in enumerate(line_types()):
        generate_line_type(tmp_path / f"{n:02d}.log", lt, 60_000, seed=3)
        logs.append(tmp_path / f"{n:02d}.log")
    lines = _example_lines(entries)
    planted_files = _plant_examples(index["anchors"][::8], index, lines, tmp_path, "anchor", 300)
    logs += planted_files
    planted = len(planted_files)
    used = []
    original = scan.Source._dense
    monkeypatch.setattr(scan.Source, "_dense", lambda self, *a: used.append(original(self, *a)) or used[-1])
    got = {}
    for on in (True, False):
        _force_dense(monkeypatch, scan, on)
        got[on] = [diagnose([str(p)], index) for p in logs]
    assert planted > 60 and len(logs) > 500
    assert sum(u is not None for u in used) > 150     # buffers scanned with demoted anchors: 227 today
    for path, a, b in zip(logs, got[True], got[False]):
        for r in (a, b):
            r["inputs"][0].pop("candidates")          # demoted lines are counted, not listed
        assert a == b, path.name


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_a_dense_benign_line_type_is_not_read_line_by_line(index, monkeypatch, kind):
    """3 MB of one benign line type holding an anchor, from 64 ranks, with the failure at the end:
    the anchor is demoted (default thresholds), almost no line is read in full, and the report is
    the plain scan's: the failure, all 64 ranks, the candidates counted."""
    from faildex import scan

    _prefilter(kind, monkeypatch)

    plan = scan.Plan(index)
    words = plan.reader_words({}) | _literals(index)
    anchor = next(a for a in index["anchors"] if not any(w in f"INFO step 1 note {a}".encode() for w in words))
    data = b"".join(_benign_anchor_lines(anchor, 1000, i) for i in range(25)) + TIMEOUT_LINE.encode()
    assert len(data) > 2 * scan.DENSE_MIN_BYTES
    read = []
    original = scan.Source._candidate
    monkeypatch.setattr(scan.Source, "_candidate", lambda self, *a: read.append(1) or original(self, *a))
    dense = run_text(index, data, chunk=1 << 20)
    assert len(read) < 50, len(read)
    _force_dense(monkeypatch, scan, False)
    plain = run_text(index, data, chunk=1 << 20)
    assert dense == plain
    assert dense["primary"]["id"] == "torchrun-rendezvous-timeout"
    assert dense["facts"]["ranks"] == list(range(64)) and dense["inputs"][0]["candidates"] == 25_001


# ---------------------------------------------------------------- repeated reader lines (scan.REPEAT_NOTE)

def _force_repeats(monkeypatch, scan, on: bool) -> None:
    """Shapes from the first reader line of any buffer, inert after two reads, buffers blanked
    when a quarter of their start is of inert shapes, slices of 4 KB (on); or never."""
    if on:
        for k, v in dict(REPEAT_MIN=1, REPEAT_READS=2, DENSE_MIN_BYTES=0, SCAN_SLICE=4096, FIRST_SLICE=4096).items():
            monkeypatch.setattr(scan, k, v)
    else:
        monkeypatch.setattr(scan, "REPEAT_MIN", 10 ** 9)


def _digit_variants(sig_regex: str, line: str, n: int, seed: int, matching: bool = False) -> list[str] | None:
    """n copies of line with its numbers changed so that the signature no longer matches it
    (or, with matching, still matches it; the same shape: scan.REPEAT_NOTE drops digits);
    None when no such change is found."""
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(n * 4):
        # (to keep a match, some numbers are left as they are: a signature may name one)
        v = re.sub(r"\d+", lambda m: str(rng.randrange(10 ** len(m.group(0))))
                   if not matching or rng.random() < 0.5 else m.group(0), line)
        hit = bool(re.search(sig_regex, v) or re.search(sig_regex, parse_prefix(v)[1]))
        if hit == matching and v != line:
            out.append(v)
            if len(out) == n:
                return out
    return None


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_repeated_reader_lines_give_the_reports_of_the_plain_scan(entries, index, monkeypatch, tmp_path, kind):
    """With shapes learnt from two reads and buffers blanked early (_force_repeats), every log of
    both corpora, the healthy corpus, every profile line type, the multi-rank dev runs, and two
    kinds of planted files get the report of the plain scan: benign lines that hold a reader's
    word and an anchor around a real example line of that anchor's signature; and real example
    lines whose numbers were changed so that their own signature does not match them (the same
    shape: what the union of supersets must still tell apart), around the real line, and such
    lines followed by ones whose changed numbers still match (a shape first inert, then saturated)."""
    from bench.profiles import generate_line_type, line_types
    from faildex import scan

    _prefilter(kind, monkeypatch)
    plan = scan.plan_for(index)
    reader = plan.reader_words({})
    logs = sorted((ROOT / "tests" / "corpus").glob("*/*.log")) + HEALTHY
    logs += sorted((ROOT / "tests" / "corpus" / "ranks" / "dev").glob("*/*.log"))
    for n, lt in enumerate(line_types()):
        generate_line_type(tmp_path / f"{n:02d}.log", lt, 60_000, seed=4)
        logs.append(tmp_path / f"{n:02d}.log")
    lines = _example_lines(entries)
    planted_files = _plant_examples([a for a in index["anchors"] if any(w.decode() in a for w in reader)],
                                    index, lines, tmp_path, "reader", 200)
    logs += planted_files
    planted, digits, mixed = len(planted_files), 0, 0
    for n, sig in enumerate(index["signatures"]):
        if not re.search(r"(?<!\\)\d", sig["regex"].replace("{", " ").replace("}", " ")):
            continue
        for ln in lines.get(sig["entry"], []):
            if not re.search(sig["regex"], ln) or not ln.isascii():
                continue
            variants = _digit_variants(sig["regex"], ln, 120, n)
            if variants:
                p = tmp_path / f"digits{n:04d}.log"
                p.write_text("\n".join(variants[:60] + [ln] + variants[60:]) + "\n")
                logs.append(p)
                digits += 1
                # a shape whose lines first record nothing, then this signature's finding (as
                # their digits fall): learnt inert, then saturated, it must stay read and counted
                matching = _digit_variants(sig["regex"], ln, 60, n + 1, matching=True)
                if matching:
                    p = tmp_path / f"digits{n:04d}-then.log"
                    p.write_text("\n".join(variants[:60] + matching + [ln]) + "\n")
                    logs.append(p)
                    mixed += 1
            break
    counted = _count_blanked(monkeypatch, scan)
    got = {}
    for on in (True, False):
        _force_repeats(monkeypatch, scan, on)
        got[on] = [diagnose([str(p)], index) for p in logs]
    assert planted > 40 and digits > 10 and mixed > 10 and len(logs) > 500, (planted, digits, mixed, len(logs))
    assert sum(counted) > 12_000, sum(counted)        # lines blanked and counted, not read: 17,816 today
    for path, a, b in zip(logs, got[True], got[False]):
        for r in (a, b):
            # (both sides demote anchors on every buffer: the demoted lines are counted by their
            # anchors' occurrences, blanked lines one by one)
            r["inputs"][0].pop("candidates")
        assert a == b, path.name


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_a_repeated_reader_line_type_is_counted_not_read(index, monkeypatch, kind):
    """6 MB of one benign line type holding a reader's word and an anchor ("KeyError:"), from 64
    ranks, with the failure at the end: with the default thresholds, fewer than 2 % of its
    lines are read in full, and the report is the plain scan's: the failure, every rank, the
    error lines counted, the last of them where it is."""
    from faildex import scan

    _prefilter(kind, monkeypatch)
    plan = scan.Plan(index)
    anchor = "KeyError:"
    assert anchor in index["anchors"]
    data = b"".join(_benign_anchor_lines(anchor, 1000, i) for i in range(60)) + TIMEOUT_LINE.encode()
    assert len(data) > 3 * scan.SCAN_SLICE and any(w in anchor.encode() for w in plan.reader_words({}))
    read = []
    original = scan.Source._candidate
    monkeypatch.setattr(scan.Source, "_candidate", lambda self, *a: read.append(1) or original(self, *a))
    fast = run_text(index, data, chunk=8 << 20)
    assert len(read) < 0.02 * 60_000, len(read)
    _force_repeats(monkeypatch, scan, False)
    plain = run_text(index, data, chunk=8 << 20)
    assert fast == plain
    assert fast["primary"]["id"] == "torchrun-rendezvous-timeout"
    assert fast["facts"]["ranks"] == list(range(64)) and fast["inputs"][0]["candidates"] == 60_001


@pytest.mark.parametrize("kind", ["re2", "passes"])
def test_a_repeated_failure_line_is_counted_not_read(entries, index, monkeypatch, tmp_path, kind):
    """3 MB of one real failure line as printed (a missing optional module, an accelerate misuse,
    vLLM's 1.3 kB list of supported architectures, a CUDA graph capture error without a number
    in it), its numbers changed on every line, then torchrun's rendezvous timeout: once the shape has
    recorded the same findings REPEAT_READS times in a row it is saturated, and its lines are
    checked against its signatures and counted, not read (fewer than 5 % read in full); the
    report is the one read without shapes: counts, first and latest findings, error lines."""
    from bench.engine import example_line_file
    from faildex import scan

    _prefilter(kind, monkeypatch)
    lines = _example_lines(entries)
    for eid in ("pytorch-optional-dependency-missing", "accelerate-api-misuse", "vllm-unsupported-architecture",
                "cuda-graph-capture-error"):
        line = next(ln for ln in lines[eid] if primary_id(run_text(index, ln + "\n")) == eid)
        path = tmp_path / f"{eid}.log"
        example_line_file(path, line, 3_000_000, 0)
        data = path.read_bytes() + TIMEOUT_LINE.encode()
        total = data.count(b"\n")
        read = []
        original = scan.Source._candidate
        monkeypatch.setattr(scan.Source, "_candidate", lambda self, *a: read.append(1) or original(self, *a))
        fast = run_text(index, data, chunk=8 << 20)
        assert len(read) < 0.05 * total, (eid, len(read), total)
        monkeypatch.setattr(scan.Source, "_candidate", original)
        with monkeypatch.context() as m:
            m.setattr(scan, "REPEAT_MIN", 10 ** 9)
            plain = run_text(index, data, chunk=8 << 20)
        assert fast == plain, eid
        found = next(a for a in [fast["primary"], *fast["alternatives"]] if a and a["id"] == eid)
        assert found["count"] == total - 1, (eid, found["count"], total)


def test_the_browsers_automaton_marks_the_lines_the_cli_marks(index, monkeypatch, tmp_path):
    """The diagnoser's worker finds the anchors with pyodide_app/web/anchors.mjs (an
    Aho-Corasick automaton run by a WebAssembly loop, here under node): over every log of both corpora, the
    healthy corpus, every profile line type and lines of awkward bytes, it marks exactly
    the candidate lines the stdlib passes mark, in the scan and in the head's passes:
    searched whole (two lanes), in slices of many sizes (one lane and two), and with a
    hit buffer so small that every lane overflows (one lane, resumed)."""
    from bench.profiles import generate_line_type, line_types
    from faildex import scan

    monkeypatch.setenv("FAILDEX_PREFILTER", "passes")
    plan = scan.plan_for(index)
    anchors = sorted(plan.sigs_by_anchor)   # every anchor the passes look for
    head_words = sorted(plan.head_words)
    awkward = [b"ok CUDA error end", b"CUDA errors", b"10%|#   \r20%|##  \rCUDA error: out of memory",
               b"\xef\xbc\x9a CUDA err\xefor", b"NCCL WAR", b"\r\r\n", b""]
    logs = sorted((ROOT / "tests" / "corpus").glob("*/*.log")) + HEALTHY
    for n, lt in enumerate(line_types()):
        generate_line_type(tmp_path / f"{n:02d}.log", lt, 20_000, seed=1)
        logs.append(tmp_path / f"{n:02d}.log")
    buf = b"\n".join(awkward) + b"\n" + b"".join(p.read_bytes() for p in logs)
    (tmp_path / "all.bin").write_bytes(buf)
    found = {}
    for name, words in (("scan", anchors), ("head", head_words)):
        (tmp_path / f"{name}.words").write_bytes(b"\n".join(words))
        script = (f"import {{ buildAutomaton, findHits }} from {json.dumps((ROOT / 'pyodide_app/web/anchors.mjs').as_uri())};"
                  "import { readFileSync } from 'fs';"
                  f"const words = readFileSync({json.dumps(str(tmp_path / (name + '.words')))}).toString('latin1').split('\\n');"
                  "const bytes = words.map((w) => Uint8Array.from(w, (c) => c.charCodeAt(0)));"
                  f"const b = readFileSync({json.dumps(str(tmp_path / 'all.bin'))});"
                  "const all = new Uint8Array(b.buffer, b.byteOffset, b.length);"
                  # slices cut at line ends, as the worker hands chunks over: short ones take
                  # the one-lane loop, longer ones the two-lane loop, each with its own cut
                  "const a = buildAutomaton(bytes), sliced = [];"
                  "for (let at = 0, k = 0; at < all.length; k++) {"
                  "  let end = all.indexOf(10, at + [700, 5000, 9000, 70000, 300000][k % 5]) + 1;"
                  "  if (end === 0) end = all.length;"
                  "  sliced.push(...findHits(a, all.subarray(at, end), at)); at = end; }"
                  # the two-lane loop stops when the shorter lane ends: an anchor across the
                  # longer lane's stop must still be found (each lane keeps its own state)
                  "const w = bytes.reduce((x, y) => (y.length > x.length ? y : x)), lb = 5000, across = [];"
                  "for (let d = 1; d < w.length; d++) {"
                  "  const buf = new Uint8Array(6000 + lb).fill(126); buf[5999] = 10; buf[buf.length - 1] = 10;"
                  "  buf.set(w, lb - d); across.push(findHits(a, buf)); }"
                  # a hit buffer of 3 makes the search stop and resume ~1,000 times
                  "process.stdout.write(JSON.stringify([findHits(a, all), sliced, across, "
                  "findHits(buildAutomaton(bytes, { hitsPerCall: 3 }), all)]));")
        out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, check=True)
        found[name], sliced, across, resumed = json.loads(out.stdout)
        assert across and all(len(hits) == 1 and 0 <= hits[0] < 6000 for hits in across), (name, across)
        assert sliced == found[name], name
        assert resumed == found[name], name
    cr = b"\r" in buf
    for name, passes, offsets in (("scan", plan.passes, found["scan"]),
                                  ("head", plan.word_passes(frozenset(head_words)), found["head"])):
        want: dict[int, int] = {}
        scan._collect_spans(passes, buf, len(buf), cr, want)
        got: dict[int, int] = {}
        scan._collect_spans([(None, lambda b, end, begin: offsets)], buf, len(buf), cr, got)
        assert got == want, name
        assert len(want) > 500, name      # lines were compared


def test_text_and_markdown_render_one_view_and_redaction_is_the_same_every_run(index, tmp_path):
    # render.view decides what a report shows; the text report and the ticket render it. The
    # ticket's host placeholders are numbered the same way whatever the hash seed (they were
    # not: hosts of equal length came in set order)
    import subprocess
    from faildex.render import view
    log = ROOT / "tests" / "corpus" / "ranks" / "dev" / "r08-json-keyerror-2x2" / "pod-logs.jsonl"
    r = diagnose([str(log)], index)
    v = view(r)
    assert v["verdict"] and v["verdict"] in to_text(r) and v["suspects"][0]["who"] in to_text(r)
    assert all(e["at"] in to_markdown(r) for e in v["evidence"])
    code = ("import json,sys; sys.path[:0]=['pyodide_app']; from faildex import diagnose, load_index;"
            "from faildex.command import index_path; from faildex.render import to_markdown;"
            f"print(to_markdown(diagnose([{str(log)!r}], load_index(index_path())), redact_it=True))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout for seed in (1, 2, 3)}
    assert len(outs) == 1 and "<host-1>" in outs.pop()


def test_a_deepspeed_op_build_cut_before_deepspeeds_own_line_is_still_deepspeeds(index):
    """torch's "Ninja is required to load C++ extensions" is cpp-extension-build-failed's line;
    raised through DeepSpeed's op builder it is DeepSpeed's op build, and a paste that ends
    before DeepSpeed re-raises it ("Unable to JIT load ...") still says so: the builder's
    frames set the fact that cpp-extension-build-failed's "Who started the build" reads.
    The real reproduced log of each entry, the DeepSpeed one cut after torch's line."""
    ds = (ROOT / "entries" / "ddp" / "deepspeed-op-build-failed" / "ninja-missing.log").read_text()
    cut = ds[:ds.index("RuntimeError: Ninja is required")]
    cut += ds[len(cut):].split("\n", 1)[0] + "\n"
    assert "Unable to JIT load" not in cut and "op_builder/builder.py" in cut
    assert run_text(index, cut)["primary"]["id"] == "deepspeed-op-build-failed"
    own = (ROOT / "entries" / "environment" / "cpp-extension-build-failed" / "ninja-missing.log").read_text()
    assert "op_builder" not in own
    assert run_text(index, own)["primary"]["id"] == "cpp-extension-build-failed"


def test_the_next_action_is_the_step_for_the_signature_that_matched(index):
    """A family entry's groups have different first fixes (`for_signatures`): a refusal at
    submission gets the submission step; an option conflict the entry's general first step."""
    refused = run_text(index, "sbatch: error: Memory specification can not be satisfied\n"
                              "sbatch: error: Batch job submission failed: Requested node configuration is not available\n")
    conflict = run_text(index, "srun: error: --exact and --whole are mutually exclusive.\n")
    assert primary_id(refused) == primary_id(conflict) == "slurm-invalid-option"
    steps = index["entries"]["slurm-invalid-option"]["fix"]
    for_submission = next(s for s in steps if "batch-submission-refused" in s["for_signatures"])
    assert refused["next_action"]["do"] == for_submission["do"]
    assert conflict["next_action"]["do"] == steps[0]["do"] != for_submission["do"]


def test_a_supporting_line_picks_its_own_step_beside_a_defining_one(entries, index):
    """DeepSpeed's cpu_adam build (the entry's real DeepSpeed#5659 example): ninja's
    "FAILED: cpu_adam.so" defines the failure and the linker's "cannot find -lcurand" only
    supports it, but says which link step failed: the next action is the cuRAND step, not
    the entry's general first one."""
    from generator.validate import example_text
    e = next(x for x in entries if x.id == "deepspeed-op-build-failed")
    ex = next(x for x in e.data["examples"] if "DeepSpeed/issues/5659" in x["source"])
    text = example_text(e, ex)
    assert "FAILED: " in text and "cannot find -lcurand" in text
    steps = index["entries"]["deepspeed-op-build-failed"]["fix"]
    curand = next(s for s in steps if "link-curand-missing" in (s.get("for_signatures") or ()))
    r = run_text(index, text)
    assert primary_id(r) == "deepspeed-op-build-failed"
    assert r["next_action"]["do"] == curand["do"] != steps[0]["do"]


def test_a_named_cause_is_not_headed_by_the_job_did_not_fail(index):
    """A real log (dev-2, meta-pytorch/torchforge#590): sbatch refuses the job, then a
    launcher traceback cut before its exception line, which the job model reads as outlived.
    A signature names the cause, so the report must not open with 'The job did not fail'."""
    log = ROOT / "tests" / "corpus" / "dev-2" / "d011-torchforge-sbatch-memory-spec-cannot-be-satisfied.log"
    r = run_text(index, log.read_bytes())
    assert primary_id(r) == "slurm-invalid-option"
    assert r["job"].get("outlived")
    assert not (r["verdict"] or "").startswith("The job did not fail")


def test_a_pass_keyed_on_a_non_ascii_character_finds_its_anchors():
    # the index's pass keys are characters, encoded to UTF-8 by the scanner: a key such as
    # "已" is three bytes, and the trie continues after all of them (bash's "Killed" under a
    # zh_CN locale is "已杀死"; dev-8 d001)
    from faildex.scan import _keyed_trie
    anchors = ["已杀死", "进程已杀死", "已终止"]
    rx = re.compile(_keyed_trie("已".encode(), [a.encode() for a in anchors]))
    for a in anchors:
        assert rx.search(f"run.sh: 第 1 行： 3226 {a}  python3 train.py".encode()), a
    assert not rx.search("已经完成".encode())


def test_which_anchors_a_line_holds_is_the_same_with_re2s_set_and_the_trie(index, monkeypatch):
    # scan._Which answers with one RE2 set match where RE2 is installed, else with a trie
    # searched at every byte: both name every anchor a line holds, nested ones included
    pytest.importorskip("re2")
    from faildex import scan
    words = sorted({a.encode() for a in index["anchors"]} | {b"Watch", b"Watchdog"})
    lines = [b"[rank3]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)",
             b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             b"srun: error: gpu-node-07: task 3: Killed", b"nothing to see here"]
    with_set = scan._Which(words)
    assert scan._re2_set(words) is not None
    monkeypatch.setattr(scan, "_re2_set", lambda words: None)
    with_trie = scan._Which(words)
    got = [with_set(ln) for ln in lines]
    assert got == [with_trie(ln) for ln in lines]
    assert b"Watch" in got[0] and b"Watchdog" in got[0] and got[3] == []
