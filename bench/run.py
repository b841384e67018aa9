"""What `faildex run` costs a healthy job: the same output through `faildex run` and
through `cat` alone, in the same process.

    python bench/run.py [--size 200M] [--profile nccl-info]

The job is `cat FILE` of a healthy log, its stdout sent to /dev/null: by default
bench/loggen.py's mix (16 ranks' `[rankN]:` lines, glog warnings, NCCL INFO, tqdm
progress), or with --profile the healthy twin of one of bench/profiles.py's job-shaped
profiles (NCCL_DEBUG=INFO, 64-rank torchrun, Slurm/Kubernetes, ...). Printed:
wall and CPU seconds (the faildex process and the job together, from the children's
rusage) of the reference (`cat FILE`) and of `faildex run -- cat FILE`, CPU seconds per GB
of output, and the ratio.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loggen import generate, parse_size   # noqa: E402
from bench.profiles import PROFILES, generate_profile   # noqa: E402


def timed(cmd: list[str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, cwd=ROOT).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200M")
    ap.add_argument("--profile", choices=sorted(PROFILES), help="a job-shaped healthy profile instead of loggen's mix")
    args = ap.parse_args()
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "healthy.log"
        if args.profile:
            generate_profile(log, args.profile, size, seed=1, healthy=True)
        else:
            generate(log, size, seed=1)
        faildex = [sys.executable, "-m", "faildex"]
        subprocess.run(faildex + ["--version"], stdout=subprocess.DEVNULL, cwd=ROOT)   # the index, cached
        ref = timed(["cat", str(log)])
        run = timed(faildex + ["run", "--", "cat", str(log)])
        gb = os.path.getsize(log) / 1e9
    what = f"bench/profiles.py {args.profile}, healthy" if args.profile else "bench/loggen.py"
    print(f"{args.size} healthy log ({what}, seed 1), stdout to /dev/null")
    print(f"cat FILE                    wall {ref[0]:6.2f} s  cpu {ref[1]:6.2f} s  exit {ref[2]}")
    print(f"faildex run -- cat FILE     wall {run[0]:6.2f} s  cpu {run[1]:6.2f} s  exit {run[2]}")
    print(f"faildex run's CPU: {(run[1] - ref[1]) / gb:.1f} s per GB of output; wall x{run[0] / ref[0]:.1f} "
          f"of cat alone (whose wall time is the pipe's, not a job's)")
    return 0 if run[2] == ref[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
