#!/usr/bin/env python3
"""Make batch F of the sealed multi-rank corpus.

  python3 make_runs.py --out DIR [--only f03,f07] [--jobs 2]

Each run is a real torchrun job (gloo, CPU, 127.0.0.1) of train.py with at
most one injected behaviour per rank per attempt (env TRAIN_OPTS).  Agent
output is captured line by line as it arrives and then written in the run's
layout.  Labels come only from the per-rank state files train.py writes into
a temp dir outside the run folder (deleted afterwards); logs are never read.
"""
import argparse
import datetime
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = "/tmp/torchvenv/bin"
TORCHRUN = os.path.join(VENV, "torchrun")
BASE_PORT = 63000
AGENT_TIMEOUT = 90
PG_TIMEOUT = 10


def R(id, layout, ranks, agents, scenario, cause, faults=(), opts=None, **kw):
    d = dict(id=id, layout=layout, ranks=ranks, agents=agents, scenario=scenario,
             cause=cause, faults=list(faults), opts=dict(opts or {}))
    d.update(kw)
    return d


RUNS = [
    # ---- Python / torch exceptions on one rank
    R("f01", "console", 4, 1, "exception-valueerror",
      "rank 0 raises ValueError (invalid label) at step 3",
      [dict(rank=0, kind="valueerror", step=3)], dict(ddp=True)),
    R("f02", "tee", 4, 1, "exception-torch-shape",
      "last rank 3 hits a torch matmul shape RuntimeError at step 5",
      [dict(rank=3, kind="shape", step=5)]),
    R("f03", "log-dir", 3, 1, "exception-keyerror",
      "rank 1 raises KeyError from a config lookup at step 2",
      [dict(rank=1, kind="keyerror", step=2)]),
    R("f04", "per-rank", 4, 1, "exception-cpu-oom",
      "rank 2 fails a huge CPU allocation (DefaultCPUAllocator RuntimeError) at step 6",
      [dict(rank=2, kind="cpu_oom", step=6)]),
    R("f05", "jsonl", 4, 2, "exception-in-dataloader-worker",
      "DataLoader worker 0 of local rank 0 on node1 raises ValueError while decoding a sample",
      [dict(node="node1", local=0, kind="dl_exception", step=10)], dict(workers=2),
      hosts=["trn-a100-07", "trn-a100-08"]),
    R("f06", "srun", 4, 2, "exception-after-allreduce-one-node",
      "local rank 1 on node1 raises FloatingPointError right after a successful gradient all_reduce at step 4",
      [dict(node="node1", local=1, kind="nan_after", step=4)]),
    R("f07", "kubectl", 4, 2, "exception-filenotfound-checkpoint",
      "rank 3 raises FileNotFoundError from torch.load of a missing shard at step 0",
      [dict(rank=3, kind="fnf", step=0)]),
    R("f08", "shipper", 8, 1, "exception-assertion",
      "rank 0 fails an assert (grad-norm guard) at step 7 in an 8-rank job",
      [dict(rank=0, kind="assert", step=7)], dict(ddp=True), shipper="iso", hosts=["gpu-host-3"]),
    R("f09", "local-ranks-filter", 4, 1, "exception-typeerror-filtered-rank",
      "rank 1 raises TypeError from torch.cat at step 3 while the console only shows local rank 0",
      [dict(rank=1, kind="typeerror", step=3)], filt="0"),
    R("f10", "console", 6, 2, "exception-modulenotfound",
      "last rank 5 raises ModuleNotFoundError from a lazy import at step 8",
      [dict(rank=5, kind="modnotfound", step=8)]),
    R("f11", "tee", 4, 2, "exception-recursionerror",
      "rank 2 raises RecursionError flattening a self-referencing config at step 1",
      [dict(rank=2, kind="recursion", step=1)]),
    R("f12", "shipper", 2, 1, "exception-tensor-indexerror",
      "rank 1 raises a tensor IndexError (index out of bounds) at step 5",
      [dict(rank=1, kind="indexerror", step=5)], shipper="syslog", hosts=["worker17"]),
    R("f13", "kubectl", 5, 1, "exception-linalg-error",
      "rank 4 (last) raises torch linalg error from cholesky of a non-PD matrix at step 4",
      [dict(rank=4, kind="cholesky", step=4)]),
    # ---- one rank stuck, others time out
    R("f14", "console", 4, 1, "hang-sleep",
      "rank 1 sleeps indefinitely at step 4; peers time out in all_reduce",
      [dict(rank=1, kind="sleep", step=4)], dict(ddp=True)),
    R("f15", "log-dir", 4, 1, "hang-deadlock",
      "rank 0 deadlocks on a non-reentrant threading.Lock at step 3",
      [dict(rank=0, kind="deadlock", step=3)]),
    R("f16", "kubectl", 4, 2, "hang-blocking-read",
      "rank 3 blocks forever reading an empty pipe at step 2",
      [dict(rank=3, kind="pipe_read", step=2)]),
    R("f17", "jsonl", 4, 2, "hang-busy-loop",
      "rank 2 spins in a pure-Python busy loop at step 5",
      [dict(rank=2, kind="busy", step=5)], hosts=["ip-10-1-0-11", "ip-10-1-0-12"]),
    R("f18", "shipper", 4, 1, "hang-long-eval",
      "rank 0 runs an endless eval at step 5 while peers wait in the post-eval barrier",
      [dict(rank=0, kind="long_eval", step=5)], dict(eval_step=5), shipper="iso-bracket", hosts=["dgx-b2"]),
    R("f19", "srun", 4, 2, "hang-checkpoint-then-barrier",
      "local rank 1 on node1 never finishes its checkpoint write at step 3; peers wait in the barrier after the save",
      [dict(node="node1", local=1, kind="ckpt_hang", step=3)], dict(ckpt_step=3)),
    # ---- signals / early exits
    R("f20", "console", 4, 1, "signal-sigkill",
      "rank 2 is killed with SIGKILL at step 6",
      [dict(rank=2, kind="sigkill", step=6)], dict(ddp=True)),
    R("f21", "per-rank", 3, 1, "signal-sigsegv",
      "rank 0 segfaults (NULL read via ctypes) at step 2",
      [dict(rank=0, kind="sigsegv", step=2)]),
    R("f22", "jsonl", 8, 2, "signal-sigabrt",
      "last rank 7 calls abort() (SIGABRT) at step 4",
      [dict(rank=7, kind="sigabrt", step=4)], hosts=["node-a", "node-b"]),
    R("f23", "tee", 3, 1, "dataloader-worker-killed",
      "a DataLoader worker of rank 1 is SIGKILLed while loading",
      [dict(rank=1, kind="dl_sigkill", step=12)], dict(workers=2)),
    R("f24", "shipper", 4, 1, "early-exit-code0",
      "last rank 3 calls sys.exit(0) at step 5 without a traceback",
      [dict(rank=3, kind="exit0", step=5)], shipper="syslog", hosts=["hpc-cn042"]),
    R("f25", "local-ranks-filter", 4, 1, "early-exit-nonzero",
      "rank 1 exits with sys.exit(3) at step 3 without a traceback",
      [dict(rank=1, kind="exit_nz", step=3, code=3)], filt="0,1"),
    R("f26", "log-dir", 2, 1, "signal-sigbus",
      "rank 1 receives SIGBUS at step 4",
      [dict(rank=1, kind="sigbus", step=4)]),
    # ---- collective mismatches
    R("f27", "console", 4, 1, "mismatch-shape-detail",
      "rank 1 all_reduces a tensor with 3 extra elements at step 3 (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
      [dict(rank=1, kind="mm_shape", step=3)], debug="DETAIL"),
    R("f28", "tee", 4, 1, "mismatch-dtype",
      "last rank 3 all_reduces float64 instead of float32 at step 2",
      [dict(rank=3, kind="mm_dtype", step=2)]),
    R("f29", "kubectl", 4, 2, "mismatch-skipped-collective-detail",
      "rank 0 skips the gradient all_reduce at step 4 (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
      [dict(rank=0, kind="mm_skip", step=4)], debug="DETAIL"),
    R("f30", "jsonl", 6, 2, "mismatch-op-detail",
      "last rank 5 calls broadcast where peers call all_reduce at step 3 (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
      [dict(rank=5, kind="mm_op", step=3)], debug="DETAIL", hosts=["n1", "n2"]),
    # ---- restarts
    R("f31", "console", 4, 1, "restart-then-hang",
      "attempt 0: rank 1 raises a custom DataIntegrityError at step 3; attempt 1: rank 3 sleeps at step 2 and peers time out",
      [dict(rank=1, kind="custom", step=3, attempt=0), dict(rank=3, kind="sleep", step=2, attempt=1)],
      dict(prefix_store=True), restarts=1),
    R("f32", "log-dir", 3, 1, "restart-then-exception",
      "attempt 0: rank 0 SIGKILLed at step 4; attempt 1: rank 2 raises KeyError at step 1",
      [dict(rank=0, kind="sigkill", step=4, attempt=0), dict(rank=2, kind="keyerror", step=1, attempt=1)],
      dict(prefix_store=True), restarts=1),
    R("f36", "per-rank", 4, 1, "restart-default-store",
      "attempt 0: rank 2 hits a torch matmul shape RuntimeError at step 6; attempt 1: nothing injected "
      "(train.py uses the default env:// init, so the restarted attempt reuses the agent store as-is)",
      [dict(rank=2, kind="shape", step=6, attempt=0)], restarts=1),
    # ---- healthy
    R("f33", "per-rank", 4, 1, "healthy", "no fault injected", [], dict(ddp=True)),
    R("f34", "shipper", 4, 2, "healthy-warnings",
      "no fault injected; UserWarnings printed and DataLoader workers used", [],
      dict(warn=True, workers=2), shipper="syslog", hosts=["cn-101", "cn-102"]),
    R("f35", "srun", 4, 2, "healthy-caught-exception",
      "no fault injected; rank 0 prints a caught JSONDecodeError traceback and continues", [],
      dict(caught=True)),
]


