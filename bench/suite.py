"""Where the test suite's time goes: `make test`'s pytest command, with a timeline.

    python bench/suite.py                      # the whole suite, as `make test` runs it
    python bench/suite.py tests/test_engine.py # some of it (pytest arguments)

Each worker writes when each test starts and ends (setup to teardown, this file's plugin),
then this prints: the wall time, each worker's busy time and when it went idle, how long the
last worker ran alone, and the longest tests with their worker and start. A run whose last
worker runs alone for long is unbalanced (a long test or a whole-file group started late:
tests/conftest.py's LONG_FIRST and BY_FILE); one whose workers are all busy is CPU-bound, and
only less work makes it faster. The reference is the run's own wall clock.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS = "FAILDEX_SUITE_EVENTS"


# ---------------------------------------------------------------- the plugin (in each worker)

def _write(event: dict) -> None:
    path = os.environ.get(EVENTS)
    if path:
        event.update(worker=os.environ.get("PYTEST_XDIST_WORKER", "main"), t=time.time())
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"test": nodeid, "at": "start"})


def pytest_runtest_logfinish(nodeid, location):
    _write({"test": nodeid, "at": "end"})


# ---------------------------------------------------------------- the run and its report

def report(events: list[dict], started: float, ended: float, top: int = 15) -> str:
    spans: dict[str, list[tuple[float, float, str]]] = {}
    open_: dict[tuple[str, str], float] = {}
    for e in events:
        if e["worker"] == "main" and any(x["worker"] != "main" for x in events):
            continue            # the controller replays the workers' events
        key = (e["worker"], e["test"])
        if e["at"] == "start":
            open_[key] = e["t"]
        elif key in open_:
            spans.setdefault(e["worker"], []).append((open_.pop(key), e["t"], e["test"]))
    out = [f"wall {ended - started:.0f} s, {len(spans)} worker(s)"]
    last = {w: max(end for _, end, _ in s) for w, s in spans.items()}
    for w in sorted(spans):
        busy = sum(end - start for start, end, _ in spans[w])
        first = min(start for start, _, _ in spans[w])
        out.append(f"  {w}: first test at {first - started:.0f} s, busy {busy:.0f} s, "
                   f"idle from {last[w] - started:.0f} s")
    if len(last) > 1:
        ends = sorted(last.values())
        out.append(f"  the last worker ran alone for {ends[-1] - ends[-2]:.0f} s")
    rows = sorted(((end - start, start, w, test) for w, s in spans.items() for start, end, test in s),
                  reverse=True)[:top]
    out.append(f"longest {len(rows)} tests (setup to teardown):")
    out += [f"  {d:6.1f} s  at {start - started:5.0f} s  {w:5}  {test}" for d, start, w, test in rows]
    return "\n".join(out)


def make_test_options() -> list[str]:
    """The options of the pytest command `make test` runs (the Makefile's), so that this
    times the suite as CI runs it."""
    import re
    import shlex
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    line = next(ln for ln in recipe.splitlines() if "/pytest " in ln)
    return shlex.split(line.split("/pytest ", 1)[1])


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events.jsonl"
        env = dict(os.environ, **{EVENTS: str(events)})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "pytest", *make_test_options(), "-p", "bench.suite", *argv]
        started = time.time()
        code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        ended = time.time()
        lines = [json.loads(ln) for ln in events.read_text(encoding="utf-8").splitlines()] \
            if events.exists() else []
    print(report(lines, started, ended))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
