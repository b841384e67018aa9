#!/usr/bin/env python
"""Make batch H: real torchrun jobs (gloo, CPU, 127.0.0.1 only) with injected faults.

Usage: /tmp/torchvenv/bin/python make_runs.py --out DIR [--only h03,h07] [--jobs 2]
Labels come only from side files written by train.py (outside the run folder).
"""
import argparse, concurrent.futures as cf, datetime, glob, json, os, random, shutil
import subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = "/tmp/torchvenv/bin/torchrun"
BASE_PORT = 61000

# (id, layout, agents, nproc_per_agent, scenario, faults, cause, extra)
# fault: dict(rank, attempt, place, kind, step/index)
F = lambda rank, place, kind, step=0, attempt=0, **kw: dict(rank=rank, attempt=attempt, place=place, kind=kind, step=step, **kw)
RUNS = [
    ("h01", "mpirun", 2, 2, "exception-dataloader-worker-decode", [F(2, "data", "data_decode", index=45)],
     "rank 2's Dataset decodes a record with invalid UTF-8 bytes (sample 45) inside a DataLoader worker; the UnicodeDecodeError is re-raised in the main process", {"workers": 2}),
    ("h02", "pdsh", 2, 3, "hang-subgroup-barrier", [F(4, "subbarrier", "subbarrier", 3)],
     "rank 4 alone enters a barrier on the subgroup [3, 4, 5] at step 3; it and the other ranks (in the gradient all_reduce) hit the 10 s gloo timeout", {"subgroup": [3, 4, 5]}),
    ("h03", "console", 2, 2, "collective-skip", [F(1, "coll", "coll_skip", 4)],
     "rank 1 skips the all_reduce of the first weight gradient at step 4, so its collectives are shifted against the other ranks", {}),
    ("h04", "tee", 1, 4, "signal-sigterm", [F(2, "step", "sig_term", 5)],
     "rank 2 sends SIGTERM to itself at the start of step 5", {}),
    ("h05", "log-dir", 1, 3, "exception-checkpoint-missing", [F(1, "ckpt", "ckpt_missing", 4)],
     "rank 1's checkpoint file for step 4 is deleted between save and reload (torch.load FileNotFoundError)", {"ckpt_every": 2}),
    ("h06", "srun", 2, 4, "exception-memoryerror", [F(6, "step", "memerr", 2)],
     "rank 6 allocates a 1 PiB staging buffer (bytearray) at step 2 (MemoryError)", {}),
    ("h07", "kubectl", 1, 3, "hang-monitored-barrier", [F(1, "eval", "hang_eval", 3)],
     "rank 1 runs a long evaluation loop after step 3; the other ranks' dist.monitored_barrier (5 s, wait_all_ranks) reports rank 1 as missing", {"monitored": True}),
    ("h08", "jsonl", 2, 2, "store-key-never-set", [F(2, "store", "store_skip", 2)],
     "rank 2 never sets its shard_ready key in the c10d store at step 2; the other ranks' store.wait times out after 8 s naming that key", {"store_step": 2}),
    ("h09", "shipper", 1, 5, "exception-assert", [F(3, "forward", "assert", 6)],
     "rank 3 fails an assert on the micro-batch size before forward at step 6 (AssertionError)", {"shipper": "syslog"}),
    ("h10", "per-rank", 1, 4, "caught-then-real-failure", [F(2, "step", "recursion", 6)],
     "rank 0 logs a caught FileNotFoundError traceback at step 1 and carries on; later rank 2 fails for real at step 6 with RecursionError", {"noise": {"0": ["caught_early"]}}),
    ("h11", "mpirun", 1, 3, "restart-then-hang",
     [F(0, "forward", "fwd_index", 2, attempt=0), F(2, "step", "hang_sleep", 1, attempt=1)],
     "attempt 0: rank 0 uses class targets out of range at step 2 (cross_entropy IndexError); after the restart rank 2 sleeps at step 1 and the others time out", {"restarts": 1}),
    ("h12", "pdsh", 1, 2, "dataloader-worker-killed", [F(1, "data", "worker_kill", index=60)],
     "a DataLoader worker of rank 1 (last) SIGKILLs itself while loading sample 60", {"workers": 2}),
    ("h13", "local-ranks-filter", 1, 4, "exception-optimizer-lr-none", [F(2, "optim", "optim_lr", 3)],
     "rank 2 (hidden by the filter) sets the learning rate to None before optimizer.step at step 3 (TypeError in SGD)", {"filter": "0"}),
    ("h14", "tee", 2, 3, "exception-import-one-node",
     [F(3, "step", "import_node", 1), F(4, "step", "import_node", 1), F(5, "step", "import_node", 1)],
     "every rank of node1 (ranks 3-5) imports a fused optimizer extension not installed on that node at step 1 (ModuleNotFoundError, logged then re-raised); the culprit is the first of them to fire", {}),
    ("h15", "kubectl", 2, 2, "signal-sigsegv", [F(3, "backward", "sig_segv", 2)],
     "rank 3 (last) sends SIGSEGV to itself in place of backward at step 2", {}),
    ("h16", "jsonl", 1, 4, "hang-lock-held", [F(1, "step", "hang_lockheld", 5)],
     "rank 1 waits at step 5 for a lock held forever by its own background checkpoint-writer thread; the other ranks time out", {}),
    ("h17", "shipper", 2, 3, "early-exit-zero", [F(2, "step", "exit0", 4)],
     "rank 2 calls os._exit(0) at step 4 without a traceback; the others lose their peer", {"shipper": "iso"}),
    ("h18", "log-dir", 1, 4, "restart-then-worker-killed",
     [F(3, "backward", "bwd_nograd", 3, attempt=0), F(1, "data", "worker_kill", attempt=1, index=20)],
     "attempt 0: rank 3 calls backward on a detached loss at step 3 (RuntimeError: does not require grad); after the restart a DataLoader worker of rank 1 SIGKILLs itself at sample 20", {"restarts": 1, "workers": 1}),
    ("h19", "srun", 1, 3, "collective-allgather-size-mismatch", [F(1, "gather", "gather_size", 2)],
     "rank 1 all_gathers a 5-element stats tensor where the others use 3 elements at step 2 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"gather_stats": True, "detail": True}),
    ("h20", "mpirun", 2, 3, "exception-checkpoint-corrupt", [F(3, "ckpt", "ckpt_corrupt", 6)],
     "rank 3's checkpoint for step 6 is a zero-filled file when it reloads it (torch.load UnpicklingError)", {"ckpt_every": 3}),
    ("h21", "pdsh", 1, 4, "signal-sigabrt", [F(1, "optim", "sig_abrt", 4)],
     "rank 1 sends SIGABRT to itself before optimizer.step at step 4", {}),
    ("h22", "per-rank", 2, 2, "hang-long-eval", [F(0, "eval", "hang_eval", 5)],
     "rank 0 runs a long evaluation loop after step 5 while the other ranks wait in the next all_reduce and time out", {}),
    ("h23", "console", 1, 8, "exception-nan-loss", [F(5, "forward", "fwd_nan", 3)],
     "rank 5 gets a NaN in its input batch at step 3; its loss check raises FloatingPointError", {}),
    ("h24", "tee", 1, 2, "restart-then-memoryerror",
     [F(1, "metrics", "metrics_json", 4, attempt=0), F(0, "step", "memerr", 1, attempt=1)],
     "attempt 0: rank 1 json-dumps metrics containing a datetime at step 4 (TypeError); after the restart rank 0 allocates a 1 PiB buffer at step 1 (MemoryError)", {"restarts": 1}),
    ("h25", "kubectl", 1, 4, "dataloader-worker-segfault", [F(0, "data", "worker_segv", index=30)],
     "a DataLoader worker of rank 0 sends SIGSEGV to itself while loading sample 30", {"workers": 2}),
    ("h26", "jsonl", 1, 3, "exception-label-out-of-range", [F(2, "forward", "fwd_index", 5)],
     "rank 2 (last) passes class targets out of range to cross_entropy at step 5 (IndexError)", {"all_log": True}),
    ("h27", "shipper", 1, 4, "collective-shape-mismatch", [F(0, "coll", "coll_shape", 3)],
     "rank 0 all_reduces a gradient buffer with 5 extra elements at step 3 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"shipper": "syslog", "detail": True}),
    ("h28", "local-ranks-filter", 1, 3, "restart-then-collective-mismatch",
     [F(1, "step", "recursion", 3, attempt=0), F(0, "coll", "coll_dtype", 1, attempt=1)],
     "attempt 0: rank 1 (the rank shown by the filter) hits RecursionError at step 3; after the restart rank 0 all_reduces a float64 gradient against float32 at step 1", {"restarts": 1, "filter": "1"}),
    ("h29", "srun", 1, 4, "signal-sigkill", [F(3, "step", "sig_kill", 6)],
     "rank 3 (last) sends SIGKILL to itself at step 6", {}),
    ("h30", "mpirun", 1, 2, "exception-backward-no-grad", [F(0, "backward", "bwd_nograd", 5)],
     "rank 0 calls backward on a detached loss at step 5 (RuntimeError: element 0 of tensors does not require grad)", {}),
    ("h31", "pdsh", 1, 4, "collective-broadcast-mismatch", [F(1, "coll", "coll_bcast", 2)],
     "rank 1 calls broadcast where the other ranks call all_reduce at step 2 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"detail": True}),
    # healthy
    ("h32", "console", 1, 3, "healthy", [], "no fault injected", {"ckpt_every": 3}),
    ("h33", "log-dir", 1, 4, "healthy-with-warnings", [],
     "no fault injected; every rank emits a UserWarning and a FutureWarning, rank 1 logs a retried metrics push", {"noise_all": ["warn"], "noise": {"1": ["retry"]}}),
    ("h34", "mpirun", 2, 2, "healthy-caught-exception", [],
     "no fault injected; rank 2 catches and logs a ZeroDivisionError traceback in metrics code", {"noise": {"2": ["caught"]}, "all_log": True}),
    ("h35", "pdsh", 2, 3, "healthy-detail-debug", [],
     "no fault injected; gradients all_reduced by hand under TORCH_DISTRIBUTED_DEBUG=DETAIL", {"detail": True, "ckpt_every": 4}),
    ("h36", "kubectl", 1, 3, "healthy-dataloader-workers", [],
     "no fault injected; DataLoader with 2 workers, rank 1 logs a caught FileNotFoundError traceback, rank 0 emits warnings", {"workers": 2, "noise": {"1": ["caught_early"], "0": ["warn"]}}),
]


def host_names(layout, agents, job):
    if layout == "kubectl":
        return ["%s-worker-%d" % (job, i) for i in range(agents)]
    if layout in ("srun", "mpirun"):
        return [str(i) for i in range(agents)]
    if layout in ("jsonl", "shipper"):
        return ["trn-%s-%d" % (job[-4:], i) for i in range(agents)]
    return ["node%d" % i for i in range(agents)]


class Sink:
    def __init__(self, layout, outdir, hosts, job, shipper):
        self.layout, self.outdir, self.hosts, self.job, self.shipper = layout, outdir, hosts, job, shipper
        self.lock = threading.Lock()
        self.files = {}
        agents = len(hosts)
        if layout in ("console", "tee", "local-ranks-filter", "log-dir", "per-rank"):
            if agents == 1:
                name = "launcher.log" if layout == "per-rank" else "console.log"
                self.targets = [name]
            else:
                self.targets = ["%s.log" % h for h in hosts]
        elif layout == "srun":
            self.targets = ["slurm-%s.out" % job.split("-")[-1]] * agents
        elif layout == "mpirun":
            self.targets = ["%s.out" % job] * agents
        elif layout in ("kubectl", "pdsh"):
            self.targets = ["%s.log" % job] * agents
        elif layout == "jsonl":
            self.targets = ["%s.jsonl" % job] * agents
        elif layout == "shipper":
            self.targets = ["messages.log" if shipper == "syslog" else "%s.log" % job] * agents
        for t in set(self.targets):
            self.files[t] = open(os.path.join(outdir, t), "w", encoding="utf-8")
        self.pids = {}

    def write(self, agent, stream, line, t):
        h = self.hosts[agent]
        if self.layout == "srun":
            s = "%s: %s\n" % (h, line)
        elif self.layout == "mpirun":
            s = "[1,%s]<%s>:%s\n" % (h, stream, line)
        elif self.layout == "pdsh":
            s = "%s: %s\n" % (h, line)
        elif self.layout == "kubectl":
            s = "[pod/%s/pytorch] %s\n" % (h, line)
        elif self.layout == "jsonl":
            ts = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            s = json.dumps({"@timestamp": ts, "host": h, "source": "stdout", "message": line}) + "\n"
        elif self.layout == "shipper":
            if self.shipper == "syslog":
                dt = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
                s = "%s %2d %s %s torchrun[%d]: %s\n" % (dt.strftime("%b"), dt.day, dt.strftime("%H:%M:%S"), h, self.pids.get(agent, 0), line)
            else:
                ts = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
                s = "%s %s %s\n" % (ts, h, line)
        else:
            s = line + "\n"
        with self.lock:
            fh = self.files[self.targets[agent]]
            fh.write(s); fh.flush()

    def close(self):
        for fh in self.files.values():
            fh.close()
        return sorted(set(self.targets))


def pump(pipe, sink, agent, stream):
    for raw in iter(pipe.readline, b""):
        sink.write(agent, stream, raw.decode("utf-8", "replace").rstrip("\n"), time.time())


def do_run(idx, spec, outroot):
    rid, layout, agents, nproc, scenario, faults, cause, extra = spec
    port = BASE_PORT + 10 * idx
    rundir = os.path.join(outroot, rid)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    work = tempfile.mkdtemp(prefix="job-")
    side = tempfile.mkdtemp(prefix="aux-")
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(work, "train.py"))
    rng = random.Random("batch-h-" + rid)
    job = "%s-%05d" % (rng.choice(["pretrain", "ft", "exp", "trainjob", "run", "sweep", "base"]), rng.randint(10000, 99999))
    hosts = host_names(layout, agents, job)
    world = agents * nproc
    cfg = {"workdir": work, "faults": faults, "seed": 100 + idx, "steps": extra.get("steps", 10),
           "pg_timeout": 10, "ddp": extra.get("ddp", False), "workers": extra.get("workers", 0),
           "ckpt_every": extra.get("ckpt_every", 0), "all_log": extra.get("all_log", False),
           "step_sleep": 0.15}
    for k in ("subgroup", "monitored", "store_step", "gather_stats"):
        if k in extra:
            cfg[k] = extra[k]
    noise = {k: list(v) for k, v in extra.get("noise", {}).items()}
    for w in extra.get("noise_all", []):
        for r in range(world):
            noise.setdefault(str(r), []).append(w)
    cfg["noise"] = noise
    if layout == "per-rank":
        os.makedirs(os.path.join(work, "ranklogs"))
        cfg["rank_log_dir"] = os.path.join(work, "ranklogs")
    sink = Sink(layout, rundir, hosts, job, extra.get("shipper", "iso"))
    split_streams = layout == "mpirun"
    procs = []
    t0 = time.time()
    for a in range(agents):
        cmd = ["timeout", "-k", "5", "90", TORCHRUN, "--nproc-per-node=%d" % nproc, "--local-addr", "127.0.0.1"]
        if agents == 2:
            cmd += ["--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port,
                    "--rdzv-id=%s" % job, "--rdzv-conf=is_host=%s" % ("true" if a == 0 else "false")]
        elif extra.get("restarts") or idx % 3 == 0:
            cmd += ["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=%s" % job]
        else:
            cmd += ["--nnodes=1", "--master-addr=127.0.0.1", "--master-port=%d" % port]
        if extra.get("restarts"):
            cmd += ["--max-restarts=%d" % extra["restarts"]]
        if layout == "tee":
            cmd += ["--tee", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", extra.get("filter", "0")]
        if layout == "log-dir":
            ld = os.path.join(work, "logs") if agents == 1 else os.path.join(work, "logs", hosts[a])
            cmd += ["--log-dir", ld, "--redirects", "3"]
        cmd += ["train.py"]
        env = dict(os.environ)
        env.update(PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo", JOB_CFG=json.dumps(cfg),
                   JOB_SIDE_DIR=side, JOB_NODE=hosts[a])
        env.pop("TORCH_DISTRIBUTED_DEBUG", None)
        if extra.get("detail"):
            env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        if extra.get("restarts"):
            # a fresh worker store per attempt: with the shared agent store, attempt 1
            # can read attempt 0's stale gloo addresses and fail before any fault fires
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE if split_streams else subprocess.STDOUT)
        sink.pids[a] = p.pid
        ths = [threading.Thread(target=pump, args=(p.stdout, sink, a, "stdout"), daemon=True)]
        if split_streams:
            ths.append(threading.Thread(target=pump, args=(p.stderr, sink, a, "stderr"), daemon=True))
        for th in ths:
            th.start()
        procs.append((p, ths))
        if agents == 2 and a == 0:
            time.sleep(0.7)
    rcs = []
    for p, ths in procs:
        rcs.append(p.wait())
        for th in ths:
            th.join()
    elapsed = time.time() - t0
    sink.close()
    if layout == "log-dir":
        shutil.copytree(os.path.join(work, "logs"), os.path.join(rundir, "logs"))
    if layout == "per-rank":
        for f in sorted(os.listdir(os.path.join(work, "ranklogs"))):
            shutil.copy(os.path.join(work, "ranklogs", f), os.path.join(rundir, f))
    allfiles = sorted(os.path.relpath(os.path.join(dp, f), rundir)
                      for dp, _, fs in os.walk(rundir) for f in fs)
    # labels from side files
    fired = []
    for fp in glob.glob(os.path.join(side, "fired_*.json")):
        with open(fp) as fh:
            fired.append(json.load(fh))
    starts = glob.glob(os.path.join(side, "start_*.json"))
    dones = len(glob.glob(os.path.join(side, "done_*.json")))
    attempts_seen = sorted({int(os.path.basename(s).split("_a")[1].split(".")[0]) for s in starts})
    fired.sort(key=lambda r: (r["attempt"], r["t"]))
    if fired:
        c = fired[0]
        culprit = {"rank": c["rank"], "host": c["node"] if agents == 2 else None, "attempt": c["attempt"]}
    else:
        culprit = {"rank": None, "host": None, "attempt": None}
    fired_desc = ", ".join("rank %d attempt %d local_rank %d node %s %s%s at +%.2fs" % (
        r["rank"], r["attempt"], r["local_rank"], r["node"], r["kind"],
        " (in a DataLoader worker)" if r.get("in_worker") else "", r["t"] - fired[0]["t"]) for r in fired) or "none"
    note = ("label from side files: %d rank starts (attempts %s), %d clean finishes, fired faults: %s; culprit = earliest "
            "fired (lowest attempt first); agent exit codes: %s" % (len(starts), ",".join(map(str, attempts_seen)) or "-",
                                                                   dones, fired_desc, ", ".join(
                "%s=%d" % (hosts[i] if agents == 2 else "agent", rc) for i, rc in enumerate(rcs))))
    # sanity vs construction
    problems, warnings_ = [], []
    a0 = [f for f in faults if f["attempt"] == 0]
    if a0 and not (culprit["attempt"] == 0 and culprit["rank"] in {f["rank"] for f in a0}):
        problems.append("first fired fault does not match the injected attempt-0 fault")
    if not faults and (fired or any(rcs) or dones != world):
        problems.append("healthy run did not finish cleanly")
    if faults and not any(rcs):
        problems.append("faulty run exited 0 on all agents")
    if faults and dones:
        problems.append("%d ranks finished cleanly in a faulty run" % dones)
    for f in faults:
        if f["attempt"] > 0 and not any(r["rank"] == f["rank"] and r["attempt"] == f["attempt"] for r in fired):
            problems.append("attempt-%d fault of rank %d never fired" % (f["attempt"], f["rank"]))
    if 124 in rcs or 137 in rcs:
        warnings_.append("an agent was killed by timeout")
    for d in (work, side):
        shutil.rmtree(d, ignore_errors=True)
    item = {"id": rid, "files": allfiles, "layout": layout, "ranks": world, "agents": agents,
            "scenario": scenario, "culprit": culprit, "cause": cause, "note": note}
    return item, problems + warnings_, rcs, elapsed


def dump_manifest(items, path):
    out = []
    for it in items:
        c = it["culprit"]
        def v(x):
            return "null" if x is None else (json.dumps(x) if isinstance(x, str) else str(x))
        out.append("- id: %s\n  files: %s\n  layout: %s\n  ranks: %d\n  agents: %d\n  scenario: %s\n"
                   "  culprit: {rank: %s, host: %s, attempt: %s}\n  cause: %s\n  note: %s\n" % (
                       it["id"], json.dumps(it["files"]), it["layout"], it["ranks"], it["agents"], it["scenario"],
                       v(c["rank"]), v(c["host"]), v(c["attempt"]), json.dumps(it["cause"]), json.dumps(it["note"])))
    with open(path, "w") as fh:
        fh.write("".join(out))


def load_manifest(path):
    # parser for the exact format written by dump_manifest (values are JSON scalars/lists)
    items, cur = [], None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("- id: "):
            cur = {"id": line[6:]}; items.append(cur); continue
        k, _, v = line.strip().partition(": ")
        if k == "culprit":
            parts = dict(x.strip().split(": ", 1) for x in v.strip("{}").split(", "))
            cur[k] = {kk: json.loads(vv) for kk, vv in parts.items()}
        elif k in ("layout", "scenario"):
            cur[k] = v
        else:
            cur[k] = json.loads(v)
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    os.makedirs(a.out, exist_ok=True)
    mpath = os.path.join(a.out, "manifest.yaml")
    old = {}
    if os.path.exists(mpath):
        for it in load_manifest(mpath):
            old[it["id"]] = it
    todo = [(i, s) for i, s in enumerate(RUNS) if not only or s[0] in only]
    lock = threading.Lock()
    with cf.ThreadPoolExecutor(max_workers=max(1, min(2, a.jobs))) as ex:
        futs = {ex.submit(do_run, i, s, a.out): s[0] for i, s in todo}
        for fu in cf.as_completed(futs):
            rid = futs[fu]
            try:
                item, problems, rcs, el = fu.result()
            except Exception as e:  # noqa
                print("%s FAILED to run: %r" % (rid, e), flush=True)
                continue
            with lock:
                old[rid] = item
                print("%s %s rcs=%s culprit=%s %.0fs %s" % (rid, item["scenario"], rcs, item["culprit"], el,
                                                        ("PROBLEM: " + "; ".join(problems)) if problems else "ok"), flush=True)
                dump_manifest([old[k] for k in sorted(old)], mpath)


if __name__ == "__main__":
    main()