def run_one(spec, out, idx_port):
    rid = spec["id"]
    tag = uuid.uuid4().hex[:8]
    work = f"/tmp/job_{tag}"
    state = f"/tmp/.ts_{uuid.uuid4().hex[:8]}"
    os.makedirs(work)
    os.makedirs(state)
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(work, "train.py"))
    dest = os.path.join(out, rid)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    agents, ranks, layout = spec["agents"], spec["ranks"], spec["layout"]
    nper = ranks // agents
    opts = dict(spec["opts"])
    opts["faults"] = spec["faults"]
    opts["pg_timeout"] = PG_TIMEOUT
    if layout == "per-rank":
        opts["rank_log_dir"] = os.path.join(work, "ranklogs")
        os.makedirs(opts["rank_log_dir"])
    port = idx_port
    rdzv_id = f"job{random.randint(10000, 99999)}"
    lines = []  # (t, agent, bytes)
    lock = threading.Lock()
    procs = []
    t0 = time.time()

    def reader(i, p):
        for raw in iter(p.stdout.readline, b""):
            with lock:
                lines.append((time.time(), i, raw))

    threads = []
    for i in range(agents):
        env = dict(os.environ)
        env.update(PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo", TRAIN_OPTS=json.dumps(opts),
                   TRAIN_STATE_DIR=state, NODE_NAME=f"node{i}")
        env.pop("TORCH_DISTRIBUTED_DEBUG", None)
        if spec.get("debug"):
            env["TORCH_DISTRIBUTED_DEBUG"] = spec["debug"]
        cmd = ["timeout", "-k", "5", str(AGENT_TIMEOUT), TORCHRUN,
               f"--nnodes={agents}", f"--nproc-per-node={nper}",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={rdzv_id}",
               f"--max-restarts={spec.get('restarts', 0)}"]
        if layout == "tee":
            cmd += ["--tee", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", f"--local-ranks-filter={spec['filt']}"]
        if layout == "log-dir":
            cmd += ["--log-dir", "logs", "--redirects", "3"]
        cmd += ["train.py"]
        p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, bufsize=0)
        procs.append(p)
        th = threading.Thread(target=reader, args=(i, p), daemon=True)
        th.start()
        threads.append(th)
        if i == 0 and agents > 1:
            time.sleep(1.0)
    rcs = [p.wait() for p in procs]
    for th in threads:
        th.join(timeout=10)
    elapsed = time.time() - t0
    files = write_layout(spec, dest, work, lines)
    label, note = derive_label(spec, state, rcs, t0)
    note += f"; agent exit codes {rcs}; wall {elapsed:.0f}s"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    item = dict(id=rid, files=files, layout=layout, ranks=ranks, agents=agents,
                scenario=spec["scenario"], culprit=label, cause=spec["cause"], note=note)
    print(f"{rid}: rc={rcs} culprit={label} files={len(files)} {elapsed:.0f}s", flush=True)
    return item


