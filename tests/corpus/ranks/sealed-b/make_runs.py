"""Generate the sealed multi-rank corpus (batch B).

python make_runs.py --out DIR [--only RUN_ID] [--jobs 2]
Labels come from each scenario's parameters plus side files the training
script writes (global rank, local rank, node, attempt, whether its fault fired).
"""
import argparse, datetime, json, os, random, shutil, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
PY = os.environ.get("TORCH_PY", "/tmp/torchvenv/bin/python")
TORCHRUN = os.environ.get("TORCHRUN", "/tmp/torchvenv/bin/torchrun")
SIDE_ROOT = "/tmp/sealedb_side"
EXT_DIR = "/tmp/sealedb_ext"
LAYOUTS = ["console", "tee", "log-dir", "local-ranks-filter", "per-rank-files",
           "srun-prefix", "kubectl-prefix", "json-lines"]

SUBS = {
    "exception": ["shape", "key", "index", "zerodiv", "open"],
    "hang-stuck-rank": ["lock", "read", "loop", "lock", "read"],
    "collective-mismatch": ["shape", "dtype", "op"],
    "exit-code": ["3", "2", "17"],
}
COUNTS = [("exception", 5), ("hang-stuck-rank", 5), ("early-exit", 3), ("sigkill", 3),
          ("sigsegv", 3), ("sigabrt", 3), ("dataloader-worker-killed", 3),
          ("collective-mismatch", 3), ("missing-module", 3), ("monitored-barrier", 3),
          ("exit-code", 3), ("restart", 4), ("healthy", 5)]
RESTART_PAIRS = [("exception", "sigkill"), ("sigsegv", "exception"),
                 ("exit-code", "sigabrt"), ("sigkill", "exit-code")]


def scenarios():
    rng = random.Random(20261204)
    out, li, n = [], 0, 0
    order = LAYOUTS[:]
    rng.shuffle(order)
    for kind, cnt in COUNTS:
        for j in range(cnt):
            n += 1
            layout = order[li % len(order)]
            li += 1
            agents = 2 if kind == "missing-module" else rng.choice([1, 1, 2])
            if layout in ("srun-prefix", "kubectl-prefix", "json-lines") and rng.random() < 0.7:
                agents = 2
            per = rng.choice([1, 2, 3, 4]) if agents == 2 else rng.choice([2, 3, 4, 4, 5, 6, 8])
            if agents == 2 and per == 1 and kind == "monitored-barrier":
                per = 2
            world = per * agents
            s = dict(id=f"b{n:02d}-{kind}-{layout}", kind=kind, layout=layout, agents=agents,
                     nproc=per, world=world, step=rng.randint(1, 3), sub="", culprit=None,
                     a1_kind="", a1_culprit=None, warn="", record=rng.random() < 0.4,
                     pg_timeout=rng.choice([8, 10, 12]))
            if kind in SUBS:
                s["sub"] = SUBS[kind][j % len(SUBS[kind])]
            if kind == "monitored-barrier":
                s["culprit"] = rng.randrange(1, world)
            elif kind == "missing-module":
                s["missing_node"] = rng.randrange(2)
            elif kind == "restart":
                k0, k1 = RESTART_PAIRS[j]
                s["kind"], s["a1_kind"] = k0, k1
                if k0 == "exception":
                    s["sub"] = "key"
                if k0 == "exit-code":
                    s["sub"] = "4"
                s["culprit"] = rng.randrange(world)
                s["a1_culprit"] = rng.choice([r for r in range(world) if r != s["culprit"]])
                s["scenario"] = f"restart: attempt0 {k0}, attempt1 {k1}"
            elif kind == "healthy":
                s["warn"] = ["", "warn", "handled", "warn", "handled"][j]
            else:
                s["culprit"] = rng.randrange(world)
            s.setdefault("scenario", kind + (f" ({s['sub']})" if s["sub"] else ""))
            s["cause"] = s["kind"] if kind != "healthy" else "healthy"
            if kind == "healthy":
                s["kind"] = "healthy"
            out.append(s)
    return out


def node_names(s):
    job = s["id"].split("-")[0] + "-train"
    s["job"] = job
    if s["layout"] == "srun-prefix":
        return [str(i) for i in range(s["agents"])]
    if s["layout"] == "kubectl-prefix":
        return [f"{job}-worker-{i}" for i in range(s["agents"])]
    if s["layout"] == "json-lines":
        return [f"ip-10-0-{12 + i}-{40 + 7 * i}" for i in range(s["agents"])]
    return [f"node{i}" for i in range(s["agents"])]


