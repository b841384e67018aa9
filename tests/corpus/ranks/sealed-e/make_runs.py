#!/usr/bin/env python
"""Launch the sealed-e runs: torchrun agents on 127.0.0.1, one fault per run, labels by construction.

usage: /tmp/torchvenv/bin/python make_runs.py --out DIR [--only e01,e07] [--manifest-only]
"""
import argparse
import datetime as dt
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = "/tmp/sealed-e-work"
TORCHRUN = "/tmp/torchvenv/bin/torchrun"
BASE_PORT = 62000

# id, scenario, layout, nproc per agent, faults, extra env, max_restarts, cause
EXC = "python exception"
RUNS = [
    dict(id="e01", scenario="healthy", layout="console", nproc=[2], faults=[],
         cause="healthy run, no fault"),
    dict(id="e02", scenario="keyerror", layout="tee", nproc=[3],
         faults=[dict(rank=1, kind="keyerror", step=5)],
         cause="Python KeyError (missing config key) on one rank"),
    dict(id="e03", scenario="stuck-sleep", layout="log-dir", nproc=[2],
         faults=[dict(rank=0, kind="stuck_sleep", step=6)],
         cause="one rank stuck in a long sleep; peers time out in all_reduce"),
    dict(id="e04", scenario="sigkill", layout="per-rank", nproc=[3],
         faults=[dict(rank=2, kind="sigkill", step=7)],
         cause="one rank killed by SIGKILL"),
    dict(id="e05", scenario="sigsegv", layout="srun", nproc=[1, 1],
         faults=[dict(rank=1, kind="sigsegv", step=5)],
         cause="segmentation fault (SIGSEGV) in one rank"),
    dict(id="e06", scenario="loader-worker-killed", layout="kubectl", nproc=[2],
         faults=[dict(rank=1, kind="loader_worker_kill", step=4)], env=dict(USE_LOADER="1"),
         cause="DataLoader worker process of one rank killed by SIGKILL"),
    dict(id="e07", scenario="mismatch-shape", layout="jsonl", nproc=[2],
         faults=[dict(rank=1, kind="mismatch_shape", step=6)],
         env=dict(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
         cause="collective shape mismatch (all_reduce of a wrong-sized tensor) on one rank"),
    dict(id="e08", scenario="exit0-early", layout="console", nproc=[1, 1],
         faults=[dict(rank=0, kind="exit0", step=6)],
         note_extra="; node0 agent (its only worker exited 0) waited in the exit barrier and was killed by timeout -k (code -9)",
         cause="one rank exits with code 0 mid-training; peers time out in all_reduce"),
    dict(id="e09", scenario="monitored-barrier-absent", layout="tee", nproc=[3],
         faults=[dict(rank=2, kind="barrier_absent", step=5)],
         cause="one rank never reaches monitored_barrier"),
    dict(id="e10", scenario="module-missing-node", layout="console", nproc=[2, 1],
         faults=[], env=dict(AUX_IMPORT="1"), aux_nodes=["node0"],
         cause="helper module not installed on one node (ModuleNotFoundError at import)"),
    dict(id="e11", scenario="restart-different", layout="log-dir", nproc=[2], max_restarts=1,
         faults=[dict(rank=1, kind="valueerror", step=4, attempt=0),
                 dict(rank=0, kind="sigabrt", step=3, attempt=1)],
         cause="ValueError on one rank in attempt 0; after restart a different rank aborts (SIGABRT)"),
    dict(id="e12", scenario="healthy", layout="srun", nproc=[1, 1], faults=[],
         cause="healthy run, no fault"),
    dict(id="e13", scenario="zerodivision", layout="local-ranks-filter", nproc=[3],
         faults=[dict(rank=2, kind="zerodiv", step=6)], filter="0",
         cause="Python ZeroDivisionError on one rank (its output filtered from console)"),
    dict(id="e14", scenario="sigabrt", layout="kubectl", nproc=[1, 1],
         faults=[dict(rank=1, kind="sigabrt", step=6)],
         cause="one rank aborts (SIGABRT)"),
    dict(id="e15", scenario="stuck-lock", layout="srun", nproc=[3], tee=True,
         faults=[dict(rank=1, kind="stuck_lock", step=5)],
         cause="one rank deadlocked on a lock; peers time out in all_reduce"),
    dict(id="e16", scenario="mismatch-dtype", layout="console", nproc=[3],
         faults=[dict(rank=0, kind="mismatch_dtype", step=4)],
         env=dict(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
         cause="collective dtype mismatch (float64 vs float32 all_reduce) on one rank"),
    dict(id="e17", scenario="assertion", layout="jsonl", nproc=[1, 1],
         faults=[dict(rank=1, kind="assertion", step=7)],
         cause="Python AssertionError on one rank"),
    dict(id="e18", scenario="stuck-read", layout="per-rank", nproc=[3],
         faults=[dict(rank=1, kind="stuck_read", step=4)],
         cause="one rank blocked on a pipe read; peers time out in all_reduce"),
    dict(id="e19", scenario="healthy", layout="log-dir", nproc=[2], faults=[],
         env=dict(USE_DDP="1"), cause="healthy run (DDP), no fault"),
    dict(id="e20", scenario="mismatch-op", layout="kubectl", nproc=[2],
         faults=[dict(rank=0, kind="mismatch_op", step=5)],
         env=dict(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
         cause="collective op mismatch (MAX vs SUM all_reduce) on one rank"),
    dict(id="e21", scenario="filenotfound", layout="log-dir", nproc=[1, 1],
         faults=[dict(rank=0, kind="filenotfound", step=5)], env=dict(USE_DDP="1"),
         cause="Python FileNotFoundError (missing data shard) on one rank, DDP"),
    dict(id="e22", scenario="restart-different", layout="tee", nproc=[2], max_restarts=1,
         faults=[dict(rank=0, kind="stuck_sleep", step=5, attempt=0),
                 dict(rank=1, kind="indexerror", step=3, attempt=1)],
         cause="one rank stuck in attempt 0 (peers time out); after restart another rank raises IndexError"),
    dict(id="e23", scenario="exit0-early", layout="jsonl", nproc=[3],
         faults=[dict(rank=2, kind="exit0", step=5)],
         cause="one rank exits with code 0 mid-training; peers time out in all_reduce"),
    dict(id="e24", scenario="torcherror", layout="local-ranks-filter", nproc=[2, 1],
         faults=[dict(rank=1, kind="torcherror", step=6)], filter="0,1",
         cause="torch RuntimeError (matmul shape mismatch) on one rank"),
    dict(id="e25", scenario="typeerror", layout="per-rank", nproc=[1, 1],
         faults=[dict(rank=0, kind="typeerror", step=4)],
         cause="Python TypeError (tensor + str) on one rank"),
    dict(id="e26", scenario="memoryerror", layout="console", nproc=[2],
         faults=[dict(rank=1, kind="memoryerror", step=3)],
         cause="Python MemoryError raised on one rank"),
    dict(id="e27", scenario="healthy", layout="kubectl", nproc=[2, 2], faults=[],
         cause="healthy run, no fault"),
]


def now_iso(t):
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def reader(proc, idx, sink):
    for raw in iter(proc.stdout.readline, b""):
        sink.append((time.time(), idx, raw.decode("utf-8", "replace").rstrip("\n")))


def run_one(spec, out_root, index):
    rid = spec["id"]
    run_dir = os.path.join(out_root, rid)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    side_dir = os.path.join(WORK, "side", rid)
    shutil.rmtree(side_dir, ignore_errors=True)
    os.makedirs(side_dir)
    job = os.path.join(WORK, "job")
    os.makedirs(job, exist_ok=True)
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(job, "train.py"))
    aux = os.path.join(job, "site_node0")
    os.makedirs(aux, exist_ok=True)
    with open(os.path.join(aux, "toyaug_kernels.py"), "w") as fh:
        fh.write("def jitter(x):\n    return x\n")

    port = BASE_PORT + 10 * index
    nproc = spec["nproc"]
    nnodes = len(nproc)
    layout = spec["layout"]
    procs, sink, threads = [], [], []
    for a, npn in enumerate(nproc):
        node = f"node{a}"
        env = dict(os.environ)
        env.update(PYTHONUNBUFFERED="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
                   NODE_NAME=node, SIDE_DIR=side_dir, FAULTS=json.dumps(spec["faults"]),
                   PG_TIMEOUT="9", STEPS="16")
        env.update(spec.get("env", {}))
        env.pop("PYTHONPATH", None)
        if node in spec.get("aux_nodes", []):
            env["PYTHONPATH"] = aux
        cmd = ["timeout", "-k", "5", "80", TORCHRUN, f"--nnodes={nnodes}", f"--nproc-per-node={npn}",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=toyjob",
               f"--max-restarts={spec.get('max_restarts', 0)}", "--monitor-interval=1"]
        if nnodes > 1:
            cmd.append(f"--rdzv-conf=is_host={'true' if a == 0 else 'false'},join_timeout=60")
        if layout == "tee" or spec.get("tee"):
            cmd += ["--tee", "3"]
        if layout == "log-dir":
            ld = os.path.join(run_dir, "logs" if nnodes == 1 else f"logs_{node}")
            cmd += ["--log-dir", ld, "--redirects", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", spec["filter"]]
        if layout == "per-rank":
            env["PER_RANK_LOG"] = run_dir
        cmd.append(os.path.join(job, "train.py"))
        p = subprocess.Popen(cmd, cwd=job, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        th = threading.Thread(target=reader, args=(p, a, sink), daemon=True)
        th.start()
        procs.append(p)
        threads.append(th)
        if a == 0 and nnodes > 1:
            time.sleep(1.0)
    codes = [p.wait() for p in procs]
    for th in threads:
        th.join(timeout=5)
    lines = sorted(sink, key=lambda r: r[0])

    files = []

    def write(name, rows):
        with open(os.path.join(run_dir, name), "w") as fh:
            for r in rows:
                fh.write(r + "\n")
        files.append(name)

    per_agent = lambda a: [l for (_, i, l) in lines if i == a]  # noqa: E731
    if layout in ("console", "tee", "local-ranks-filter", "log-dir"):
        if nnodes == 1:
            write("console.log", per_agent(0))
        else:
            for a in range(nnodes):
                write(f"node{a}.log", per_agent(a))
    elif layout == "per-rank":
        if nnodes == 1:
            write("launcher.log", per_agent(0))
        else:
            for a in range(nnodes):
                write(f"launcher_node{a}.log", per_agent(a))
    elif layout == "srun":
        write("slurm-48213.out", [f"{i}: {l}" for (_, i, l) in lines])
    elif layout == "kubectl":
        write("pods.log", [f"[pod/toyjob-worker-{i}/pytorch] {l}" for (_, i, l) in lines])
    elif layout == "jsonl":
        write("logs.jsonl", [json.dumps({"ts": now_iso(t), "host": f"node{i}", "msg": l})
                             for (t, i, l) in lines])
    if layout == "log-dir":
        files += ["logs"] if nnodes == 1 else [f"logs_node{a}" for a in range(nnodes)]
    if layout == "per-rank":
        files += sorted(f for f in os.listdir(run_dir) if f.startswith("rank"))

    # labels by construction
    recs = []
    for f in glob.glob(os.path.join(side_dir, "*.json")):
        with open(f) as fh:
            recs.append(json.load(fh))
    fired = sorted([r for r in recs if r["fired"]], key=lambda r: (r["attempt"], r["t"]))
    seen = sorted({(r["rank"], r["attempt"]) for r in recs})
    shutil.rmtree(side_dir)
    res = dict(id=rid, files=files, layout=layout, ranks=sum(nproc), agents=nnodes,
               scenario=spec["scenario"], codes=codes, cause=spec["cause"],
               fired=[{k: r[k] for k in ("rank", "local_rank", "node", "attempt", "kind", "t")}
                      for r in fired], seen=seen)
    if fired:
        c = fired[0]
        res["culprit"] = dict(rank=c["rank"], host=c["node"] if nnodes > 1 else None,
                              attempt=c["attempt"])
        desc = "; ".join(f"attempt {r['attempt']}: fault '{r['kind']}' fired on global rank "
                         f"{r['rank']} (local rank {r['local_rank']}, {r['node']})" for r in fired)
    else:
        res["culprit"] = dict(rank=None, host=None, attempt=None)
        desc = "no fault fired"
    res["note"] = f"agent exit codes {codes}; {desc}"
    os.makedirs(os.path.join(WORK, "results"), exist_ok=True)
    with open(os.path.join(WORK, "results", rid + ".json"), "w") as fh:
        json.dump(res, fh, indent=1)
    return res


def q(s):
    return json.dumps(s)


def write_manifest(out_root):
    out = []
    for spec in RUNS:
        p = os.path.join(WORK, "results", spec["id"] + ".json")
        if not os.path.exists(p):
            continue
        with open(p) as fh:
            r = json.load(fh)
        c = r["culprit"]
        yn = lambda v: "null" if v is None else str(v)  # noqa: E731
        out += [f"- id: {r['id']}",
                f"  files: [{', '.join(q(f) for f in r['files'])}]",
                f"  layout: {r['layout']}",
                f"  ranks: {r['ranks']}",
                f"  agents: {r['agents']}",
                f"  scenario: {r['scenario']}",
                f"  culprit: {{rank: {yn(c['rank'])}, host: {yn(c['host'])}, "
                f"attempt: {yn(c['attempt'])}}}",
                f"  cause: {q(r['cause'])}",
                f"  note: {q(r['note'] + spec.get('note_extra', ''))}"]
    with open(os.path.join(out_root, "manifest.yaml"), "w") as fh:
        fh.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--manifest-only", action="store_true")
    a = ap.parse_args()
    out_root = os.path.abspath(a.out)
    only = set(filter(None, a.only.split(",")))
    if not a.manifest_only:
        for i, spec in enumerate(RUNS):
            if only and spec["id"] not in only:
                continue
            t = time.time()
            r = run_one(spec, out_root, i)
            print(f"{r['id']} {r['scenario']:26s} {r['layout']:18s} codes={r['codes']} "
                  f"culprit={r['culprit']} {time.time() - t:.0f}s", flush=True)
    write_manifest(out_root)


if __name__ == "__main__":
    main()
