"""Fleet triage at scale: 10,000 generated job folders, then 100,000 JSON lines.

    python bench/fleet.py                       # 10,000 jobs, 100,000 lines
    python bench/fleet.py --jobs 2000 --lines 20000 --keep bench/out/fleet
    python bench/fleet.py --page-only --days 30 --per-day 10000   # the page alone, 300,000 lines

Each job folder holds one or two logs of a log-normal size (median 48 KB, at most
4 MB): the NCCL start-up lines of entries/healthy/nccl-init-info.log for each of the
job's hosts, training noise from bench/loggen.py, and for a failed job one real
example log of an entry (entries/**: the `examples` of the YAML, or the files
beside it), with the host names that example prints replaced by one of the job's
hosts. 40% of the jobs are healthy. A few hosts are planted as bad: a job that
ran on one of them fails with a hardware-class failure (fleet.HARDWARE_ENTRIES)
three times in ten; elsewhere that happens once in two hundred jobs.

Measured: `faildex triage` over the folders (jobs/s, peak RSS of the process and
its workers together), then `faildex fleet report` over 100,000 lines (the
10,000 repeated with new job ids; seconds, peak RSS). The planted hosts must be
the top of the drain list, or the benchmark fails.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "pyodide_app"))

from bench.loggen import _noise_lines  # noqa: E402
from faildex import diagnose, load_index  # noqa: E402
from faildex.fleet import HARDWARE_ENTRIES  # noqa: E402

FAILDEX = [sys.executable, "-m", "faildex"]
NCCL_INIT = (ROOT / "entries" / "healthy" / "nccl-init-info.log").read_text()
NOISE_HOST = b"gpu-node-000"


def tree_rss(pid: int) -> int:
    """RSS in bytes of a process and all its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            pass
    return total


