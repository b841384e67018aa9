"""Engine throughput and memory against GNU grep on the same file, in one run.

    python bench/engine.py --size 1G

Generates a reproducible noisy multi-rank training log (bench/loggen.py) with
real failure excerpts deep inside, then measures:
  * `faildex diagnose --format json` on it: wall time, MB/s, peak RSS of the process;
  * `grep -c -E -f PATTERNS` with every defining regex (translated to ERE): the
    reference for "disk speed" regex scanning;
and prints both and their ratio. Targets (issue 3): >= 150 MB/s, < 200 MB peak,
within 4x of grep.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "pyodide_app"))

from bench.loggen import example_failures, generate, parse_size  # noqa: E402

FAILURES = ["cuda-out-of-memory", "nccl-watchdog-timeout", "elastic-child-failed"]


def to_ere(rx: str) -> str | None:
    """Python regex -> POSIX ERE for grep -E; None when it has no ERE form."""
    if re.search(r"\(\?[=!<]", rx) or re.search(r"\\[AZz]", rx):
        return None
    out, i, in_class = [], 0, False
    classes = {"d": ("[0-9]", "0-9"), "s": ("[[:space:]]", "[:space:]"),
               "w": ("[[:alnum:]_]", "[:alnum:]_"), "S": ("[^[:space:]]", None),
               "D": ("[^0-9]", None), "W": ("[^[:alnum:]_]", None)}
    while i < len(rx):
        ch = rx[i]
        if ch == "\\" and i + 1 < len(rx):
            nxt = rx[i + 1]
            if nxt in classes:
                whole, inner = classes[nxt]
                if in_class:
                    if inner is None:
                        return None
                    out.append(inner)
                else:
                    out.append(whole)
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if rx[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if rx[i + 1:i + 2] == "]":
                out.append("]")
                i += 1
        elif rx.startswith("(?P<", i):
            out.append("(")
            i = rx.index(">", i) + 1
            continue
        elif rx.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        elif ch in "*+?}" and rx[i + 1:i + 2] == "?":
            out.append(ch)
            i += 2
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def run_measured(cmd: list[str]) -> tuple[float, int, bytes]:
    """Run cmd; return (seconds, peak RSS in bytes of that process, stdout)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        data = out.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed with exit code {proc.returncode}")
    return elapsed, usage.ru_maxrss * 1024, data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200M", help="log size, e.g. 200M or 1G")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="write the log here and keep it")
    ap.add_argument("--index", help="index JSON (default: built from the entries)")
    args = ap.parse_args()
    size = parse_size(args.size)

    if args.index:
        index_path = Path(args.index)
    else:
        from generator.index import cached_index_path
        index_path = cached_index_path(ROOT)
    index = json.loads(index_path.read_text())
    failures = [f for f in FAILURES if f in index["entries"]] or sorted(index["entries"])[:3]

    workdir = Path(tempfile.mkdtemp(prefix="faildex-bench-"))
    log = Path(args.keep) if args.keep else workdir / "bench.log"
    t0 = time.perf_counter()
    generate(log, size, args.seed, example_failures(ROOT, failures))
    real_size = log.stat().st_size
    print(f"log: {real_size / 1e6:.0f} MB, {len(failures)} failures embedded ({', '.join(failures)}), "
          f"generated in {time.perf_counter() - t0:.1f}s")

    patterns = [s["regex"] for s in index["signatures"] if s["strength"] == "defining"]
    ere = [p for p in (to_ere(r) for r in patterns) if p]
    pat_file = workdir / "patterns.ere"
    pat_file.write_text("\n".join(ere) + "\n")

    # Warm the page cache so both tools read from memory.
    with open(log, "rb") as fh:
        while fh.read(16 << 20):
            pass

    fd_t, fd_rss, fd_out = run_measured([sys.executable, "-m", "faildex_engine.cli", "--index",
                                         str(index_path), "--format", "json", str(log)])
    report = json.loads(fd_out)
    gr_t, gr_rss, gr_out = run_measured(["grep", "-c", "-E", "-f", str(pat_file), str(log)])

    fd_mbs = real_size / fd_t / 1e6
    gr_mbs = real_size / gr_t / 1e6
    print(f"signatures: {len(index['signatures'])} ({len(patterns)} defining, {len(ere)} as ERE for grep); "
          f"anchors: {len(index['find_anchors'])} find passes + {len(index['alt_anchors'])} in one alternation")
    print(f"faildex diagnose : {fd_t:6.2f} s  {fd_mbs:7.1f} MB/s  peak RSS {fd_rss / 1e6:6.1f} MB  "
          f"primary={report['primary']['id'] if report['primary'] else None}")
    print(f"grep -c -E -f    : {gr_t:6.2f} s  {gr_mbs:7.1f} MB/s  peak RSS {gr_rss / 1e6:6.1f} MB  "
          f"matching lines={gr_out.decode().strip()}")
    print(f"ratio (grep time / faildex time): {gr_t / fd_t:.2f}  "
          f"(faildex is {fd_t / gr_t:.2f}x grep's time)")
    print(f"targets: >=150 MB/s {'met' if fd_mbs >= 150 else 'NOT met'}; "
          f"<200 MB peak {'met' if fd_rss < 200e6 else 'NOT met'}; "
          f"within 4x of grep {'met' if fd_t <= 4 * gr_t else 'NOT met'}")
    if not args.keep:
        log.unlink()
    pat_file.unlink()
    workdir.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
