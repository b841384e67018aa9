"""Per-rank Python stack dumps of a hung job: which rank is somewhere else?

Reads `py-spy dump --pid PID` output and Python's faulthandler dump (what
faulthandler.dump_traceback_later or a SIGABRT/SIGSEGV handler writes), one file
per rank; the rank comes from the file name (a trailing number) or, failing
that, from a `--rank N` / `RANK=N` in py-spy's command line. Each rank's main
thread is reduced to its innermost meaningful frames (wrappers such as
c10d_logger's are skipped); ranks are grouped by them, and the odd group out
are the suspects: a rank outside any collective while most others wait in one
is `missing`, a rank in a different collective than most is `op-mismatch`.
"""
from __future__ import annotations

import re

from .frdump import rank_from_name

MAX_STACK_BYTES = 16 << 20
DEPTH = 3            # innermost meaningful frames compared across ranks

_PYSPY_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<cmd>.*)$", re.M)
_PYSPY_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<state>[^)]*)\)(?:: "(?P<name>[^"]*)")?\s*$')
_PYSPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>[^()]*?):(?P<line>\d+)\)\s*$")
_FH_THREAD = re.compile(r"^(?:Current thread|Thread) (?P<tid>0x[0-9a-f]+) \(most recent call first\):\s*$"
                        r"|^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>\S+)\s*$')
_RANK_IN_CMD = re.compile(r"(?:--rank[= ]|\bRANK=|--node[_-]rank[= ])(?P<rank>\d+)")

# Frames that only pass a call through; the frame below them says where the rank is.
_PASS_THROUGH = {("c10d_logger.py", "wrapper"), ("c10d_logger.py", "_exception_logger.<locals>.wrapper"),
                 ("c10d_logger.py", "_time_logger.<locals>.wrapper")}
# torch.distributed functions that wait for the other ranks
COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
               "broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
               "all_to_all_single", "barrier", "monitored_barrier", "gather", "scatter", "send", "recv",
               "batch_isend_irecv", "_all_gather_base", "_reduce_scatter_base", "gather_object",
               "scatter_object_list", "all_reduce_coalesced", "wait"}


def looks_like_stacks(head: bytes) -> bool:
    """Does this text start like a py-spy or faulthandler dump?"""
    text = head[:8192].decode("utf-8", "replace")
    return bool(re.search(r"^Process \d+: .*\nPython v\d", text, re.M)
                or re.search(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):", text, re.M)
                or text.startswith("Stack (most recent call first):"))


def load(name: str, data: bytes) -> dict:
    """Parse one rank's stack dump into {name, rank, form, threads: [(label, [frames innermost first])]}."""
    text = data[:MAX_STACK_BYTES].decode("utf-8", "replace")
    rank = rank_from_name(name)
    m = _PYSPY_PROCESS.search(text)
    if rank is None and m:
        r = _RANK_IN_CMD.search(m.group("cmd"))
        rank = int(r.group("rank")) if r else None
    threads: list = []
    form = "py-spy" if m else "faulthandler"
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        t = _PYSPY_THREAD.match(line) or _FH_THREAD.match(line)
        if t:
            label = (t.groupdict().get("name") or t.groupdict().get("tid") or "main")
            current = (label, [])
            threads.append(current)
            continue
        f = _PYSPY_FRAME.match(line) or _FH_FRAME.match(line)
        if f and current is not None:
            current[1].append({"func": f.group("func"), "file": f.group("file"),
                               "line": int(f.group("line")), "at": n, "text": line.strip()})
    return {"name": name, "rank": rank, "form": form, "threads": threads}


def _main_thread(dump: dict):
    threads = [t for t in dump["threads"] if t[1]]
    for label, frames in threads:
        if label == "MainThread":
            return frames
    # faulthandler does not name threads: the one whose outermost frame is a
    # <module> is the main script
    for label, frames in threads:
        if frames[-1]["func"] == "<module>":
            return frames
    return threads[0][1] if threads else None


def _base(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _where(frames: list) -> tuple:
    """The innermost meaningful frames, as comparable keys."""
    kept = [f for f in frames if (_base(f["file"]), f["func"]) not in _PASS_THROUGH]
    return tuple(f"{f['func']} ({_base(f['file'])}:{f['line']})" for f in kept[:DEPTH])


def _collective(frames: list) -> str | None:
    for f in frames[:4]:
        if _base(f["file"]) == "distributed_c10d.py" and f["func"] in COLLECTIVES:
            return f["func"]
    return None


def analyze(dumps: list[dict]) -> list[dict]:
    where: dict[int, tuple] = {}
    frames_of: dict[int, list] = {}
    names: dict[int, str] = {}
    for d in dumps:
        if d["rank"] is None or d["rank"] in where:
            continue
        frames = _main_thread(d)
        if not frames:
            continue
        where[d["rank"]] = _where(frames)
        frames_of[d["rank"]] = frames
        names[d["rank"]] = d["name"]
    if len(where) < 2:
        return []
    ops = {r: _collective(frames_of[r]) for r in where}
    waiting = sorted(r for r, op in ops.items() if op)
    if not waiting:
        return []         # nobody waits in a collective: not a collective hang
    counts: dict[str, int] = {}
    for r in waiting:
        counts[ops[r]] = counts.get(ops[r], 0) + 1
    usual_op = max(sorted(counts), key=lambda op: counts[op])
    usual = [r for r in waiting if ops[r] == usual_op]
    elsewhere = sorted(r for r in where if not ops[r])
    suspects = []

    def add(r, kind, why):
        top, ref = frames_of[r][0], frames_of[usual[0]][0]
        suspects.append({"rank": r, "kind": kind, "why": why + " (stack dumps)",
                         "evidence": [{"source": names[r], "line": top["at"], "text": top["text"]},
                                      {"source": names[usual[0]], "line": ref["at"], "text": ref["text"]}]})

    # a rank in another collective than most waiting ranks
    if len(usual) * 2 > len(waiting):
        for r in waiting:
            if ops[r] != usual_op:
                add(r, "op-mismatch", f"rank {r} waits in {ops[r]} while {_ranks(usual)} wait in {usual_op}")
    # ranks outside any collective, when they are the few: the peers the others wait for.
    # When most ranks are outside, the waiting ones may be in a group of their own
    # (tests/data/hang/two-groups): the stacks alone cannot say who is missing.
    if elsewhere and len(elsewhere) < len(waiting):
        for r in elsewhere:
            add(r, "missing", f"rank {r} is not in a collective (it is at {where[r][0] if where[r] else '?'}) "
                              f"while {_ranks(usual)} wait in {usual_op}")
    return suspects


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


def _list(ranks: list[int]) -> str:
    return ",".join(map(str, ranks))
