#!/usr/bin/env python
"""Make batch G: real torchrun jobs (gloo, CPU, 127.0.0.1 only) with injected faults.

Usage: /tmp/torchvenv/bin/python make_runs.py --out DIR [--only g03,g07] [--jobs 2]
Labels come only from side files written by train.py (outside the run folder).
"""
import argparse, concurrent.futures as cf, datetime, glob, json, os, random, shutil
import subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = "/tmp/torchvenv/bin/torchrun"
BASE_PORT = 64000

# (id, layout, agents, nproc_per_agent, scenario, faults, cause, extra)
# fault: dict(rank, attempt, place, kind, step/index)
F = lambda rank, place, kind, step=0, attempt=0, **kw: dict(rank=rank, attempt=attempt, place=place, kind=kind, step=step, **kw)
RUNS = [
    ("g01", "console", 1, 4, "exception-forward-shape", [F(2, "forward", "fwd_shape", 3)],
     "rank 2 feeds a batch with 14 instead of 16 features into the model at step 3 (RuntimeError from matmul)", {}),
    ("g02", "tee", 1, 2, "exception-backward-twice", [F(0, "backward", "bwd_twice", 5)],
     "rank 0 calls loss.backward() twice at step 5 (RuntimeError: backward through the graph a second time)", {}),
    ("g03", "log-dir", 1, 4, "exception-optimizer-state", [F(3, "optim", "optim_state", 4)],
     "rank 3 loads an empty optimizer state dict before optimizer.step at step 4 (ValueError, param groups mismatch); DDP model", {"ddp": True}),
    ("g04", "per-rank", 1, 3, "exception-dataloader-worker", [F(1, "data", "data_index", index=40)],
     "rank 1's Dataset.__getitem__ raises IndexError inside a DataLoader worker (reraised in the main process)", {"workers": 2}),
    ("g05", "srun", 2, 3, "exception-checkpoint-save", [F(5, "ckpt", "ckpt_save", 6)],
     "rank 5 (last) saves its checkpoint at step 6 into a directory that does not exist (torch.save RuntimeError)", {"ckpt_every": 3}),
    ("g06", "kubectl", 2, 2, "exception-checkpoint-load", [F(0, "ckpt", "ckpt_load", 3)],
     "rank 0 reloads a truncated checkpoint file at step 3 (torch.load zip archive error)", {"ckpt_every": 3}),
    ("g07", "jsonl", 1, 2, "exception-metrics-zerodiv", [F(1, "metrics", "metrics_zero", 4)],
     "rank 1's metrics code divides by a zero elapsed time at step 4 (ZeroDivisionError)", {"all_log": True}),
    ("g08", "shipper", 2, 4, "exception-metrics-format", [F(2, "metrics", "metrics_type", 6)],
     "rank 2 formats a None learning rate in its step log line at step 6 (TypeError)", {"all_log": True, "shipper": "iso"}),
    ("g09", "local-ranks-filter", 1, 4, "exception-cuda-on-cpu", [F(0, "startup", "cuda")],
     "rank 0 moves the model to CUDA on a CPU-only build right after init (AssertionError/RuntimeError: not compiled with CUDA)", {"filter": "0"}),
    ("g10", "console", 1, 3, "exception-import", [F(1, "startup", "import")],
     "rank 1 imports a module that is not installed right after process-group init (ModuleNotFoundError)", {}),
    ("g11", "local-ranks-filter", 1, 4, "exception-oom-forward", [F(3, "forward", "oom", 2)],
     "rank 3 (last, hidden by the filter) tries to allocate a 256 TiB tensor before forward at step 2 (CPU allocator RuntimeError)", {"filter": "0"}),
    ("g12", "console", 2, 2, "exception-forward-dtype", [F(1, "forward", "fwd_dtype", 4)],
     "rank 1 feeds a float64 batch into the float32 model at step 4 (RuntimeError dtype mismatch)", {}),
    ("g13", "kubectl", 1, 3, "exception-nan-loss", [F(2, "backward", "bwd_nan", 5)],
     "rank 2 detects a NaN loss at step 5 and raises FloatingPointError", {}),
    ("g14", "srun", 1, 4, "exception-dataloader-collate", [F(3, "data", "data_collate", index=50)],
     "rank 3 (last) returns a short sample from __getitem__ so default_collate fails (RuntimeError stack, in a DataLoader worker)", {"workers": 1}),
    ("g15", "jsonl", 2, 2, "exception-checkpoint-keys", [F(3, "ckpt", "ckpt_keys", 4)],
     "rank 3 (last) loads a state dict with a missing and an unexpected key at step 4 (load_state_dict RuntimeError)", {"ckpt_every": 2}),
    # hangs
    ("g16", "console", 1, 4, "hang-sleep", [F(1, "step", "hang_sleep", 3)],
     "rank 1 sleeps for an hour at the start of step 3; the other ranks hit the 10 s gloo timeout", {}),
    ("g17", "tee", 1, 3, "hang-deadlock", [F(0, "backward", "hang_deadlock", 4)],
     "rank 0 deadlocks on a non-reentrant threading.Lock instead of backward at step 4; others time out", {}),
    ("g18", "shipper", 2, 2, "hang-blocking-read", [F(3, "step", "hang_read", 2)],
     "rank 3 (last) blocks reading a pipe nobody writes to at step 2; others time out", {"shipper": "syslog"}),
    ("g19", "per-rank", 1, 4, "hang-busy-loop", [F(2, "optim", "hang_busy", 5)],
     "rank 2 spins in a busy loop before optimizer.step at step 5; others time out", {}),
    ("g20", "log-dir", 1, 2, "hang-wait-file", [F(1, "step", "hang_file", 4)],
     "rank 1 polls for a ready-file that never appears at step 4; rank 0 times out", {}),
    ("g21", "kubectl", 2, 3, "hang-thread-join", [F(4, "step", "hang_join", 3)],
     "rank 4 joins a thread that never finishes at step 3; others time out", {"ddp": True}),
    # signals / early exits
    ("g22", "console", 1, 4, "signal-sigkill", [F(3, "step", "sig_kill", 4)],
     "rank 3 (last) sends SIGKILL to itself at step 4", {}),
    ("g23", "srun", 2, 2, "signal-sigsegv", [F(0, "backward", "sig_segv", 3)],
     "rank 0 sends SIGSEGV to itself in place of backward at step 3", {}),
    ("g24", "tee", 1, 3, "signal-sigabrt", [F(1, "optim", "sig_abrt", 2)],
     "rank 1 sends SIGABRT to itself before optimizer.step at step 2", {}),
    ("g25", "jsonl", 1, 2, "dataloader-worker-killed", [F(0, "data", "worker_kill", index=70)],
     "a DataLoader worker of rank 0 SIGKILLs itself while loading sample 70", {"workers": 2}),
    ("g26", "per-rank", 1, 3, "early-exit-zero", [F(2, "step", "exit0", 3)],
     "rank 2 (last) calls os._exit(0) at step 3 without a traceback; others lose their peer", {}),
    ("g27", "shipper", 1, 4, "early-exit-nonzero", [F(1, "step", "exit_nz", 5)],
     "rank 1 calls sys.exit(3) at step 5 without a traceback", {"shipper": "iso"}),
    # collective mismatches
    ("g28", "console", 1, 3, "collective-shape-mismatch", [F(1, "coll", "coll_shape", 2)],
     "rank 1 all_reduces a gradient buffer with 7 extra elements at step 2 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"detail": True}),
    ("g29", "kubectl", 1, 2, "collective-dtype-mismatch", [F(0, "coll", "coll_dtype", 3)],
     "rank 0 all_reduces a float64 gradient while rank 1 uses float32 at step 3", {}),
    ("g30", "log-dir", 1, 4, "collective-extra-barrier", [F(3, "coll", "coll_extra", 2)],
     "rank 3 (last) calls an extra dist.barrier() before its gradient all_reduce at step 2 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"detail": True}),
    ("g31", "srun", 1, 3, "collective-op-mismatch", [F(2, "coll", "coll_type", 4)],
     "rank 2 calls all_gather where the other ranks call all_reduce at step 4", {}),
    # restarts
    ("g32", "console", 1, 3, "restart-then-different-failure",
     [F(0, "metrics", "metrics_key", 2, attempt=0), F(2, "ckpt", "ckpt_keys", 4, attempt=1)],
     "attempt 0: rank 0 logs a missing metrics key at step 2 (KeyError); a second fault (rank 2, load_state_dict at step 4) was armed for attempt 1 but never fired because attempt 1 ended before step 4", {"restarts": 1, "ckpt_every": 2}),
    ("g33", "log-dir", 1, 2, "restart-then-sigkill",
     [F(1, "forward", "custom", 3, attempt=0), F(0, "step", "sig_kill", 2, attempt=1)],
     "attempt 0: rank 1 raises a user-defined ConfigError at step 3; after the restart rank 0 SIGKILLs itself at step 2", {"restarts": 1}),
    # healthy
    ("g34", "console", 1, 4, "healthy", [], "no fault injected", {"ckpt_every": 4}),
    ("g35", "srun", 2, 2, "healthy-with-warnings", [], "no fault injected; every rank emits UserWarnings", {"noise_all": ["warn"]}),
    ("g36", "jsonl", 1, 3, "healthy-caught-exception", [], "no fault injected; rank 1 catches and logs a ZeroDivisionError traceback in metrics code", {"noise": {"1": ["caught"]}, "all_log": True}),
]


def host_names(layout, agents, job):
    if layout in ("kubectl",):
        return ["%s-worker-%d" % (job, i) for i in range(agents)]
    if layout == "srun":
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
        elif layout == "kubectl":
            self.targets = ["%s.log" % job] * agents
        elif layout == "jsonl":
            self.targets = ["%s.jsonl" % job] * agents
        elif layout == "shipper":
            self.targets = ["messages.log" if shipper == "syslog" else "%s.log" % job] * agents
        for t in set(self.targets):
            self.files[t] = open(os.path.join(outdir, t), "w", encoding="utf-8")
        self.pids = {}

    def write(self, agent, line, t):
        h = self.hosts[agent]
        if self.layout == "srun":
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


def pump(proc, sink, agent):
    for raw in iter(proc.stdout.readline, b""):
        sink.write(agent, raw.decode("utf-8", "replace").rstrip("\n"), time.time())


def do_run(idx, spec, outroot):
    rid, layout, agents, nproc, scenario, faults, cause, extra = spec
    port = BASE_PORT + 10 * idx
    rundir = os.path.join(outroot, rid)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    work = tempfile.mkdtemp(prefix="job-")
    side = tempfile.mkdtemp(prefix="aux-")
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(work, "train.py"))
    rng = random.Random(rid)
    job = "%s-%05d" % (rng.choice(["pretrain", "ft", "exp", "trainjob", "run"]), rng.randint(10000, 99999))
    hosts = host_names(layout, agents, job)
    world = agents * nproc
    cfg = {"workdir": work, "faults": faults, "seed": idx, "steps": extra.get("steps", 10),
           "pg_timeout": 10, "ddp": extra.get("ddp", False), "workers": extra.get("workers", 0),
           "ckpt_every": extra.get("ckpt_every", 0), "all_log": extra.get("all_log", False),
           "step_sleep": 0.15}
    noise = dict(extra.get("noise", {}))
    for w in extra.get("noise_all", []):
        for r in range(world):
            noise.setdefault(str(r), []).append(w)
    cfg["noise"] = noise
    if layout == "per-rank":
        os.makedirs(os.path.join(work, "ranklogs"))
        cfg["rank_log_dir"] = os.path.join(work, "ranklogs")
    sink = Sink(layout, rundir, hosts, job, extra.get("shipper", "iso"))
    procs = []
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
        if layout in ("tee",):
            cmd += ["--tee", "3"]
        if layout == "local-ranks-filter":
            cmd += ["--tee", "3", "--local-ranks-filter", extra.get("filter", "0")]
        if layout == "log-dir":
            cmd += ["--log-dir", os.path.join(work, "logs"), "--redirects", "3"]
        cmd += ["train.py"]
        env = dict(os.environ)
        env.update(PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo", JOB_CFG=json.dumps(cfg),
                   JOB_SIDE_DIR=side, JOB_NODE=hosts[a])
        if extra.get("detail"):
            env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sink.pids[a] = p.pid
        th = threading.Thread(target=pump, args=(p, sink, a), daemon=True)
        th.start()
        procs.append((p, th))
        if agents == 2 and a == 0:
            time.sleep(0.7)
    rcs = []
    for p, th in procs:
        rcs.append(p.wait()); th.join()
    files = sink.close()
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
    starts = len(glob.glob(os.path.join(side, "start_*.json")))
    dones = len(glob.glob(os.path.join(side, "done_*.json")))
    fired.sort(key=lambda r: (r["attempt"], r["t"]))
    if fired:
        c = fired[0]
        culprit = {"rank": c["rank"], "host": c["node"] if agents == 2 else None, "attempt": c["attempt"]}
    else:
        culprit = {"rank": None, "host": None, "attempt": None}
    fired_desc = ", ".join("rank %d attempt %d local_rank %d node %s %s at +%.2fs" % (
        r["rank"], r["attempt"], r["local_rank"], r["node"], r["kind"], r["t"] - fired[0]["t"]) for r in fired) or "none"
    note = ("label from side files: %d rank starts, %d clean finishes, fired faults: %s; culprit = earliest fired "
            "(lowest attempt first); agent exit codes: %s" % (starts, dones, fired_desc, ", ".join(
                "%s=%d" % (hosts[i] if agents == 2 else "agent", rc) for i, rc in enumerate(rcs))))
    # sanity vs construction
    problems = []
    exp = sorted(faults, key=lambda f: f["attempt"])
    if exp and (culprit["rank"] != exp[0]["rank"] or culprit["attempt"] != exp[0]["attempt"]):
        problems.append("first fired fault does not match the injected attempt-0 fault")
    if not exp and (fired or any(rcs)):
        problems.append("healthy run did not finish cleanly")
    if exp and not any(rcs):
        problems.append("faulty run exited 0 on all agents")
    for d in (work, side):
        shutil.rmtree(d, ignore_errors=True)
    item = {"id": rid, "files": allfiles, "layout": layout, "ranks": world, "agents": agents,
            "scenario": scenario, "culprit": culprit, "cause": cause, "note": note}
    return item, problems, rcs


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
    with cf.ThreadPoolExecutor(max_workers=min(2, a.jobs)) as ex:
        futs = {ex.submit(do_run, i, s, a.out): s[0] for i, s in todo}
        for fu in cf.as_completed(futs):
            rid = futs[fu]
            try:
                item, problems, rcs = fu.result()
            except Exception as e:  # noqa
                print("%s FAILED to run: %r" % (rid, e), flush=True)
                continue
            old[rid] = item
            print("%s %s rcs=%s culprit=%s %s" % (rid, item["scenario"], rcs, item["culprit"],
                                                 ("PROBLEM: " + "; ".join(problems)) if problems else "ok"), flush=True)
            dump_manifest([old[k] for k in sorted(old)], mpath)


if __name__ == "__main__":
    main()
