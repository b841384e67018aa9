#!/usr/bin/env python
"""Generate the sealed multi-rank corpus, batch C.

python make_runs.py --out DIR [--only ID]

Every run launches real torchrun agents (PyTorch CPU, gloo, 127.0.0.1) on
train.py with one injected fault.  Labels come from side files each rank writes
outside the run folder (global rank, local rank, node, attempt, fired).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.environ.get("TORCH_PY", "/tmp/torchvenv/bin/python")
TORCHRUN = os.path.join(os.path.dirname(PY), "torchrun")
SIDE_ROOT = "/tmp/sealedc_side"

CAUSE = {
    "none": "healthy", "typeerror": "python_exception", "runtime_op": "python_exception",
    "filenotfound": "python_exception", "recursion": "python_exception", "assert": "python_exception",
    "stuck_lock": "hang", "stuck_read": "hang", "busy": "hang", "exit0": "early_exit_zero",
    "sigkill": "sigkill", "sigsegv": "sigsegv", "sigabrt": "sigabrt", "dl_worker": "dataloader_worker_killed",
    "shape_mismatch": "collective_mismatch", "dtype_mismatch": "collective_mismatch",
    "op_mismatch": "collective_mismatch", "missing_module": "module_missing_on_node",
    "monitored_barrier": "monitored_barrier_absent", "sysexit": "sys_exit_nonzero",
}
NOTE = {
    "none": "healthy: warning + handled FileNotFoundError traceback, then clean finish",
    "typeerror": "TypeError from torch.cat with an int element",
    "runtime_op": "RuntimeError from a matmul shape mismatch",
    "filenotfound": "FileNotFoundError from torch.load of a missing shard",
    "recursion": "RecursionError walking a self-referencing config dict",
    "assert": "AssertionError on a batch statistic",
    "stuck_lock": "rank blocks forever on a re-acquired threading.Lock; peers hit gloo timeout",
    "stuck_read": "rank blocks forever on os.read of an empty pipe; peers hit gloo timeout",
    "busy": "rank spins in a busy loop; peers hit gloo timeout",
    "exit0": "rank prints a message and exits 0 before the job is done",
    "sigkill": "rank SIGKILLs itself (OOM-killer style)",
    "sigsegv": "rank segfaults (ctypes.string_at(0))",
    "sigabrt": "rank calls os.abort()",
    "dl_worker": "DataLoader worker of the rank SIGKILLs itself",
    "shape_mismatch": "rank all-reduces a gradient with 7 extra elements",
    "dtype_mismatch": "rank all-reduces a float64 gradient while peers use float32",
    "op_mismatch": "rank calls all_gather while peers call all_reduce",
    "missing_module": "node leader on one node cannot import prometheus_client",
    "monitored_barrier": "rank sleeps instead of entering dist.monitored_barrier",
    "sysexit": "rank prints an ERROR line and calls sys.exit(3)",
}

# id, layout, world, agents, fault, fault_rank, extra
RUNS = [
    ("c01", "console", 3, 1, "typeerror", 1, {}),
    ("c02", "console", 5, 1, "stuck_lock", 3, {}),
    ("c03", "console", 6, 2, "sigsegv", 4, {}),
    ("c04", "console", 7, 1, "none", None, {}),
    ("c05", "console", 8, 1, "exit0", 6, {}),
    ("c06", "tee", 3, 1, "runtime_op", 2, {}),
    ("c07", "tee", 5, 1, "sigkill", 4, {}),
    ("c08", "tee", 6, 1, "restart", 0, {"fault0": "assert", "fault1": "sigabrt", "rank1": 3}),
    ("c09", "tee", 8, 1, "shape_mismatch", 5, {}),
    ("c10", "tee", 2, 1, "busy", 1, {}),
    ("c11", "log-dir", 3, 1, "filenotfound", 0, {}),
    ("c12", "log-dir", 5, 1, "dl_worker", 2, {}),
    ("c13", "log-dir", 7, 1, "sysexit", 5, {}),
    ("c14", "log-dir", 6, 1, "none", None, {}),
    ("c15", "log-dir", 4, 1, "monitored_barrier", 3, {}),
    ("c16", "local-ranks-filter", 5, 1, "recursion", 4, {}),
    ("c17", "local-ranks-filter", 6, 1, "stuck_read", 2, {}),
    ("c18", "local-ranks-filter", 3, 1, "sigabrt", 0, {}),
    ("c19", "local-ranks-filter", 7, 1, "dtype_mismatch", 6, {}),
    ("c20", "per-rank-files", 3, 1, "assert", 2, {}),
    ("c21", "per-rank-files", 5, 1, "sigsegv", 1, {}),
    ("c22", "per-rank-files", 6, 1, "none", None, {}),
    ("c23", "per-rank-files", 8, 1, "op_mismatch", 7, {}),
    ("c24", "per-rank-files", 4, 1, "restart", 2, {"fault0": "sysexit", "fault1": "typeerror", "rank1": 0}),
    ("c25", "srun-prefix", 6, 2, "runtime_op", 4, {}),
    ("c26", "srun-prefix", 4, 2, "missing_module", None, {"fault_node": 1}),
    ("c27", "srun-prefix", 8, 2, "stuck_lock", 5, {}),
    ("c28", "srun-prefix", 6, 2, "restart", 1, {"fault0": "sigkill", "fault1": "filenotfound", "rank1": 4}),
    ("c29", "srun-prefix", 2, 2, "sysexit", 1, {}),
    ("c30", "kubectl-prefix", 6, 2, "typeerror", 5, {}),
    ("c31", "kubectl-prefix", 4, 2, "monitored_barrier", 2, {}),
    ("c32", "kubectl-prefix", 8, 2, "none", None, {}),
    ("c33", "kubectl-prefix", 6, 2, "missing_module", None, {"fault_node": 0}),
    ("c34", "kubectl-prefix", 4, 2, "dl_worker", 3, {}),
    ("c35", "json-lines", 5, 1, "recursion", 3, {}),
    ("c36", "json-lines", 6, 2, "sigabrt", 3, {}),
    ("c37", "json-lines", 8, 2, "exit0", 0, {}),
    ("c38", "json-lines", 3, 1, "none", None, {}),
    ("c39", "json-lines", 7, 1, "shape_mismatch", 1, {}),
    ("c40", "json-lines", 6, 2, "busy", 2, {}),
    ("c41", "console", 7, 1, "assert", 3, {}),
    ("c42", "tee", 5, 1, "filenotfound", 1, {}),
]

NAMES_LAYOUT = {"srun-prefix", "kubectl-prefix", "json-lines"}


def node_names(rid, layout, agents):
    if layout == "kubectl-prefix":
        return [f"train-{rid}-worker-{i}" for i in range(agents)]
    if layout == "srun-prefix":
        return [f"nid{1040 + 2 * int(rid[1:]) + i:05d}" for i in range(agents)]
    if agents == 2 or layout == "json-lines":
        return [f"node-{rid}-{i}" for i in range(agents)]
    return [""]


def pump(stream, sink, lock, transform):
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        with lock:
            sink.write(transform(line))
            sink.flush()
    stream.close()


def run_one(idx, spec, out):
    rid, layout, world, agents, fault, frank, extra = spec
    d = os.path.join(out, rid)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    side = os.path.join(SIDE_ROOT, rid)
    shutil.rmtree(side, ignore_errors=True)
    os.makedirs(side)
    stub = os.path.join(side, "stub", "prometheus_client")
    os.makedirs(stub)
    with open(os.path.join(stub, "__init__.py"), "w") as fh:
        fh.write("class Gauge:\n    def __init__(self, *a, **k):\n        pass\n    def set(self, v):\n        pass\n")
    port = 56000 + 10 * idx
    names = node_names(rid, layout, agents)
    restart = fault == "restart"
    nprocs = [world // agents + (1 if i < world % agents else 0) for i in range(agents)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", SIDE_DIR=side, PG_TIMEOUT="10")
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)
    if restart:
        env.update(FAULT=extra["fault0"], FAULT_RANK=str(frank), FAULT2=extra["fault1"],
                   FAULT_RANK2=str(extra["rank1"]))
    elif fault != "none":
        env.update(FAULT=fault, FAULT_RANK=str(frank if frank is not None else -1))
    if fault == "missing_module":
        env["FAULT_NODE"] = names[extra["fault_node"]]
    if fault == "dl_worker":
        env["DL_WORKERS"] = "1"
    if fault == "monitored_barrier":
        env["MB"] = "1"
    if fault == "none":
        env["HEALTHY_NOISE"] = "1"
    files = []
    procs = []
    for a in range(agents):
        cmd = ["timeout", "90", TORCHRUN, "--nnodes", str(agents), "--nproc-per-node", str(nprocs[a]),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"job-{rid}",
               "--local-addr", "127.0.0.1", "--monitor-interval", "0.5"]
        if agents == 2:
            cmd += ["--rdzv-conf", f"is_host={1 if a == 0 else 0}"]
        if restart:
            cmd += ["--max-restarts", "1"]
        if layout == "tee":
            cmd += ["--tee", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", "0"]
        if layout == "log-dir":
            cmd += ["--log-dir", os.path.join(d, "torchrun_logs")]
        cmd.append(os.path.join(HERE, "train.py"))
        e = dict(env, NODE_NAME=names[a])
        if not (fault == "missing_module" and a == extra["fault_node"]):
            e["PYTHONPATH"] = os.path.join(side, "stub")
        if layout == "per-rank-files":
            e["RANK_LOG_DIR"] = d
        split = layout == "json-lines"
        p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE if split else subprocess.STDOUT, cwd=side)
        procs.append(p)
    lock = threading.Lock()
    threads = []
    sinks = []

    def start(stream, sink, tr):
        t = threading.Thread(target=pump, args=(stream, sink, lock, tr), daemon=True)
        t.start()
        threads.append(t)

    if layout in ("srun-prefix", "kubectl-prefix") or (layout == "json-lines"):
        fname = {"srun-prefix": f"slurm-{731200 + idx}.out", "kubectl-prefix": "kubectl_logs.txt",
                 "json-lines": "logs.jsonl"}[layout]
        sink = open(os.path.join(d, fname), "w")
        sinks.append(sink)
        files.append(fname)
        for a, p in enumerate(procs):
            if layout == "srun-prefix":
                start(p.stdout, sink, lambda l, a=a: f"{a}: {l}")
            elif layout == "kubectl-prefix":
                start(p.stdout, sink, lambda l, n=names[a]: f"[pod/{n}/pytorch] {l}")
            else:
                for st, name in ((p.stdout, "stdout"), (p.stderr, "stderr")):
                    def tr(l, n=names[a], s=name):
                        ts = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                        return json.dumps({"time": ts, "host": n, "stream": s, "log": l.rstrip("\n")}) + "\n"
                    start(st, sink, tr)
    else:
        for a, p in enumerate(procs):
            fname = "console.log" if agents == 1 else f"{names[a]}.console.log"
            sink = open(os.path.join(d, fname), "w")
            sinks.append(sink)
            files.append(fname)
            start(p.stdout, sink, lambda l: l)
    t0 = time.time()
    rcs = [p.wait() for p in procs]
    for t in threads:
        t.join(timeout=5)
    for s in sinks:
        s.close()
    if layout == "log-dir":
        files.append("torchrun_logs")
    if layout == "per-rank-files":
        files += sorted(f for f in os.listdir(d) if f.startswith("rank_"))
    # labels from side files
    recs = []
    for f in os.listdir(side):
        if f.endswith(".json"):
            with open(os.path.join(side, f)) as fh:
                recs.append(json.load(fh))
    fired = sorted((r for r in recs if r["fired"]), key=lambda r: (r["attempt"], r["t"]))
    if fired:
        c = fired[0]
        culprit = {"rank": c["rank"], "host": (c["node"] if (layout in NAMES_LAYOUT or agents == 2) else None),
                   "attempt": c["attempt"]}
        kind = c["kind"]
    else:
        culprit = {"rank": None, "host": None, "attempt": 0}
        kind = "none"
    scen = fault if not restart else f"restart:{extra['fault0']}->{extra['fault1']}"
    note = NOTE[kind]
    if restart:
        a1 = [r for r in fired if r["attempt"] == 1]
        note = (f"attempt 0: {NOTE[extra['fault0']]}; attempt 1: {NOTE[extra['fault1']]}"
                + (f" (rank {a1[0]['rank']})" if a1 else " (attempt 1 fault did not fire)"))
    entry = {"id": rid, "files": sorted(files), "layout": layout, "ranks": world, "agents": agents,
             "scenario": scen, "culprit": culprit, "cause": CAUSE[kind] if not restart else "restart_different_failures",
             "note": note}
    if restart and kind != "none":
        entry["attempt0_cause"] = CAUSE[kind]
    check = {"expected_rank": frank, "got": culprit["rank"], "rcs": rcs, "secs": round(time.time() - t0, 1)}
    shutil.rmtree(side, ignore_errors=True)
    print(rid, layout, world, agents, scen, json.dumps(check), flush=True)
    return entry, check


def dump_yaml(entries, path):
    def sc(v):
        if v is None:
            return "null"
        if isinstance(v, (int, float)):
            return str(v)
        return json.dumps(str(v))
    lines = []
    for e in entries:
        lines.append(f"- id: {e['id']}")
        lines.append("  files:")
        for f in e["files"]:
            lines.append(f"    - {sc(f)}")
        for k in ("layout", "ranks", "agents", "scenario"):
            lines.append(f"  {k}: {sc(e[k])}")
        c = e["culprit"]
        lines.append("  culprit:")
        for k in ("rank", "host", "attempt"):
            lines.append(f"    {k}: {sc(c[k])}")
        lines.append(f"  cause: {sc(e['cause'])}")
        if "attempt0_cause" in e:
            lines.append(f"  attempt0_cause: {sc(e['attempt0_cause'])}")
        lines.append(f"  note: {sc(e['note'])}")
    with open(path, "w") as fh:
        fh.write("# Sealed multi-rank corpus, batch C. Labels by construction (side files), see README.md\n")
        fh.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    specs = [(i, s) for i, s in enumerate(RUNS) if not args.only or s[0] in args.only.split(",")]
    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda t: run_one(t[0], t[1], out), specs))
    shutil.rmtree(SIDE_ROOT, ignore_errors=True)
    # a partial regeneration (--only) writes manifest.only.yaml, leaving manifest.yaml alone
    mpath = os.path.join(out, "manifest.only.yaml" if args.only else "manifest.yaml")
    entries = sorted((e for e, _ in results), key=lambda e: e["id"])
    dump_yaml(entries, mpath)


if __name__ == "__main__":
    main()
