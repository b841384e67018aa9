"""Site build benchmark: `mkdocs build --strict` with N synthetic entries.

    .venv/bin/python bench/site.py --entries 100 1000 3000

For each N it writes N valid synthetic entries (every field filled, sized like the
real ones, linked to their neighbours) into a temporary checkout, builds this
repository's site from them (FAILDEX_ROOT), and prints the wall time and the peak
resident memory of the mkdocs process (os.wait4 rusage of that child). Target
(issue 2, item 9): 3000 entries in under 60 s and 500 MB. A warm-up build first makes
the diagnoser's Pyodide snapshot (node, once per engine wheel, cached), which a build
right after an engine change would otherwise pay inside its figures.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator import schema as S  # noqa: E402

TARGET_ENTRIES, TARGET_S, TARGET_MB = 3000, 60.0, 500.0
CATEGORIES = list(S.CATEGORIES)
SYSTEMS = ["torchrun", "NCCL", "CUDA", "PyTorch", "DeepSpeed", "Slurm", "Kubernetes", "vLLM",
           "DataLoader", "FSDP", "c10d", "Triton"]
WORDS = ("allocator barrier checkpoint collective communicator descriptor driver endpoint "
         "gradient handle interface kernel launcher manifest optimizer partition queue rank "
         "scheduler segment shard socket store stream tensor timeout watchdog worker").split()


def words(n: int, k: int) -> str:
    return " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(k))


def synthetic_entry(n: int, total: int) -> tuple[str, str, str]:
    """(category, id, YAML text) of the n-th synthetic entry; valid by the validator."""
    cat = CATEGORIES[n % len(CATEGORIES)]
    eid = f"synthetic-fault-{n:05d}"
    token = f"SynthFault{n:05d}Error"
    nxt, prv = (n + 1) % total, (n - 1) % total
    systems = sorted({SYSTEMS[n % len(SYSTEMS)], SYSTEMS[(n * 5 + 3) % len(SYSTEMS)]})
    related = sorted({f"synthetic-fault-{nxt:05d}", f"synthetic-fault-{(n * 13 + 7) % total:05d}"}
                     - {eid})
    log_lines = "\n".join(
        f"      [rank{r}] step {100 + r} loss 2.{n % 97:02d} lr 3e-4 {words(n + r, 4)}"
        for r in range(12))
    text = f"""id: {eid}
title: Synthetic fault {n} in the {words(n, 2)} path ({token})
category: {cat}
severity: {S.SEVERITIES[n % len(S.SEVERITIES)]}
systems: [{", ".join(systems)}]
quick_answer: >
  Synthetic fault {n} stops the {words(n, 3)} before step {n % 500}. Restart with the
  setting SYNTH_{n}=1 and the run continues from its last checkpoint.
root_cause: >
  The {words(n + 1, 3)} of fault {n} waits on the {words(n + 2, 2)} that a peer never
  publishes; after {n % 600 + 30} seconds the wait gives up and raises {token}.

  Benchmark text {n}: {words(n + 3, 12)}.
misread_as: >
  A network problem on rank {n % 64}; the network was idle for fault {n}.
symptoms:
  - see: Every rank stops {n % 600 + 30} s after start-up with {token}.
    why: The wait of fault {n} has a fixed limit.
  - see: Rank {n % 64} prints its last step {n % 500} and no checkpoint line.
    why: Fault {n} blocks the {words(n + 4, 2)} before the checkpoint.
  - see: GPU utilisation drops to zero on {n % 8 + 1} nodes at once.
    why: The {words(n + 5, 2)} holds every worker of fault {n}.
signatures:
  - id: synth-error
    regex: '{token}: (?P<what>[a-z ]{{1,60}}) after (?P<wait_s>\\d+) s'
    strength: defining
    source: "reproduced: bench/site.py synthetic fault {n}"
  - id: synth-waiting
    regex: 'synth-{n:05d}: waiting for \\w+'
    strength: supporting
    source: "reproduced: bench/site.py synthetic fault {n}"
affects:
  - software: pytorch
    introduced: "2.{n % 5}"
    fixed: "2.{n % 5 + 3}"
    note: fault {n} appears with the {words(n, 2)} change
discriminators:
  - signal: Seconds until fault {n}
    here: "{n % 600 + 30} s"
    elsewhere:
      entry: synthetic-fault-{nxt:05d}
      when: under a second for fault {nxt}
confirm:
  - do: Look for {token} on every rank.
    command: grep -c '{token}' rank*.log
  - do: Check the {words(n + 6, 2)} of fault {n}.
    command: synthctl status --fault {n}