def run_sampled(cmd: list[str], **kw) -> tuple[float, int, subprocess.CompletedProcess]:
    """Run cmd; (seconds, peak RSS of its process tree sampled every 50 ms, result)."""
    peak = [0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    t.join()
    return elapsed, peak[0], subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def hosts_in(text: str, index: dict) -> list[str]:
    """The host names the engine finds in a log text."""
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
        fh.write(text)
    try:
        return diagnose([fh.name], index)["facts"].get("hosts", [])
    finally:
        os.unlink(fh.name)


def rename_hosts(text: str, seen: list[str], to: list[str]) -> str:
    for i, h in enumerate(seen):
        text = re.sub(rf"(?<![\w.-]){re.escape(h)}(?![\w-])", to[i % len(to)], text)
    return text


def examples(index: dict) -> dict[str, list[tuple[str, list[str]]]]:
    """entry id -> [(real example text, host names the engine finds in it)]."""
    from generator.loader import load_all
    from generator.validate import example_text
    out: dict[str, list] = {}
    entries, _ = load_all(ROOT)
    for e in entries:
        if e.id not in index["entries"]:
            continue
        for ex in e.data.get("examples") or []:
            if ex.get("expect", e.id) != e.id:
                continue
            text = example_text(e, ex)
            if not text or len(text) > 256 << 10:
                continue
            with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
                fh.write(text)
            try:
                report = diagnose([fh.name], index)
            finally:
                os.unlink(fh.name)
            if report["primary"] and report["primary"]["id"] == e.id:
                out.setdefault(e.id, []).append((text, report["facts"].get("hosts", [])))
    return out


def noise_pool(size: int) -> bytes:
    rng = random.Random(7)
    gen = _noise_lines(rng, 8)    # 8 ranks: every NCCL noise line names gpu-node-000
    parts, n = [], 0
    while n < size:
        line = next(gen).encode()
        parts.append(line)
        n += len(line)
    return b"".join(parts)


def make_jobs(out: Path, n_jobs: int, bad_hosts: list[str], seed: int, index: dict) -> dict:
    rng = random.Random(seed)
    ex = examples(index)
    hardware = [e for e in HARDWARE_ENTRIES if e in ex]
    software = [e for e in ex if e not in HARDWARE_ENTRIES]
    hosts = [f"gpu{n:04d}" for n in range(512)]
    init_hosts = hosts_in(NCCL_INIT, index)      # the healthy start-up log names several
    pool = noise_pool(16 << 20)
    now = time.time()
    stats = {"bytes": 0, "failed": 0, "hardware": 0, "bad_host_jobs": 0}
    for j in range(n_jobs):
        job = out / f"{700000 + j}"
        job.mkdir(parents=True)
        job_hosts = rng.sample(hosts, rng.choice([1, 1, 2, 2, 4, 8]))
        if rng.random() < 0.04:          # a job that ran on a planted bad host
            job_hosts[0] = rng.choice(bad_hosts)
        on_bad = [h for h in job_hosts if h in bad_hosts]
        stats["bad_host_jobs"] += bool(on_bad)
        failure = None
        if on_bad and rng.random() < 0.3:
            failure, culprit = rng.choice(hardware), on_bad[0]
        elif rng.random() < 0.005:
            failure, culprit = rng.choice(hardware), rng.choice(job_hosts)
        elif rng.random() < 0.6:
            failure, culprit = rng.choice(software), rng.choice(job_hosts)
        files = rng.choice([1, 1, 1, 2])
        for f in range(files):
            size = min(int(rng.lognormvariate(10.8, 1.2)), 4 << 20)   # median ~48 KB
            start = rng.randrange(0, len(pool) - size - 1)
            cut = pool.find(b"\n", start) + 1
            body = pool[cut:cut + size]
            body = body[:body.rfind(b"\n") + 1].replace(NOISE_HOST, job_hosts[f % len(job_hosts)].encode())
            head = rename_hosts(NCCL_INIT, init_hosts, job_hosts).encode()
            tail = b""
            if failure and f == files - 1:
                text, seen = rng.choice(ex[failure])
                tail = rename_hosts(text, seen, [culprit]).encode()   # the example's hosts: this job's
            data = head + body + tail
            path = job / f"rank{f}.log"
            path.write_bytes(data)
            stats["bytes"] += len(data)
        when = now - rng.uniform(0, 8 * 7 * 86400)     # spread over eight weeks
        for p in job.iterdir():
            os.utime(p, (when, when))
        stats["failed"] += failure is not None
        stats["hardware"] += failure in HARDWARE_ENTRIES
    return stats


def page_only(days: int, per_day: int, seed: int, index: dict, work: Path) -> int:
    """The page alone from days x per_day generated triage lines: 60 % clean, the failures
    spread over every entry (Zipf-like: a few classes most of the time), 2,000 hosts, the
    job model's first suspect on one of them, ended over the days. Prints the page build's
    seconds, peak RSS, files and bytes written."""
    rng = random.Random(seed)
    ids = sorted(index["entries"])
    weights = [1 / (k + 1) for k in range(len(ids))]
    hosts = [f"gpu{n:04d}" for n in range(2000)]
    lines = work / "lines.jsonl"
    with open(lines, "w") as fh:
        for d in range(days):
            for j in range(per_day):
                ended = f"2026-11-{1 + d % 28:02d}T{j * 24 // per_day:02d}:{j % 60:02d}:00Z" if days <= 28 else \
                    time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_790_000_000 + d * 86400 + j * 86400 // per_day))
                job_hosts = rng.sample(hosts, 2)
                item = {"faildex_triage": 1, "job": f"j{d:02d}-{j:05d}", "ended": ended, "hosts": job_hosts,
                        "index": index["digest"], "release": "bench", "files": 2, "versions": {}}
                if rng.random() < 0.6:
                    item.update(primary=None, outcome="clean", suspects=[], evidence=[])
                else:
                    eid = rng.choices(ids, weights)[0]
                    e = index["entries"][eid]
                    item.update(primary={"id": eid, "title": e["title"], "category": e["category"],
                                         "severity": e["severity"], "url": e["url"], "confidence": 0.9},
                                outcome="known",
                                suspects=[{"rank": rng.randrange(64), "host": job_hosts[0], "kind": "crashed",
                                           "why": "rank failed first"}],
                                evidence=[{"entry": eid, "source": "rank0.log", "line": rng.randrange(1, 99999),
                                           "text": f"RuntimeError: {eid} on {job_hosts[0]}", "host": job_hosts[0]}])
                fh.write(json.dumps(item) + "\n")
    size = lines.stat().st_size
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pyodide_app"))
    secs, rss, p = run_sampled(FAILDEX + ["fleet", "report", str(lines), "-o", str(work / "fleet")], env=env)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        return 1
    files = [f for f in (work / "fleet").rglob("*") if f.is_file()]
    pages = [f for f in files if f.suffix == ".html"]
    print(f"fleet report: {days * per_day} lines ({days} days x {per_day} jobs, {size / 1e6:.0f} MB) in "
          f"{secs:.1f} s, peak RSS {rss / 1e6:.0f} MB; wrote {len(pages)} pages, "
          f"{sum(f.stat().st_size for f in pages) / 1e6:.1f} MB of HTML "
          f"(index.html {(work / 'fleet' / 'index.html').stat().st_size / 1e3:.0f} KB), "
          f"{sum(f.stat().st_size for f in files) / 1e6:.1f} MB in all")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page-only", action="store_true", help="only the page, from generated triage lines")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="work folder to keep (default: a temporary one)")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)   # figures appear as they are measured

    from generator.index import cached_index_path
    index_file = str(cached_index_path(ROOT))
    index = load_index(index_file)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="faildex-fleet-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if args.page_only:
        rc = page_only(args.days, args.per_day, args.seed, index, work)
        if not args.keep:
            shutil.rmtree(work)
        return rc
    bad = ["gpu0137", "gpu0291", "gpu0404"]
    t0 = time.perf_counter()
    stats = make_jobs(work / "jobs", args.jobs, bad, args.seed, index)
    print(f"generated {args.jobs} job folders, {stats['bytes'] / 1e6:.0f} MB "
          f"({stats['failed']} failed, {stats['hardware']} hardware-class, "
          f"{stats['bad_host_jobs']} on planted hosts {', '.join(bad)}) in {time.perf_counter() - t0:.0f} s")

    lines = work / "triage.jsonl"
    env = dict(os.environ, FAILDEX_INDEX=index_file, PYTHONPATH=str(ROOT / "pyodide_app"))
    secs, rss, p = run_sampled(FAILDEX + ["triage", str(work / "jobs" / "*"), "-o", str(lines),
                                          "--jobs", str(args.workers)], env=env)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        return 1
    n = sum(1 for _ in open(lines))
    print(f"triage: {n} jobs in {secs:.1f} s = {n / secs:.0f} jobs/s "
          f"({stats['bytes'] / 1e6 / secs:.0f} MB/s) with {args.workers} workers; "
          f"peak RSS {rss / 1e6:.0f} MB (process and workers)")

    many = work / "lines-many.jsonl"
    with open(lines) as src, open(many, "w") as dst:
        base = src.readlines()
        for k in range(-(-args.lines // len(base))):
            for raw in base:
                item = json.loads(raw)
                item["job"] = f"{item['job']}-{k}"
                dst.write(json.dumps(item) + "\n")
    total = sum(1 for _ in open(many))
    secs, rss, p = run_sampled(FAILDEX + ["fleet", "report", str(many), "-o", str(work / "fleet"),
                                          "--json"], env=env)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        return 1
    print(f"fleet report: {total} lines in {secs:.1f} s, peak RSS {rss / 1e6:.0f} MB")
    agg = json.loads((work / "fleet" / "fleet.json").read_text())
    top = [h["host"] for h in agg["drain"][:len(bad)]]
    print("drain candidates: " + "; ".join(f"{h['host']} score {h['score']} in {h['jobs']} jobs"
                                           for h in agg["drain"][:6]))
    print(f"page: {work / 'fleet' / 'index.html'}")
    if sorted(top) != sorted(bad):
        print(f"FAIL: the planted hosts {bad} are not the top {len(bad)}: {top}")
        return 1
    print("the planted bad hosts are the top drain candidates")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