def host_names(spec):
    a = spec["agents"]
    lay = spec["layout"]
    if lay == "srun":
        return [str(i) for i in range(a)]
    if lay == "kubectl":
        return [f"{spec['_job']}-worker-{i}" for i in range(a)]
    if lay in ("jsonl", "shipper") and spec.get("hosts"):
        return list(spec["hosts"]) + [f"node{i}" for i in range(len(spec["hosts"]), a)]
    return [f"node{i}" for i in range(a)]


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_layout(spec, dest, work, lines):
    lay, agents = spec["layout"], spec["agents"]
    names = host_names(spec)
    txt = [(t, i, raw.decode("utf-8", "replace").rstrip("\r\n")) for t, i, raw in lines]
    files = []

    def wr(name, rows):
        path = os.path.join(dest, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            for r in rows:
                fh.write(r + "\n")
        files.append(name)

    def consoles():
        if agents == 1:
            wr("console.log", [s for _, _, s in txt])
        else:
            for i in range(agents):
                wr(f"node{i}.log", [s for _, a, s in txt if a == i])

    if lay in ("console", "tee", "local-ranks-filter"):
        consoles()
    elif lay == "log-dir":
        consoles()
        src = os.path.join(work, "logs")
        for p in sorted(glob.glob(os.path.join(src, "**", "*"), recursive=True)):
            if os.path.isfile(p):
                rel = os.path.join("logs", os.path.relpath(p, src))
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copy(p, os.path.join(dest, rel))
                files.append(rel)
    elif lay == "per-rank":
        consoles()
        for p in sorted(glob.glob(os.path.join(work, "ranklogs", "rank*.log")),
                        key=lambda s: int(os.path.basename(s)[4:-4])):
            shutil.copy(p, os.path.join(dest, os.path.basename(p)))
            files.append(os.path.basename(p))
    elif lay == "srun":
        wr(f"slurm-{spec['_jobid']}.out", [f"{names[a]}: {s}" for _, a, s in txt])
    elif lay == "kubectl":
        wr("pod-logs.txt", [f"[pod/{names[a]}/pytorch] {s}" for _, a, s in txt])
    elif lay == "jsonl":
        wr("logs.jsonl", [json.dumps({"ts": iso(t), "host": names[a], "msg": s}) for t, a, s in txt])
    elif lay == "shipper":
        style = spec.get("shipper", "iso")
        pids = [random.randint(2000, 60000) for _ in range(agents)]
        rows = []
        for t, a, s in txt:
            if style == "syslog":
                d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
                stamp = d.strftime("%b %d %H:%M:%S").replace(" 0", "  ", 1) if d.day < 10 else d.strftime("%b %d %H:%M:%S")
                rows.append(f"{stamp} {names[a]} torchrun[{pids[a]}]: {s}")
            elif style == "iso-bracket":
                rows.append(f"{iso(t)} [{names[a]}] {s}")
            else:
                rows.append(f"{iso(t)} {names[a]} {s}")
        wr("messages.log" if style == "syslog" else "job.log", rows)
    return files


def derive_label(spec, state, rcs, t0):
    recs = []
    for p in glob.glob(os.path.join(state, "*.json")):
        try:
            with open(p) as fh:
                recs.append(json.load(fh))
        except Exception:
            pass
    fired = sorted([r for r in recs if r["fired"]], key=lambda r: (r["attempt"], r["fired_at"]))
    started = sorted({(r["attempt"], r["rank"]) for r in recs})
    names = host_names(spec)
    planned = len(spec["faults"])
    if not fired:
        note = (f"side files: {len(started)} rank-starts over attempts "
                f"{sorted({a for a, _ in started})}, no injected behaviour fired")
        if planned:
            note += f" (WARNING: {planned} planned but none fired)"
        return dict(rank=None, host=None, attempt=None), note
    f = fired[0]
    host = None
    if spec["agents"] > 1:
        host = names[int(f["node"][4:])]
    parts = [f"{r['kind']}@rank{r['rank']}/{r['node']}/attempt{r['attempt']}/{r['where']}"
             f" +{r['fired_at'] - t0:.1f}s" for r in fired]
    # dedupe identical (worker processes of the same rank)
    seen, uniq = set(), []
    for p_ in parts:
        k = p_.split(" +")[0]
        if k not in seen:
            seen.add(k)
            uniq.append(p_)
    note = (f"side files: fired {', '.join(uniq)}; culprit = first fired at lowest attempt; "
            f"{len(started)} rank-starts")
    notfired = [fl for fl in spec["faults"]
                if not any(r["attempt"] == fl.get("attempt", 0) and r["kind"] == fl["kind"] for r in fired)]
    if notfired:
        note += f"; planned but not fired: {[(x['kind'], x.get('attempt', 0)) for x in notfired]}"
    return dict(rank=f["rank"], host=host, attempt=f["attempt"]), note


def yq(s):
    return json.dumps(s)


def item_yaml(it):
    c = it["culprit"]
    def v(x):
        return "null" if x is None else (yq(x) if isinstance(x, str) else str(x))
    return "\n".join([
        f"- id: {it['id']}",
        f"  files: [{', '.join(yq(f) for f in it['files'])}]",
        f"  layout: {it['layout']}",
        f"  ranks: {it['ranks']}",
        f"  agents: {it['agents']}",
        f"  scenario: {it['scenario']}",
        f"  culprit: {{rank: {v(c['rank'])}, host: {v(c['host'])}, attempt: {v(c['attempt'])}}}",
        f"  cause: {yq(it['cause'])}",
        f"  note: {yq(it['note'])}",
    ]) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    only = [s for s in a.only.split(",") if s]
    todo = [s for s in RUNS if not only or s["id"] in only]
    for s in RUNS:
        n = int(s["id"][1:])
        s["_port"] = BASE_PORT + 10 * n
        s["_job"] = f"trainjob-{uuid.uuid4().hex[:5]}"
        s["_jobid"] = str(random.randint(100000, 999999))
    # run the heaviest jobs alone-ish: sort so 8-rank jobs do not pair up
    results = {}
    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {s["id"]: ex.submit(run_one, s, out, s["_port"]) for s in todo}
        for k, f in futs.items():
            results[k] = f.result()
    # merge with an existing manifest (items not re-run are kept verbatim)
    mpath = os.path.join(out, "manifest.yaml")
    blocks = {}
    if only and os.path.exists(mpath):
        cur = None
        for line in open(mpath):
            if line.startswith("- id: "):
                cur = line.split()[2]
                blocks[cur] = ""
            if cur:
                blocks[cur] += line
    for k, it in results.items():
        blocks[k] = item_yaml(it)
    with open(mpath, "w") as fh:
        for s in RUNS:
            if s["id"] in blocks:
                fh.write(blocks[s["id"]])
    print("wrote", mpath)


if __name__ == "__main__":
    main()
