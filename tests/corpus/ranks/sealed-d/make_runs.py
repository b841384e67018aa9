"""Generate sealed multi-rank failure runs (batch D). Labels come from side files
written by train.py outside the run folder; they are deleted afterwards.

    python make_runs.py --out DIR [--only ID]
"""
import argparse, datetime, glob, json, os, shutil, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/tmp/torchvenv/bin/python"; TORCHRUN = "/tmp/torchvenv/bin/torchrun"
SIDE_ROOT = "/tmp/sealed_d_side"

# id, layout, agents, nproc per agent, scenario, culprit rank, extra
RUNS = [
    ("d01", "console", 1, 2, "valueerror", 1, {}),
    ("d02", "tee", 1, 4, "indexerror", 2, {}),
    ("d03", "log-dir", 1, 3, "torcherror", 2, {}),
    ("d04", "local-ranks-filter", 1, 4, "zerodiv", 3, {}),
    ("d05", "per-rank-files", 1, 4, "oserror", 1, {"console": True}),
    ("d06", "srun-prefix", 2, 2, "hang_sleep", 3, {}),
    ("d07", "kubectl-prefix", 2, 2, "hang_lock", 2, {}),
    ("d08", "json-lines", 2, 1, "hang_read", 1, {}),
    ("d09", "console", 1, 3, "exit0", 2, {}),
    ("d10", "tee", 1, 6, "sigkill", 4, {}),
    ("d11", "log-dir", 1, 5, "sigsegv", 4, {}),
    ("d12", "per-rank-files", 2, 2, "sigabrt", 3, {"console": False}),
    ("d13", "srun-prefix", 2, 2, "dataloader_killed", 2, {}),
    ("d14", "kubectl-prefix", 2, 3, "mismatch_shape", 5, {"detail": True}),
    ("d15", "json-lines", 2, 2, "mismatch_dtype", 2, {"detail": True}),
    ("d16", "console", 1, 4, "mismatch_op", 3, {"detail": True}),
    ("d17", "kubectl-prefix", 2, 1, "module_missing", None, {"node_idx": 1}),
    ("d18", "json-lines", 2, 1, "module_missing", None, {"node_idx": 0}),
    ("d19", "tee", 1, 4, "monitored_barrier", 2, {}),
    ("d20", "srun-prefix", 2, 2, "monitored_barrier", 3, {}),
    ("d21", "console", 1, 3, "sysexit", 1, {}),
    ("d22", "per-rank-files", 1, 8, "sysexit", 6, {"console": True}),
    ("d23", "tee", 1, 4, "valueerror", 1, {"restart": ("sigkill", 3)}),
    ("d24", "kubectl-prefix", 2, 2, "oserror", 2, {"restart": ("zerodiv", 0)}),
    ("d25", "json-lines", 2, 2, "valueerror", 0, {}),
    ("d26", "local-ranks-filter", 1, 2, "sigkill", 0, {}),
    ("d27", "console", 1, 2, "healthy", None, {"healthy": "warn"}),
    ("d28", "srun-prefix", 2, 2, "healthy", None, {"healthy": "tb"}),
    ("d29", "per-rank-files", 1, 4, "healthy", None, {"healthy": "warn", "console": False}),
    ("d30", "json-lines", 2, 1, "healthy", None, {"healthy": "tb"}),
]

CAUSE = {
    "valueerror": "Python ValueError raised on one rank", "indexerror": "Python IndexError on one rank",
    "torcherror": "torch RuntimeError (matmul shape mismatch) on one rank", "zerodiv": "ZeroDivisionError on one rank",
    "oserror": "FileNotFoundError (OSError) opening a data shard on one rank",
    "hang_sleep": "rank stuck in sleep; peers hit the gloo collective timeout",
    "hang_lock": "rank deadlocked on a threading.Lock; peers time out",
    "hang_read": "rank blocked reading a pipe; peers time out",
    "exit0": "rank exits 0 early, peers fail in the next collective",
    "sigkill": "rank killed by SIGKILL", "sigsegv": "rank segfaults (SIGSEGV, null read via ctypes)",
    "sigabrt": "rank aborts (SIGABRT via os.abort)",
    "dataloader_killed": "DataLoader worker killed by SIGKILL on one rank",
    "mismatch_shape": "collective shape mismatch on one rank (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
    "mismatch_dtype": "collective dtype mismatch on one rank (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
    "mismatch_op": "collective op mismatch (broadcast vs all_reduce) on one rank (DETAIL)",
    "module_missing": "ModuleNotFoundError: module missing on one node",
    "monitored_barrier": "monitored_barrier with one rank absent (stuck in sleep)",
    "sysexit": "sys.exit(3) after an error line on one rank", "healthy": "healthy run",
}


