#!/usr/bin/env python
"""Make batch I: real torchrun jobs (gloo, CPU, 127.0.0.1 only) with injected faults.

Usage: /tmp/torchvenv/bin/python make_runs.py --out DIR [--only i03,i07] [--jobs 2]
Labels come only from side files written by train.py (outside the run folder).
"""
import argparse, concurrent.futures as cf, datetime, glob, json, os, random, shutil
import subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = "/tmp/torchvenv/bin/torchrun"
BASE_PORT = 58000  # run iNN uses 58000 + 10*NN

# (id, layout, agents, nproc_per_agent, scenario, faults, cause, extra)
# fault: dict(rank, attempt, place, kind, step/index)
F = lambda rank, place, kind, step=0, attempt=0, **kw: dict(rank=rank, attempt=attempt, place=place, kind=kind, step=step, **kw)
RUNS = [
    ("i01", "console", 2, 3, "exception-collate-keyerror", [F(4, "data", "collate_key", index=70)],
     "one record of rank 4's shard (sample 70) names its label field 'target' instead of 'label'; the custom collate_fn raises KeyError inside a DataLoader worker and it is re-raised in rank 4's main process", {"workers": 2, "dict_samples": True}),
    ("i02", "tee", 1, 4, "signal-sigbus", [F(1, "step", "sig_bus", 3)],
     "rank 1 sends SIGBUS to itself at the start of step 3", {}),
    ("i03", "local-ranks-filter", 1, 4, "exception-checkpoint-truncated-barrier", [F(3, "ckpt", "ckpt_truncate", 4)],
     "rank 3 (last, hidden by the filter) reloads its step-4 checkpoint after the file was cut to half its size (torch.load fails in the zip reader with OSError: [Errno 22] Invalid argument) while the other ranks wait in the barrier after their own reload; main wrapped in @record", {"ckpt_every": 2, "ckpt_barrier": True, "record": True, "filter": "0"}),
    ("i04", "log-dir", 2, 2, "early-destroy-process-group", [F(1, "step", "destroy_early", 5)],
     "rank 1 calls dist.destroy_process_group() at step 5 and returns from main (exit code 0, no traceback); the other ranks lose their peer in the next all_reduce", {}),
    ("i05", "per-rank", 1, 5, "signal-sigfpe", [F(3, "step", "sig_fpe", 2)],
     "rank 3 sends SIGFPE to itself at the start of step 2", {}),
    ("i06", "srun", 2, 4, "collective-alltoall-split-mismatch", [F(5, "a2a", "a2a_split", 3)],
     "rank 5 passes output_split_sizes that do not match its peers' input splits to all_to_all_single (token routing) at step 3; gloo aborts rank 5 (SIGABRT) and the others lose their peer", {"a2a": True}),
    ("i07", "kubectl", 1, 3, "collective-broadcast-wrong-src", [F(1, "bcast", "bcast_src", 2)],
     "rank 1 broadcasts the lr scale with src=1 while the other ranks use src=0 at step 2; the broadcast hangs until the 10 s gloo timeout (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"bcast": True, "detail": True}),
    ("i08", "jsonl", 2, 3, "exception-two-ranks-different-errors", [F(4, "step", "two_err_a", 5), F(1, "step", "two_err_b", 5)],
     "at step 5 rank 4 parses a shard header field 'n/a' as an int (ValueError); about 1 s later rank 1, on the other node, fails to decompress a corrupt shard block (zlib.error); the culprit is rank 4, whose error came first (agents run with --monitor-interval=3)", {"monitor": 3, "all_fire": True}),
    ("i09", "shipper", 1, 6, "restart-hang-then-crash",
     [F(4, "step", "hang_sleep", 3, attempt=0), F(2, "step", "zerodiv_accum", 2, attempt=1)],
     "attempt 0: rank 4 blocks in a sleep at step 3 and every rank hits the 10 s gloo timeout; after the restart rank 2 computes micro-batches per step as 0 and divides by it at step 2 (ZeroDivisionError)", {"restarts": 1, "shipper": "iso"}),
    ("i10", "mpirun", 2, 2, "exception-optimizer-hook", [F(3, "optim", "ema_shape", 4)],
     "rank 3 (last): the EMA optimizer step post-hook updates a shadow tensor of the wrong shape at step 4 (RuntimeError size mismatch in add_)", {"ema": True}),
    ("i11", "pdsh", 1, 4, "exception-grad-nonfinite-clip", [F(0, "forward", "nonfinite", 6)],
     "rank 0's loss scale overflows to inf at step 6; clip_grad_norm_(error_if_nonfinite=True) raises RuntimeError before the gradient all_reduce; main wrapped in @record", {"clip": True, "record": True}),
    ("i12", "host-rank-files", 2, 3, "store-get-missing-key", [F(4, "store_get", "store_skip_set", 3)],
     "rank 4 does not publish its checkpoint-shard key in the c10d store at step 3; every rank's store.get of that key (rank 4's own included) times out after 10 s (DistStoreError)", {"store_get_step": 3}),
    ("i13", "pylogging", 1, 4, "collective-subgroup-skip-timeout", [F(2, "sub", "sub_skip", 4)],
     "rank 2 skips the all_reduce on the subgroup [1, 2] (made with new_group) at step 4; rank 1 waits in the subgroup all_reduce and ranks 0, 2, 3 in the global one until the 10 s gloo timeout; the application logs through Python logging with a rank filter", {"subgroup": [1, 2]}),
    ("i14", "console", 1, 8, "hang-busy-compute", [F(6, "step", "busy_hang", 4)],
     "rank 6 enters a power iteration without an exit condition at step 4 (busy CPU, no sleep); the other ranks hit the 10 s gloo timeout", {}),
    ("i15", "tee", 2, 2, "exception-worker-memoryerror", [F(1, "data", "worker_memerr", index=50)],
     "a DataLoader worker of rank 1 tries to allocate a 1 PiB decode buffer for sample 50 (MemoryError), re-raised in rank 1's main process", {"workers": 2}),
    ("i16", "local-ranks-filter", 1, 3, "exception-inplace-autograd", [F(2, "forward", "inplace", 3)],
     "rank 2 (last, the rank shown by the filter) clamps the softmax output in place at step 3, so backward fails (RuntimeError: modified by an inplace operation)", {"filter": "2"}),
    ("i17", "log-dir", 1, 4, "restart-then-sigfpe",
     [F(1, "step", "nofile", 2, attempt=0), F(3, "step", "sig_fpe", 1, attempt=1)],
     "attempt 0: rank 1 leaks shard reader file handles under a 256 soft limit at step 2 (OSError: Too many open files); after the restart rank 3 sends SIGFPE to itself at step 1", {"restarts": 1}),
    ("i18", "per-rank", 1, 4, "exception-env-var-missing", [F(3, "startup", "env_missing")],
     "rank 3 (last) reads the unset environment variable DATA_SHARD_INDEX right after process-group init (KeyError)", {}),
    ("i19", "srun", 1, 3, "signal-sigint", [F(2, "step", "sig_int", 5)],
     "rank 2 (last) sends SIGINT to itself at step 5 (KeyboardInterrupt traceback)", {}),
    ("i20", "kubectl", 2, 2, "collective-reduce-scatter-size-mismatch", [F(0, "rs", "rs_size", 3)],
     "rank 0 calls reduce_scatter_tensor with 3-element shards where the others use 2 at step 3 (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"rs": True, "detail": True}),
    ("i21", "jsonl", 1, 5, "exception-checkpoint-disk-full", [F(3, "ckpt", "ckpt_diskfull", 4)],
     "rank 3's checkpoint volume is full when it saves at step 4 (torch.save RuntimeError from the zip writer, the file points at /dev/full); the other ranks wait in the checkpoint barrier; main wrapped in @record", {"ckpt_every": 2, "ckpt_barrier": True, "record": True, "all_log": True}),
    ("i22", "shipper", 2, 3, "hang-p2p-unmatched-recv", [F(5, "step", "p2p_recv", 3)],
     "rank 5 (last) waits at step 3 in dist.recv for activations from rank 0, which never sends; all ranks hit the 10 s gloo timeout", {"shipper": "syslog"}),
    ("i23", "mpirun", 1, 4, "exception-too-many-open-files", [F(2, "step", "nofile", 3)],
     "rank 2 leaks shard reader file handles under a 256 soft limit at step 3 (OSError: [Errno 24] Too many open files)", {}),
    ("i24", "pdsh", 1, 3, "exception-prefetch-thread", [F(0, "prefetch", "prefetch_reset", 4)],
     "rank 0's metadata prefetch thread gets ConnectionResetError while fetching for step 5 (submitted at step 4); it is re-raised when the main loop takes the result at step 5", {"prefetch": True}),
    ("i25", "per-rank", 1, 3, "restart-then-busy-hang",
     [F(2, "prefetch", "prefetch_reset", 2, attempt=0), F(0, "step", "busy_hang", 2, attempt=1)],
     "attempt 0: rank 2's prefetch thread gets ConnectionResetError (submitted at step 2, re-raised at step 3); after the restart rank 0 spins in a power iteration without exit at step 2 and the others time out", {"restarts": 1, "prefetch": True}),
    ("i26", "console", 2, 3, "exception-ddp-unused-parameter", [F(3, "forward", "ddp_skip", 4)],
     "rank 3 skips the middle layer (layer drop decided locally) at step 4 under DDP without find_unused_parameters; its reducer never finishes, so rank 3's next forward raises 'Expected to have finished reduction in the prior iteration'", {"ddp": True}),
    ("i27", "host-rank-files", 1, 4, "hang-p2p-unmatched-send", [F(3, "step", "p2p_send", 3)],
     "rank 3 (last) blocks at step 3 in dist.send of its stage output to rank 0, which never receives; all ranks hit the 10 s gloo timeout", {}),
    ("i28", "pylogging", 2, 2, "collective-object-unpicklable", [F(2, "gather_obj", "obj_lambda", 4)],
     "rank 2 puts a lambda into its metrics dict before all_gather_object at step 4 (pickling fails: AttributeError: Can't pickle local object); the application logs through Python logging with a rank filter", {"gather_obj": True}),
    ("i29", "srun", 1, 6, "collective-scatter-list-size", [F(3, "scatter", "scatter_list", 3)],
     "rank 3, the scatter source at step 3 (sources rotate per step), passes 5 tensors for 6 ranks to dist.scatter (RuntimeError: Incorrect input list size); main wrapped in @record", {"scatter": True, "record": True}),
    ("i30", "kubectl", 1, 4, "restart-then-worker-memoryerror",
     [F(0, "forward", "inplace", 2, attempt=0), F(3, "data", "worker_memerr", attempt=1, index=40)],
     "attempt 0: rank 0 clamps the softmax output in place at step 2 (backward RuntimeError); after the restart a DataLoader worker of rank 3 tries to allocate a 1 PiB buffer for sample 40 (MemoryError)", {"restarts": 1, "workers": 1}),
    ("i31", "jsonl", 1, 2, "exception-shard-index-json", [F(1, "startup", "json_index")],
     "rank 1 (last) reads its shard index JSON, which was cut short, right after process-group init (json.JSONDecodeError) (TORCH_DISTRIBUTED_DEBUG=DETAIL)", {"detail": True}),
    # healthy
    ("i32", "tee", 1, 2, "healthy-long-run", [], "no fault injected; 200 steps with checkpoints every 50", {"steps": 200, "ckpt_every": 50, "log_every": 10}),
    ("i33", "local-ranks-filter", 1, 3, "healthy-benign-warnings", [],
     "no fault injected; every rank emits a UserWarning and a FutureWarning, rank 1 (shown by the filter) logs a retried metrics push", {"noise_all": ["warn"], "noise": {"1": ["retry"]}, "filter": "1"}),
    ("i34", "log-dir", 2, 2, "healthy-detail-subgroup", [],
     "no fault injected; an extra all_reduce on the subgroup [1, 2] every step under TORCH_DISTRIBUTED_DEBUG=DETAIL", {"subgroup": [1, 2], "detail": True, "ckpt_every": 4}),
    ("i35", "shipper", 1, 4, "healthy-logged-traceback", [],
     "no fault injected; rank 2 catches a JSONDecodeError from a stats cache and logs it with traceback; DataLoader with 2 workers", {"noise": {"2": ["caught_json"]}, "workers": 2, "all_log": True, "shipper": "iso"}),
    ("i36", "host-rank-files", 2, 3, "healthy-caught-disk-full", [],
     "no fault injected; rank 4 catches the RuntimeError of an optional profiler-trace torch.save onto a full volume (/dev/full) and logs it with traceback", {"noise": {"4": ["caught_diskfull"]}, "prefetch": True}),
]


def host_names(layout, agents, job):
    if layout == "kubectl":
        return ["%s-worker-%d" % (job, i) for i in range(agents)]
    if layout in ("srun", "mpirun"):
        return [str(i) for i in range(agents)]
    if layout in ("jsonl", "shipper"):
        return ["hpc-%s-%d" % (job[-4:], i) for i in range(agents)]
    return ["node%d" % i for i in range(agents)]


class Sink:
    def __init__(self, layout, outdir, hosts, job, shipper):
        self.layout, self.outdir, self.hosts, self.job, self.shipper = layout, outdir, hosts, job, shipper
        self.lock = threading.Lock()
        self.files = {}
        agents = len(hosts)
        if layout in ("console", "tee", "local-ranks-filter", "log-dir", "per-rank", "pylogging"):
            if agents == 1:
                name = "launcher.log" if layout in ("per-rank", "pylogging") else "console.log"
                self.targets = [name]
            else:
                self.targets = ["%s.log" % h for h in hosts]
        elif layout == "host-rank-files":
            self.targets = ["launcher.log"] if agents == 1 else ["launcher-%s.log" % h for h in hosts]
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
    port = BASE_PORT + 10 * int(rid[1:])
    rundir = os.path.join(outroot, rid)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    work = tempfile.mkdtemp(prefix="job-")
    side = tempfile.mkdtemp(prefix="aux-")
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(work, "train.py"))
    rng = random.Random("batch-i-" + rid)
    job = "%s-%05d" % (rng.choice(["llmpt", "cls", "mlp", "job", "train", "abl", "dev"]), rng.randint(10000, 99999))
    hosts = host_names(layout, agents, job)
    world = agents * nproc
    cfg = {"workdir": work, "faults": faults, "seed": 100 + idx, "steps": extra.get("steps", 10),
           "pg_timeout": 10, "ddp": extra.get("ddp", False), "workers": extra.get("workers", 0),
           "ckpt_every": extra.get("ckpt_every", 0), "all_log": extra.get("all_log", False),
           "step_sleep": 0.15, "log_every": extra.get("log_every", 2)}
    for k in ("subgroup", "dict_samples", "ema", "prefetch", "clip", "a2a", "rs", "bcast", "scatter",
              "gather_obj", "store_get_step", "ckpt_barrier", "record"):
        if k in extra:
            cfg[k] = extra[k]
    noise = {k: list(v) for k, v in extra.get("noise", {}).items()}
    for w in extra.get("noise_all", []):
        for r in range(world):
            noise.setdefault(str(r), []).append(w)
    cfg["noise"] = noise
    if layout in ("per-rank", "host-rank-files"):
        os.makedirs(os.path.join(work, "ranklogs"))
        cfg["rank_log_dir"] = os.path.join(work, "ranklogs")
        cfg["rank_log_pattern"] = "rank{rank}.log" if layout == "per-rank" else "{host}-rank{rank}.log"
    if layout == "pylogging":
        os.makedirs(os.path.join(work, "pylogs"))
    sink = Sink(layout, rundir, hosts, job, extra.get("shipper", "iso"))
    split_streams = layout == "mpirun"
    procs = []
    t0 = time.time()
    for a in range(agents):
        cmd = ["timeout", "-k", "5", "90", TORCHRUN, "--nproc-per-node=%d" % nproc, "--local-addr", "127.0.0.1"]
        if agents == 2:
            cmd += ["--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port,
                    "--rdzv-id=%s" % job, "--rdzv-conf=is_host=%s" % ("true" if a == 0 else "false")]
        elif extra.get("restarts") or int(rid[1:]) % 3 == 0:
            cmd += ["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port, "--rdzv-id=%s" % job]
        else:
            cmd += ["--nnodes=1", "--master-addr=127.0.0.1", "--master-port=%d" % port]
        if extra.get("restarts"):
            cmd += ["--max-restarts=%d" % extra["restarts"]]
        if extra.get("monitor"):
            cmd += ["--monitor-interval=%s" % extra["monitor"]]
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
        env.pop("JOB_PYLOG", None)
        if layout == "pylogging":
            env["JOB_PYLOG"] = os.path.join(work, "pylogs", "train.log" if agents == 1 else "train-%s.log" % hosts[a])
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
    if layout in ("per-rank", "host-rank-files"):
        for f in sorted(os.listdir(os.path.join(work, "ranklogs"))):
            shutil.copy(os.path.join(work, "ranklogs", f), os.path.join(rundir, f))
    if layout == "pylogging":
        for f in sorted(os.listdir(os.path.join(work, "pylogs"))):
            shutil.copy(os.path.join(work, "pylogs", f), os.path.join(rundir, f))
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
    if extra.get("all_fire"):
        for f in a0:
            if not any(r["rank"] == f["rank"] and r["attempt"] == 0 for r in fired):
                problems.append("attempt-0 fault of rank %d never fired" % f["rank"])
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