fix:
  - do: Restart with SYNTH_{n}=1.
    command: SYNTH_{n}=1 torchrun --nnodes 2 train.py --resume last
    why: The setting makes the peer publish the {words(n + 7, 2)} of fault {n}.
  - do: Raise the wait of fault {n} while testing.
    command: export SYNTH_WAIT_{n}={n % 600 + 600}
    why: A longer wait gives a slow peer time to publish.
verify: Rank {n % 64} logs step {n % 500 + 1} within a minute of the restart.
prevent:
  - Set SYNTH_{n}=1 in the launcher of fault {n}.
  - Alert when step {n % 500} takes longer than {n % 600 + 30} s.
not_this:
  - entry: synthetic-fault-{prv:05d}
    because: fault {prv} fails before the first step; fault {n} after step {n % 500}.
related: [{", ".join(related)}]
references:
  - title: Synthetic reference {n}
    url: https://example.org/synthetic/{n}
examples:
  - source: "reproduced: bench/site.py synthetic fault {n}"
    log: |
{log_lines}
      [rank0] synth-{n:05d}: waiting for peer
      [rank0] {token}: peer never published after {n % 600 + 30} s
  - source: https://example.org/synthetic/{n}/report
    log: |
      [rank1] synth-{n:05d}: waiting for store
      [rank1] {token}: store key missing after {n % 600 + 30} s
"""
    return cat, eid, text


def make_checkout(dest: Path, n: int) -> Path:
    for i in range(n):
        cat, eid, text = synthetic_entry(i, n)
        path = dest / "entries" / cat / f"{eid}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (dest / "entries" / "healthy").symlink_to(REPO / "entries" / "healthy")
    return dest


def build(root: Path, site_dir: Path, log: Path) -> tuple[int, float, float, float]:
    """(exit status, wall seconds, CPU seconds, peak RSS in MB) of one `mkdocs build
    --strict` (CPU and memory: the mkdocs process and the workers it waited for)."""
    env = {**os.environ, "FAILDEX_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"}
    with log.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
             str(REPO / "mkdocs.yml"), "-d", str(site_dir)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return proc.returncode, seconds, cpu, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, nargs="+", default=[100, 1000, 3000])
    ap.add_argument("--keep", action="store_true", help="keep the temporary checkouts")
    args = ap.parse_args(argv)
    if min(args.entries) < 2:
        ap.error("at least 2 entries (they link to each other)")
    # The diagnoser's Pyodide snapshot is made once per engine wheel, by node (a 2-entry
    # build that made it peaked at 351 MB; a 100-entry build that did not, at 136 MB), and
    # cached in .cache/snapshot: a first build after an engine change pays it. A 2-entry
    # build first makes it, so that the figures below are each build's own.
    with tempfile.TemporaryDirectory(prefix="faildex-bench-warm-") as warm:
        rc, seconds, _, peak = build(make_checkout(Path(warm) / "checkout", 2), Path(warm) / "site",
                                     Path(warm) / "build.log")
        print(f"warm-up build (2 entries; makes the Pyodide snapshot if this engine has none yet): "
              f"{seconds:.1f} s, peak {peak:.0f} MB, exit {rc}")
    print(f"{'entries':>8} {'pages':>7} {'build s':>8} {'cpu s':>8} {'peak MB':>8} {'site MB':>8}"
          f"  ({os.cpu_count()} CPUs)")
    failed = False
    for n in args.entries:
        tmp = Path(tempfile.mkdtemp(prefix=f"faildex-bench-{n}-"))
        try:
            root = make_checkout(tmp / "checkout", n)
            site_dir = tmp / "site"
            rc, seconds, cpu, peak = build(root, site_dir, tmp / "build.log")
            if rc != 0:
                print(f"{n:>8} build failed (exit {rc}):\n" + (tmp / "build.log").read_text()[-3000:])
                failed = True
                continue
            pages = sum(1 for _ in site_dir.rglob("index.html"))
            size = sum(p.stat().st_size for p in site_dir.rglob("*") if p.is_file()) / 2**20
            verdict = ""
            if n >= TARGET_ENTRIES:
                ok = seconds < TARGET_S and peak < TARGET_MB
                verdict = ("within" if ok else "OVER") + f" target ({TARGET_S:.0f} s, {TARGET_MB:.0f} MB)"
                failed |= not ok
            print(f"{n:>8} {pages:>7} {seconds:>8.1f} {cpu:>8.1f} {peak:>8.0f} {size:>8.1f}  {verdict}",
                  flush=True)
        finally:
            if args.keep:
                print(f"         kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