def node_name(layout, i, rid):
    if layout == "kubectl-prefix":
        return f"job-{rid}-worker-{i}"
    if layout == "json-lines":
        return f"gpu-node-{i + 1:02d}"
    return f"node{i}"


def pump(stream, write, tag):
    for raw in iter(stream.readline, b""):
        write(tag, raw.decode("utf-8", "replace"))
    stream.close()


def run_one(idx, spec, out):
    rid, layout, agents, nproc, scen, culprit, extra = spec
    port = 61000 + 10 * idx
    rdir = os.path.join(out, rid); shutil.rmtree(rdir, ignore_errors=True); os.makedirs(rdir)
    side = os.path.join(SIDE_ROOT, rid); shutil.rmtree(side, ignore_errors=True); os.makedirs(side)
    restart = extra.get("restart")
    lock = threading.Lock(); files = []
    procs = []; threads = []
    agg_path = {"srun-prefix": "job.out", "kubectl-prefix": "pods.log", "json-lines": "job.jsonl"}.get(layout)
    agg = open(os.path.join(rdir, agg_path), "w") if agg_path else None
    if agg_path:
        files.append(agg_path)

    def w_agg(tag, line):
        i, stream = tag
        with lock:
            if layout == "srun-prefix":
                agg.write(f"{i}: {line}")
            elif layout == "kubectl-prefix":
                agg.write(f"[pod/job-{rid}-worker-{i}/pytorch] {line}")
            else:
                agg.write(json.dumps({"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
                                      "host": node_name(layout, i, rid), "stream": stream,
                                      "log": line.rstrip("\n")}) + "\n")
            agg.flush()

    for i in range(agents):
        env = dict(os.environ, PYTHONUNBUFFERED="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
                   GLOO_SOCKET_IFNAME="lo", SIDE_DIR=side, SCEN=scen,
                   CULPRIT=str(-1 if culprit is None else culprit), FAULT_STEP="3",
                   NODE_NAME=node_name(layout, i, rid), OMP_NUM_THREADS="1")
        if extra.get("detail"):
            env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        if "node_idx" in extra:
            env["SCEN_NODE"] = node_name(layout, extra["node_idx"], rid)
        if restart:
            env["RESTART_SCEN"], env["RESTART_CULPRIT"] = restart[0], str(restart[1])
        if extra.get("healthy"):
            env["HEALTHY_EXTRA"] = extra["healthy"]
        cmd = ["timeout", "80", TORCHRUN, "--nnodes", str(agents), "--nproc-per-node", str(nproc),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"sealed-{rid}",
               "--local-addr", "127.0.0.1", "--max-restarts", "1" if restart else "0", "--monitor-interval", "0.5"]
        if layout in ("tee",):
            cmd += ["--tee", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", "0"]
        if layout == "log-dir":
            cmd += ["--log-dir", os.path.join(rdir, "logs"), "--redirects", "3"]
        if layout == "per-rank-files":
            env["RANK_LOG_DIR"] = rdir
        cmd += [os.path.join(HERE, "train.py")]
        if agg:
            p = subprocess.Popen(cmd, env=env, cwd=rdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for s, nm in ((p.stdout, "stdout"), (p.stderr, "stderr")):
                t = threading.Thread(target=pump, args=(s, w_agg, (i, nm))); t.start(); threads.append(t)
        else:
            if layout == "per-rank-files" and not extra.get("console"):
                cpath = os.path.join(side, f"agent{i}.console")
            else:
                cname = "console.log" if agents == 1 else f"agent{i}_console.log"
                cpath = os.path.join(rdir, cname); files.append(cname)
            fh = open(cpath, "w")
            p = subprocess.Popen(cmd, env=env, cwd=rdir, stdout=fh, stderr=subprocess.STDOUT)
        procs.append(p)
        time.sleep(0.3)
    rcs = [p.wait() for p in procs]
    for t in threads:
        t.join()
    if agg:
        agg.close()
    if layout == "log-dir":
        files.append("logs")
    if layout == "per-rank-files":
        files += sorted(os.path.basename(f) for f in glob.glob(os.path.join(rdir, "rank_*.log")))
    # labels from side files
    recs = [json.load(open(f)) for f in glob.glob(os.path.join(side, "r*_a*.json"))]
    fired = sorted((r for r in recs if r["fired"]), key=lambda r: (r["attempt"], r["rank"]))
    ranks = nproc * agents
    names_nodes = layout in ("kubectl-prefix", "json-lines")
    if fired:
        c = fired[0]
        lab = {"rank": c["rank"], "host": c["node"] if names_nodes else None, "attempt": c["attempt"]}
    else:
        c = None; lab = {"rank": None, "host": None, "attempt": 0}
    note = f"agent exit codes {rcs}"
    if c:
        note += f"; fault fired on global rank {c['rank']} (local rank {c['local_rank']}, {c['node']})"
        if layout == "srun-prefix":
            note += f", srun prefix {c['node'][-1]}"
    if restart:
        f1 = [r for r in fired if r["attempt"] == 1]
        note += f"; attempt 1 failed differently: {restart[0]} on rank {f1[0]['rank'] if f1 else '?'} (fired={bool(f1)})"
    if extra.get("healthy"):
        note += "; healthy with " + ("warnings" if extra["healthy"] == "warn" else "a handled traceback")
    if layout == "local-ranks-filter":
        note += "; only local rank 0 output is shown on the console"
    if scen == "module_missing":
        note += "; one process per node so the node's only rank is the culprit"
    expected = culprit if scen != "module_missing" else None
    if scen != "healthy" and (not c or (expected is not None and c["rank"] != expected)):
        note += f"; WARNING planned culprit {expected}"
    shutil.rmtree(side, ignore_errors=True)
    return {"id": rid, "files": files, "layout": layout, "ranks": ranks, "agents": agents,
            "scenario": scen + (f"+restart({restart[0]})" if restart else ""), "culprit": lab,
            "cause": CAUSE[scen] + (" on attempt 0; attempt 1 failed differently" if restart else ""),
            "note": note}


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--out", required=True); ap.add_argument("--only")
    a = ap.parse_args(); shutil.rmtree(SIDE_ROOT, ignore_errors=True); out = os.path.abspath(a.out); os.makedirs(out, exist_ok=True)
    todo = [(i, s) for i, s in enumerate(RUNS) if not a.only or s[0] == a.only]
    # two-agent runs use 2 torchrun processes; keep at most 2 runs at once
    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(lambda t: run_one(t[0], t[1], out), todo))
    mpath = os.path.join(out, "manifest.yaml")
    old = {}
    if a.only and os.path.exists(mpath):
        for blk in open(mpath).read().split("- id: ")[1:]:
            old[blk.split("\n", 1)[0].strip()] = "- id: " + blk
    for r in res:
        old[r["id"]] = fmt(r)
        print(r["id"], r["culprit"], r["note"], flush=True)
    with open(mpath, "w") as fh:
        for k in sorted(old):
            fh.write(old[k])


def fmt(r):
    return (f"- id: {r['id']}\n  files: {json.dumps(r['files'])}\n  layout: {r['layout']}\n"
                     f"  ranks: {r['ranks']}\n  agents: {r['agents']}\n  scenario: {r['scenario']}\n"
                     f"  culprit: {{rank: {json.dumps(r['culprit']['rank'])}, host: {json.dumps(r['culprit']['host'])}, attempt: {r['culprit']['attempt']}}}\n"
                     f"  cause: {json.dumps(r['cause'])}\n  note: {json.dumps(r['note'])}\n")


if __name__ == "__main__":
    main()