def run_one(s, outdir, port):
    rd = os.path.join(outdir, s["id"])
    shutil.rmtree(rd, ignore_errors=True)
    os.makedirs(rd)
    side = os.path.join(SIDE_ROOT, s["id"])
    shutil.rmtree(side, ignore_errors=True)
    names = node_names(s)
    lay = s["layout"]
    args = ["--kind", s["kind"], "--step", str(s["step"]), "--pg-timeout", str(s["pg_timeout"])]
    if s["sub"]:
        args += ["--sub", s["sub"]]
    if s["culprit"] is not None:
        args += ["--culprit", str(s["culprit"])]
    if s["a1_kind"]:
        args += ["--a1-kind", s["a1_kind"], "--a1-culprit", str(s["a1_culprit"])]
    if s["kind"] == "dataloader-worker-killed":
        args += ["--workers", "2"]
    if s["kind"] == "missing-module" or s["cause"] == "missing-module":
        args += ["--need-ext"]
    if s["warn"]:
        args += ["--warn", s["warn"]]
    procs, events, lock = [], [], threading.Lock()
    sep = lay == "json-lines"
    for i in range(s["agents"]):
        cmd = ["timeout", "90", TORCHRUN, "--nnodes", str(s["agents"]), "--nproc-per-node", str(s["nproc"])]
        if s["agents"] == 1 and not s["a1_kind"]:
            cmd += ["--master-addr", "127.0.0.1", "--master-port", str(port)]
        else:
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", s["id"],
                    "--local-addr", "127.0.0.1"]
        if s["a1_kind"]:
            cmd += ["--max-restarts", "1"]
        if lay == "tee":
            cmd += ["--tee", "3"]
        elif lay == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", "0"]
        elif lay == "log-dir":
            ld = os.path.join(rd, "logs" if s["agents"] == 1 else f"logs_{names[i]}")
            cmd += ["--redirects", "3", "--log-dir", ld]
        cmd += [TRAIN] + args
        env = dict(os.environ, PYTHONUNBUFFERED="1", NODE_NAME=names[i], SIDE_DIR=side,
                   GLOO_SOCKET_IFNAME="lo", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1", OMP_NUM_THREADS="1")
        env.pop("TORCH_DISTRIBUTED_DEBUG", None)
        if s["record"]:
            env["USE_RECORD"] = "1"
        if lay == "per-rank-files":
            env["RANK_LOG_DIR"] = rd
        if s.get("missing_node") is not None and i != s["missing_node"]:
            env["PYTHONPATH"] = EXT_DIR
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE if sep else subprocess.STDOUT,
                             env=env, cwd="/tmp")
        procs.append(p)

        def reader(f, idx, stream):
            for raw in iter(f.readline, b""):
                with lock:
                    events.append((datetime.datetime.now(datetime.timezone.utc), idx, stream,
                                   raw.decode("utf-8", "replace").rstrip("\n")))
        ts = [threading.Thread(target=reader, args=(p.stdout, i, "stdout"), daemon=True)]
        if sep:
            ts.append(threading.Thread(target=reader, args=(p.stderr, i, "stderr"), daemon=True))
        for t in ts:
            t.start()
        p._readers = ts
        if i == 0 and s["agents"] == 2:
            time.sleep(0.5)
    rcs = [p.wait() for p in procs]
    for p in procs:
        for t in p._readers:
            t.join(5)
    # render
    files = []
    if lay in ("srun-prefix", "kubectl-prefix", "json-lines"):
        fn = {"srun-prefix": "job.out", "kubectl-prefix": "kubectl-logs.txt", "json-lines": "logs.jsonl"}[lay]
        with open(os.path.join(rd, fn), "w") as f:
            for t, i, st, line in events:
                if lay == "srun-prefix":
                    f.write(f"{i}: {line}\n")
                elif lay == "kubectl-prefix":
                    f.write(f"[pod/{s['job']}-worker-{i}/pytorch] {line}\n")
                else:
                    f.write(json.dumps({"time": t.isoformat().replace("+00:00", "Z"), "host": names[i],
                                        "stream": st, "log": line}) + "\n")
        files.append(fn)
    else:
        for i in range(s["agents"]):
            fn = "console.log" if s["agents"] == 1 else f"{names[i]}.console.log"
            with open(os.path.join(rd, fn), "w") as f:
                for t, j, st, line in events:
                    if j == i:
                        f.write(line + "\n")
            files.append(fn)
        if lay == "log-dir":
            files += sorted(d + "/" for d in os.listdir(rd) if d.startswith("logs"))
        if lay == "per-rank-files":
            files += sorted((x for x in os.listdir(rd) if x.startswith("rank_")),
                            key=lambda x: int(x[5:-4]))
    # labels from side files
    recs = []
    if os.path.isdir(side):
        for fn in os.listdir(side):
            if fn.endswith(".json") and fn.startswith("a"):
                with open(os.path.join(side, fn)) as f:
                    recs.append(json.load(f))
    fired = sorted((r for r in recs if r["attempt"] == 0 and r["fired"]), key=lambda r: (r["t"], r["rank"]))
    names_layout = lay in ("srun-prefix", "kubectl-prefix", "json-lines") or s["agents"] == 2
    culprit = {"rank": None, "host": None, "attempt": 0}
    problems = []
    if s["cause"] == "healthy":
        if fired:
            problems.append("healthy run has fired fault")
    else:
        if not fired:
            problems.append("fault did not fire")
        else:
            c = fired[0]
            culprit = {"rank": c["rank"], "host": c["node"] if names_layout else None, "attempt": 0}
            if s["culprit"] is not None and c["rank"] != s["culprit"]:
                problems.append(f"fired rank {c['rank']} != planned {s['culprit']}")
    a1 = sorted({r["rank"] for r in recs if r["attempt"] == 1 and r["fired"]})
    shutil.rmtree(side, ignore_errors=True)
    note = f"rcs={rcs}"
    if s["cause"] == "missing-module" and fired:
        fired.sort(key=lambda r: r["rank"])
        culprit["rank"] = fired[0]["rank"]
        culprit["host"] = fired[0]["node"]
        note += f"; module missing on node {fired[0]['node']}, ranks that reached the import before the agent stopped them: {[r['rank'] for r in fired]}; culprit = lowest of those"
    if s["a1_kind"]:
        note += f"; attempt 1 fault {s['a1_kind']} fired on ranks {a1}"
    if s["kind"] == "healthy" and s["warn"]:
        note += f"; prints {'a warning' if s['warn']=='warn' else 'a handled traceback'} then finishes"
    if s["cause"] == "healthy" and any(rcs):
        problems.append("healthy run exited nonzero")
    if s["layout"] == "local-ranks-filter":
        note += "; only local rank 0 of each agent is teed"
    entry = {"id": s["id"], "files": files, "layout": lay, "ranks": s["world"], "agents": s["agents"],
             "scenario": s["scenario"], "culprit": culprit, "cause": s["cause"], "note": note}
    return entry, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(EXT_DIR, exist_ok=True)
    with open(os.path.join(EXT_DIR, "fused_shard_ext.py"), "w") as f:
        f.write("VERSION = '0.3.1'\n")
    sc = scenarios()
    if a.only:
        sc = [s for s in sc if s["id"] in a.only.split(",")]
    res = {}

    def go(k):
        s = sc[k]
        t0 = time.time()
        e, pr = run_one(s, a.out, 51000 + 10 * (k % 2) + 20 * k)
        print(f"{s['id']}: {time.time()-t0:.0f}s culprit={e['culprit']} {pr}", flush=True)
        res[s["id"]] = (e, pr)

    with ThreadPoolExecutor(a.jobs) as ex:
        list(ex.map(go, range(len(sc))))
    mpath = os.path.join(a.out, "manifest.yaml")
    blocks = {}
    if a.only and os.path.exists(mpath):
        txt = open(mpath).read()
        for b in txt.split("\n- id: "):
            b = b[len("- id: "):] if b.startswith("- id: ") else b
            rid = b.split("\n", 1)[0].strip()
            if rid and rid not in res:
                blocks[rid] = "- id: " + b.rstrip("\n") + "\n"
    for s in sc:
        e = res[s["id"]][0]
        c = e["culprit"]
        t = f"- id: {e['id']}\n  files:\n" + "".join(f"    - {json.dumps(x)}\n" for x in e["files"])
        t += f"  layout: {e['layout']}\n  ranks: {e['ranks']}\n  agents: {e['agents']}\n"
        t += f"  scenario: {json.dumps(e['scenario'])}\n  culprit:\n"
        t += f"    rank: {'null' if c['rank'] is None else c['rank']}\n"
        t += f"    host: {'null' if c['host'] is None else json.dumps(c['host'])}\n"
        t += f"    attempt: {c['attempt']}\n  cause: {e['cause']}\n  note: {json.dumps(e['note'])}\n"
        blocks[e["id"]] = t
    with open(mpath, "w") as f:
        for k in sorted(blocks):
            f.write(blocks[k])
    with open("/tmp/sealedb_problems.json", "w") as f:
        json.dump({k: v[1] for k, v in res.items() if v[1]}, f, indent=1)
    shutil.rmtree(SIDE_ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
