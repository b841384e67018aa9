#!/usr/bin/env python3
"""Make sealed multi-rank batch J: real torchrun jobs (PyTorch 2.13 CPU, gloo, 127.0.0.1 only).

    /tmp/torchvenv/bin/python make_runs.py --out DIR [--only j03,j07] [--jobs 2] [--list]

Each run launches train.py (copied to a neutral /tmp/job-XXXX/ folder) under one
torchrun agent, or two agents joined by c10d rendezvous, captures every agent's
output line by line as it arrives, writes it at once in the run's layout, and
labels the run from construction only: the plan says which behaviour goes on which
(node, local rank, attempt); train.py's side files (outside DIR) say which global
rank that became and when it fired.  The culprit is the rank whose planned
behaviour fired first (lowest attempt first).  No log is read to decide a label.
"""
import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
PORT_BASE = 59000
FRESH_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

# kind -> (cause, what happened, cfg needed)
KINDS = {
    "loss-inf": ("exception", "had +inf in one input row at step {step}; its loss became non-finite and its own check raised FloatingPointError", {}),
    "float-targets": ("exception", "passed float class targets to F.cross_entropy at step {step} (RuntimeError)", {}),
    "cpu-alloc": ("oom", "asked the CPU allocator for an 8 TiB scratch tensor at step {step} (RuntimeError from DefaultCPUAllocator)", {}),
    "fd-leak": ("exception", "leaked file handles until open() raised OSError EMFILE (Too many open files) at step {step}", {}),
    "shard-index-truncated": ("exception", "wrote and read back a half-written per-rank shard index JSON at start-up (json.JSONDecodeError)", {"shard_index": True}),
    "config-cycle": ("exception", "flattened a config tree that contains itself at start-up (RecursionError)", {"flatten_cfg": True}),
    "sample-unicode": ("exception", "decoded a sample record with a non-UTF-8 header at step {step} (UnicodeDecodeError in the main process)", {}),
    "uploader-thread-error": ("exception", "had its background metadata-upload thread fail (ConnectionResetError) at step {step}; the main loop re-raised it as RuntimeError two steps later", {}),
    "ckpt-dir-missing": ("checkpoint", "skipped creating its checkpoint directory at step {step}; torch.save raised RuntimeError (parent directory does not exist) while the others waited in the barrier", {"ckpt_step": None}),
    "ckpt-prefix-keys": ("checkpoint", "saved its checkpoint with 'module.'-prefixed keys at step {step}; load_state_dict on reload raised RuntimeError (missing/unexpected keys)", {"ckpt_step": None}),
    "flock-deadlock": ("hang-stuck-rank", "blocked forever in fcntl.flock on a lock file it already held through another open file after step {step}; the others timed out in all_reduce", {}),
    "blocking-subprocess": ("hang-stuck-rank", "waited on a child `sleep 100` after step {step}; the others timed out in all_reduce", {}),
    "queue-dead-producer": ("hang-stuck-rank", "blocked in queue.get() after step {step} for a producer thread that had already ended; the others timed out in all_reduce", {}),
    "straggler": ("hang-stuck-rank", "slept 16 s after step {step} (longer than the 10 s process-group timeout); the others timed out in all_reduce", {}),
    "os-exit-zero": ("early-exit", "called os._exit(0) after step {step} while the others kept training", {}),
    "sys-exit-message": ("early-exit", "called sys.exit('<message>') after step {step}: exit code 1, message on stderr, no traceback", {}),
    "watchdog-sigkill": ("sigkill", "was SIGKILLed by a `kill -9` child process it started after step {step}", {}),
    "null-deref": ("sigsegv", "read through a bad pointer with ctypes after step {step} (SIGSEGV)", {}),
    "sigbus-mmap": ("sigbus", "read an mmap of a file truncated underneath it after step {step} (SIGBUS)", {}),
    "c-stack-overflow": ("sigsegv", "overflowed the C stack in repr() of a 3M-deep nested list after step {step} (SIGSEGV)", {}),
    "collate-error": ("dataloader-worker", "had its DataLoader worker's collate_fn raise ValueError on batch {step} (re-raised in the main process)", {"workers": 1}),
    "worker-os-exit": ("dataloader-worker", "had its DataLoader worker call os._exit(1) while fetching the batch of step {step}", {"workers": 1}),
    "worker-timeout": ("dataloader-worker", "had its DataLoader worker block while fetching the batch of step {step}; DataLoader(timeout=4) raised RuntimeError", {"workers": 1}),
    "broadcast-size": ("collective-mismatch", "broadcast a 9-element summary where the others used 6 elements at step {step}", {"bcast": True}),
    "extra-barrier": ("collective-mismatch", "called an extra dist.barrier() after the stats all_reduce at step {step} that no other rank called", {}),
    "allgather-dtype": ("collective-mismatch", "all_gather_into_tensor'ed float32 counts where the others used int64 at step {step}", {"gather_counts": True}),
    "monitored-barrier-eval": ("monitored-barrier", "ran a 40 s validation pass at step {step} and did not reach dist.monitored_barrier(timeout=8s)", {"mon_barrier_step": None}),
    "new-group-skipped": ("collective-mismatch", "skipped the dist.new_group() call that every rank must make (start-up) and went on to the first all_reduce", {"subgroup": True}),
    "node-missing-vocab": ("missing-file", "is on the node whose VOCAB_FILE path does not exist; every rank of that node raised FileNotFoundError at start-up", {"vocab": True}),
    "node-env-missing": ("environment", "is on the node without TRAIN_DATA_ROOT set; every rank of that node raised KeyError at start-up", {"need_env": True}),
    "node-stale-package": ("import", "is on the node with an old `fastkern` package lacking fused_bias_gelu; every rank of that node raised ImportError at start-up", {"need_pkg": True}),
}


def F(kind, node, lr, step=0, attempt=0, delay=0):
    return dict(kind=kind, node=node, lr=lr, step=step, attempt=attempt, delay=delay)


def R(id, scenario, layout, nnodes, nproc, plan=(), *, restarts=0, steps=8, env=None,
      cfg=None, tor=(), note=""):
    return dict(id=id, scenario=scenario, layout=layout, nnodes=nnodes, nproc=nproc,
                plan=list(plan), restarts=restarts, steps=steps, env=dict(env or {}),
                cfg=dict(cfg or {}), tor=list(tor), extra_note=note)


DETAIL = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}

RUNS = [
    R("j01", "loss-nonfinite-floatingpointerror", "console", 1, 4, [F("loss-inf", 0, 2, 3)]),
    R("j02", "ckpt-reload-prefixed-keys", "tee", 1, 3, [F("ckpt-prefix-keys", 0, 1, 4)], cfg={"ckpt_step": 4}),
    R("j03", "shard-index-json-truncated", "log-dir", 1, 4, [F("shard-index-truncated", 0, 3)]),
    R("j04", "sample-header-unicode-decode", "journald", 2, 2, [F("sample-unicode", 1, 0, 2)]),
    R("j05", "config-cycle-recursionerror", "docker-ts", 1, 3, [F("config-cycle", 0, 1)]),
    R("j06", "background-upload-thread-error-later", "per-rank", 1, 4, [F("uploader-thread-error", 0, 2, 2)]),
    R("j07", "fd-leak-emfile", "srun", 2, 2, [F("fd-leak", 0, 1, 3)]),
    R("j08", "cpu-alloc-failure", "mpirun", 2, 3, [F("cpu-alloc", 1, 2, 2)]),
    R("j09", "float-targets-cross-entropy", "kubectl", 2, 2, [F("float-targets", 1, 1, 4)]),
    R("j10", "flock-self-deadlock", "console", 1, 3, [F("flock-deadlock", 0, 0, 2)]),
    R("j11", "blocking-child-process", "ray", 1, 4, [F("blocking-subprocess", 0, 3, 3)]),
    R("j12", "queue-get-dead-producer", "gcp-json", 2, 2, [F("queue-dead-producer", 0, 1, 2)]),
    R("j13", "straggler-past-pg-timeout", "tee", 1, 6, [F("straggler", 0, 4, 2)]),
    R("j14", "os-exit-zero-midloop", "jsonl", 2, 3, [F("os-exit-zero", 1, 1, 3)]),
    R("j15", "sys-exit-with-message", "local-ranks-filter", 1, 4, [F("sys-exit-message", 0, 2, 2)],
      tor=["--tee", "3", "--local-ranks-filter", "0"], note="--local-ranks-filter 0 hides the labelled rank's own output"),
    R("j16", "sigkill-from-child-process", "shipper-iso", 1, 5, [F("watchdog-sigkill", 0, 3, 2)]),
    R("j17", "segv-bad-pointer-ctypes", "pylogging", 1, 3, [F("null-deref", 0, 1, 3)]),
    R("j18", "sigbus-truncated-mmap", "log-dir", 1, 3, [F("sigbus-mmap", 0, 2, 2)]),
    R("j19", "c-stack-overflow-segv", "console", 2, 2, [F("c-stack-overflow", 1, 0, 2)]),
    R("j20", "collate-fn-error-in-worker", "journald", 1, 4, [F("collate-error", 0, 1, 2)]),
    R("j21", "dataloader-worker-os-exit", "syslog", 2, 2, [F("worker-os-exit", 1, 1, 3)]),
    R("j22", "dataloader-timeout", "docker-ts", 1, 3, [F("worker-timeout", 0, 2, 2)]),
    R("j23", "broadcast-size-mismatch", "srun", 2, 2, [F("broadcast-size", 0, 1, 3)]),
    R("j24", "extra-barrier-one-rank", "ray", 1, 4, [F("extra-barrier", 0, 1, 2)]),
    R("j25", "allgather-dtype-mismatch-detail", "tee", 1, 4, [F("allgather-dtype", 0, 3, 2)], env=DETAIL),
    R("j26", "monitored-barrier-slow-validation", "kubectl", 2, 3, [F("monitored-barrier-eval", 1, 0, 3)],
      cfg={"mon_barrier_step": 3}),
    R("j27", "new-group-not-called-by-all", "console", 1, 4, [F("new-group-skipped", 0, 2)]),
    R("j28", "ckpt-save-parent-dir-missing", "gcp-json", 1, 3, [F("ckpt-dir-missing", 0, 1, 4)], cfg={"ckpt_step": 4}),
    R("j29", "two-ranks-alloc-then-dtype", "mpirun", 2, 2,
      [F("cpu-alloc", 1, 0, 3), F("float-targets", 0, 1, 3, delay=0.6)], tor=["--monitor-interval", "3"],
      note="both agents run with --monitor-interval 3 so the second rank's error (0.6 s later, other node) also happens"),
    R("j30", "node-vocab-file-missing", "pdsh", 2, 2, [F("node-missing-vocab", 1, "*")], cfg={"vocab": True}),
    R("j31", "node-env-var-missing", "jsonl", 2, 4, [F("node-env-missing", 1, "*")], cfg={"need_env": True}),
    R("j32", "node-stale-package-version", "srun", 2, 2, [F("node-stale-package", 0, "*")], cfg={"need_pkg": True}),
    # restarts (single agent, fresh worker store per attempt)
    R("j33", "restart-alloc-then-segv", "console", 1, 3,
      [F("cpu-alloc", 0, 1, 2), F("null-deref", 0, 2, 1, attempt=1)], restarts=1, env=FRESH_STORE),
    R("j34", "restart-flock-then-config-cycle", "log-dir", 1, 4,
      [F("flock-deadlock", 0, 3, 2), F("config-cycle", 0, 0, 0, attempt=1)], restarts=1, env=FRESH_STORE,
      cfg={"flatten_cfg": True}),
    R("j35", "restart-worker-exit-then-extra-barrier", "docker-ts", 1, 3,
      [F("worker-os-exit", 0, 2, 2), F("extra-barrier", 0, 1, 2, attempt=1)], restarts=1, env=FRESH_STORE),
    R("j36", "restart-exit-zero-then-unicode", "journald", 1, 4,
      [F("os-exit-zero", 0, 1, 2), F("sample-unicode", 0, 0, 3, attempt=1)], restarts=1, env=FRESH_STORE),
    # healthy
    R("j37", "healthy-plain", "console", 1, 2, note="plain 2-rank run that finishes"),
    R("j38", "healthy-two-nodes", "gcp-json", 2, 2, cfg={"bcast": True, "gather_counts": True},
      note="two agents, extra broadcast and all_gather every step, finishes"),
    R("j39", "healthy-caught-timeout-warning", "ray", 1, 4, cfg={"retry_push": True, "warnings": True},
      note="finishes; rank 0 logs a caught TimeoutError traceback (metrics push retried) and every rank a UserWarning"),
    R("j40", "healthy-workers-checkpoint", "per-rank", 1, 3, cfg={"workers": 1, "ckpt_step": 4, "subgroup": True},
      note="finishes; DataLoader worker per rank, a subgroup all_reduce, checkpoint save and reload at step 4"),
    R("j41", "healthy-eight-ranks", "journald", 1, 8, steps=6, note="8-rank run that finishes"),
]

# ---------------------------------------------------------------- layouts

TWO_PIPES = {"mpirun", "jsonl", "gcp-json"}


def node_names(run):
    if run["layout"] in ("kubectl", "gcp-json"):
        return [f"mlp-train-worker-{i}" for i in range(run["nnodes"])]
    return [f"node{i}" for i in range(run["nnodes"])]


def host_label(run, node_index):
    lay, names = run["layout"], node_names(run)
    if run["nnodes"] == 1:
        return None
    if lay in ("srun", "mpirun"):
        return str(node_index)
    return names[node_index]


def now_iso(prec=6):
    t = dt.datetime.now(dt.timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if prec == 9:
        return s + ".%06d000Z" % t.microsecond
    return s + ".%06dZ" % t.microsecond


class Sink:
    def __init__(self, path):
        self.f = open(path, "wb")
        self.lock = threading.Lock()

    def write(self, b):
        with self.lock:
            self.f.write(b)
            self.f.flush()

    def close(self):
        self.f.close()


def pump(pipe, sink, fmt):
    for line in iter(pipe.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        sink.write(fmt(line))
    pipe.close()


class AgentPid:
    """The torchrun agent's pid (the child of the outer `timeout`), looked up once."""

    def __init__(self, outer):
        self.outer, self.pid = outer, None

    def __str__(self):
        if self.pid is None:
            try:
                with open(f"/proc/{self.outer}/task/{self.outer}/children") as f:
                    kids = f.read().split()
                self.pid = int(kids[0]) if kids else self.outer
            except OSError:
                self.pid = self.outer
        return str(self.pid)


def make_fmt(run, lay, ni, node, pid, stream, jobnum):
    def txt(line):
        return line.decode("utf-8", "replace").rstrip("\n")
    if lay in ("console", "tee", "local-ranks-filter", "log-dir", "per-rank", "pylogging"):
        return lambda l: l
    if lay == "srun":
        return lambda l: f"{ni}: ".encode() + l
    if lay == "pdsh":
        return lambda l: f"{node}: ".encode() + l
    if lay == "mpirun":
        return lambda l: f"[1,{ni}]<{stream}>:".encode() + l
    if lay == "kubectl":
        return lambda l: f"[pod/{node}/pytorch] ".encode() + l
    if lay == "jsonl":
        return lambda l: (json.dumps({"@timestamp": now_iso(), "host": node, "source": stream,
                                      "message": txt(l)}, ensure_ascii=False) + "\n").encode()
    if lay == "gcp-json":
        def g(l):
            rec = {"insertId": "%016x" % random.getrandbits(64),
                   "jsonPayload": {"message": txt(l), "stream": stream},
                   "resource": {"type": "k8s_container",
                                "labels": {"project_id": "ml-sandbox", "location": "us-central1",
                                           "cluster_name": "train-cpu", "namespace_name": "jobs",
                                           "pod_name": node, "container_name": "pytorch"}},
                   "timestamp": now_iso(9), "severity": "ERROR" if stream == "stderr" else "INFO",
                   "logName": f"projects/ml-sandbox/logs/{stream}"}
            return (json.dumps(rec, ensure_ascii=False) + "\n").encode()
        return g
    if lay == "shipper-iso":
        return lambda l: f"{now_iso()} {node} ".encode() + l
    if lay == "syslog":
        return lambda l: (dt.datetime.now().strftime("%b %e %H:%M:%S") + f" {node} torchrun[{pid}]: ").encode() + l
    if lay == "journald":
        return lambda l: (dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")
                          + f" {node} torchrun[{pid}]: ").encode() + l
    if lay == "docker-ts":
        return lambda l: f"{now_iso(9)} ".encode() + l
    if lay == "ray":
        return lambda l: f"(RayTrainWorker pid={pid}, ip=127.0.0.1) ".encode() + l
    raise ValueError(lay)


def sink_name(run, ni, node, jobnum):
    lay, two = run["layout"], run["nnodes"] > 1
    if lay in ("console", "tee", "local-ranks-filter", "log-dir"):
        return f"{node}.log" if two else "console.log"
    if lay in ("per-rank", "pylogging"):
        return f"launcher-{node}.log" if two else "launcher.log"
    if lay == "docker-ts":
        return f"{node}.log" if two else "container.log"
    return {"srun": f"slurm-{jobnum}.out", "pdsh": f"job-{jobnum}.log", "mpirun": f"job-{jobnum}.out",
            "kubectl": "pods.log", "jsonl": "logs.jsonl", "gcp-json": "gke-logs.json",
            "shipper-iso": "job.log", "syslog": "messages.log", "journald": "journal.txt",
            "ray": "ray-job-driver.log"}[lay]


def port_is_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as so:
        try:
            so.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def launch(run, rdir, port, torchrun, side):
    job = tempfile.mkdtemp(prefix="job-", dir="/tmp")
    shutil.copy(TRAIN, os.path.join(job, "train.py"))
    names = node_names(run)
    lay = run["layout"]
    jobnum = str(random.randint(100000, 999999))
    rdzv_id = str(random.randint(10000, 99999))
    cfg = {"steps": run["steps"], "pg_timeout": 10, "layout": lay, "workdir": job,
           "rank_dir": os.path.join(job, "out"), "pylog_name": "train.log"}
    for p in run["plan"]:
        for k, v in KINDS[p["kind"]][2].items():
            if v is not None and k not in cfg:
                cfg[k] = v
    cfg.update(run["cfg"])
    cfg["plan"] = [dict(p, node=names[p["node"]]) for p in run["plan"]]
    sinks, threads, procs = {}, [], []
    for ni, node in enumerate(names):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCH", "PYTHON", "OMP_", "GLOO", "NCCL", "VOCAB", "TRAIN_"))}
        env.update(PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo", NODE_NAME=node,
                   JOB_SIDE_DIR=side)
        env.update(run["env"])
        c = dict(cfg)
        if lay == "pylogging" and run["nnodes"] > 1:
            c["pylog_name"] = f"train-{node}.log"
        env["JOB_CFG"] = json.dumps(c)
        kinds = {p["kind"]: p for p in run["plan"]}
        if cfg.get("vocab"):
            vf = os.path.join(job, "assets", "vocab.txt")
            os.makedirs(os.path.dirname(vf), exist_ok=True)
            with open(vf, "w") as f:
                f.write("\n".join(["<pad>", "<unk>", "the", "of", "and"]) + "\n")
            bad = kinds.get("node-missing-vocab")
            env["VOCAB_FILE"] = vf if not (bad and bad["node"] == ni) else "/mnt/shared/assets/vocab.txt"
        if cfg.get("need_env"):
            bad = kinds.get("node-env-missing")
            if not (bad and bad["node"] == ni):
                env["TRAIN_DATA_ROOT"] = os.path.join(job, "data")
        if cfg.get("need_pkg"):
            site = tempfile.mkdtemp(prefix="pylib-", dir=job)
            bad = kinds.get("node-stale-package")
            with open(os.path.join(site, "fastkern.py"), "w") as f:
                f.write('__version__ = "0.3.1"\n\n\ndef fused_bias_act(x, b):\n    return (x + b).relu()\n')
                if not (bad and bad["node"] == ni):
                    f.write('\n\ndef fused_bias_gelu(x, b):\n    import torch.nn.functional as F\n'
                            '    return F.gelu(x + b)\n')
            env["PYTHONPATH"] = site
        cmd = ["timeout", "-k", "5", "90", torchrun, "--nnodes", str(run["nnodes"]),
               "--nproc-per-node", str(run["nproc"]), "--max-restarts", str(run["restarts"]),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rdzv_id,
               "--local-addr", "127.0.0.1"]
        if run["nnodes"] > 1:
            cmd += ["--rdzv-conf", f"is_host={'true' if ni == 0 else 'false'}"]
        if lay == "tee":
            cmd += ["--tee", "3"]
        elif lay == "log-dir":
            cmd += ["--log-dir", os.path.join(job, "logs", node) if run["nnodes"] > 1 else os.path.join(job, "logs"),
                    "--redirects", "3"]
        cmd += run["tor"]
        cmd += ["train.py"]
        two = lay in TWO_PIPES
        p = subprocess.Popen(cmd, cwd=job, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE if two else subprocess.STDOUT)
        sname = sink_name(run, ni, node, jobnum)
        if sname not in sinks:
            sinks[sname] = Sink(os.path.join(rdir, sname))
        apid = AgentPid(p.pid)
        streams = [("stdout", p.stdout), ("stderr", p.stderr)] if two else [("stdout", p.stdout)]
        for stream, pipe in streams:
            th = threading.Thread(target=pump, args=(pipe, sinks[sname],
                                                     make_fmt(run, lay, ni, node, apid, stream, jobnum)))
            th.start()
            threads.append(th)
        procs.append(p)
        if ni == 0 and run["nnodes"] > 1:
            time.sleep(1.0)
    rcs = [p.wait() for p in procs]
    for th in threads:
        th.join(timeout=30)
    for s in sinks.values():
        s.close()
    if lay == "log-dir":
        shutil.copytree(os.path.join(job, "logs"), os.path.join(rdir, "logs"))
    if lay in ("per-rank", "pylogging") and os.path.isdir(cfg["rank_dir"]):
        for fn in sorted(os.listdir(cfg["rank_dir"])):
            shutil.copy(os.path.join(cfg["rank_dir"], fn), os.path.join(rdir, fn))
    shutil.rmtree(job, ignore_errors=True)
    return rcs


def files_of(rdir):
    ents = sorted(os.listdir(rdir))
    first = [e for e in ents if e.startswith(("console", "launcher", "node", "container"))]
    return first + [e for e in ents if e not in first]


def run_once(run, out, torchrun, idx):
    rid = run["id"]
    rdir = os.path.join(out, rid)
    names = node_names(run)
    port0 = PORT_BASE + 10 * idx
    port = next((p for p in range(port0, port0 + 10) if port_is_free(p)), None)
    if port is None:
        raise RuntimeError(f"{rid}: no free port in {port0}..{port0 + 9}")
    if os.path.exists(rdir):
        shutil.rmtree(rdir)
    os.makedirs(rdir)
    side = tempfile.mkdtemp(prefix="side-")
    t0 = time.time()
    rcs = launch(run, rdir, port, torchrun, side)
    elapsed = time.time() - t0
    workers, fired, done = {}, [], set()
    for fn in os.listdir(side):
        if not fn.endswith(".json"):
            continue
        with open(os.path.join(side, fn)) as f:
            rec = json.load(f)
        if fn.startswith("worker_"):
            workers[(rec["node"], rec["local_rank"], rec["attempt"])] = rec
        elif fn.startswith("fired_"):
            fired.append(rec)
        elif fn.startswith("done_"):
            done.add((rec["rank"], fn))
    shutil.rmtree(side, ignore_errors=True)
    fired.sort(key=lambda r: (r["attempt"], r["mono"]))
    problems = []
    ws = run["nnodes"] * run["nproc"]
    primary = [p for p in run["plan"] if p["attempt"] == 0]
    if primary:
        pp = primary[0]
        if not fired:
            problems.append("nothing fired")
            culprit = {"rank": None, "host": None, "attempt": None}
        else:
            first = fired[0]
            ok = (first["attempt"] == 0 and first["node"] == names[pp["node"]] and first["kind"] == pp["kind"]
                  and (pp["lr"] == "*" or first["local_rank"] == pp["lr"]))
            if not ok:
                problems.append(f"first fired is not the planned one: {first}")
            culprit = {"rank": first["rank"], "host": host_label(run, pp["node"]), "attempt": 0}
        if all(rc == 0 for rc in rcs):
            problems.append(f"faulty run exited 0: {rcs}")
        cause = KINDS[pp["kind"]][0]
        where = (f"global rank {culprit['rank']} ({names[pp['node']]}, local rank {fired[0]['local_rank'] if fired else '?'})"
                 if run["nnodes"] > 1 else f"rank {culprit['rank']}")
        note = f"{where} {KINDS[pp['kind']][1].format(step=pp['step'])}"
        if fired and fired[0].get("where", "rank") != "rank":
            note += f" (the record came from its {fired[0]['where']})"
        if pp["lr"] == "*":
            node_ranks = sorted(r["rank"] for r in fired if r["node"] == names[pp["node"]] and r["attempt"] == 0)
            note += f"; ranks of that node that failed: {node_ranks}; labelled rank = first to fire"
        for p2 in primary[1:]:
            r2 = [r for r in fired if r["kind"] == p2["kind"] and r["attempt"] == 0]
            if r2:
                note += (f"; second error: global rank {r2[0]['rank']} ({r2[0]['node']}) "
                         f"{KINDS[p2['kind']][1].format(step=p2['step'])}, "
                         f"{r2[0]['mono'] - fired[0]['mono']:.2f} s later")
            else:
                problems.append("second planned error did not happen")
        later = [p for p in run["plan"] if p["attempt"] > 0]
        for p2 in later:
            r2 = [r for r in fired if r["kind"] == p2["kind"] and r["attempt"] == p2["attempt"]]
            if r2:
                note += (f"; attempt {p2['attempt']} (after torchrun restarted the workers): global rank "
                         f"{r2[0]['rank']} {KINDS[p2['kind']][1].format(step=p2['step'])}")
            else:
                problems.append(f"attempt-{p2['attempt']} behaviour did not fire")
        if run["restarts"]:
            note = "Attempt 0: " + note
        scenario = run["scenario"]
    else:
        culprit = {"rank": None, "host": None, "attempt": None}
        cause = "healthy"
        note = f"Nothing planned: {run['extra_note']}"
        scenario = run["scenario"]
        if any(rc != 0 for rc in rcs):
            problems.append(f"healthy run exited {rcs}")
        if len({r for r, _ in done}) != ws:
            problems.append(f"only {len(done)} of {ws} ranks finished")
        if fired:
            problems.append("something fired in a healthy run")
    if run["extra_note"] and primary:
        note += f"; {run['extra_note']}"
    note += f". Agent exit codes {rcs}."
    if any(rc == 124 for rc in rcs):
        note += " (124 = ended by the outer timeout)"
    item = {"id": rid, "files": files_of(rdir), "layout": run["layout"], "ranks": ws,
            "agents": run["nnodes"], "scenario": scenario, "culprit": culprit, "cause": cause,
            "note": note}
    return item, rcs, elapsed, problems


def run_one(run, out, torchrun, idx):
    hist = []
    for n in range(2):
        item, rcs, el, problems = run_once(run, out, torchrun, idx)
        hist.append({"try": n + 1, "rcs": rcs, "elapsed": round(el, 1), "problems": problems})
        if not problems:
            return item, hist
        print(f"{run['id']}: try {n + 1} failed checks: {problems}", flush=True)
    shutil.rmtree(os.path.join(out, run["id"]), ignore_errors=True)
    return None, hist


def q(v):
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v, ensure_ascii=False)


def write_manifest(path, items):
    lines = ["# Sealed batch J: labels from construction (make_runs.py + train.py side files).",
             "# culprit.rank = global rank whose planned behaviour fired first (lowest attempt first), null if healthy;",
             "# culprit.host = that rank's node as the files name it (null for one agent); culprit.attempt = 0-based.",
             ""]
    for it in items:
        lines.append(f"- id: {q(it['id'])}")
        lines.append("  files: [" + ", ".join(q(f) for f in it["files"]) + "]")
        for k in ("layout", "ranks", "agents", "scenario"):
            lines.append(f"  {k}: {q(it[k])}")
        c = it["culprit"]
        lines.append(f"  culprit: {{rank: {q(c['rank'])}, host: {q(c['host'])}, attempt: {q(c['attempt'])}}}")
        lines.append(f"  cause: {q(it['cause'])}")
        lines.append(f"  note: {q(it['note'])}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--torchrun", default=os.environ.get("TORCHRUN", "/tmp/torchvenv/bin/torchrun"))
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for r in RUNS:
            print(r["id"], r["scenario"], r["layout"], f"{r['nnodes']}x{r['nproc']}", r["plan"])
        return
    os.makedirs(a.out, exist_ok=True)
    only = [s for s in a.only.split(",") if s]
    chosen = [r for r in RUNS if not only or r["id"] in only]
    idx = {r["id"]: i + 1 for i, r in enumerate(RUNS)}
    man = os.path.join(a.out, "manifest.yaml")
    genlog_path = os.path.join(tempfile.gettempdir(), "sealed-j-genlog.json")  # tries per run, outside DIR
    items = {}
    if only and os.path.exists(man):
        import yaml
        with open(man) as f:
            for it in yaml.safe_load(f) or []:
                items[it["id"]] = it
    genlog = {}
    if os.path.exists(genlog_path):
        with open(genlog_path) as f:
            genlog = json.load(f)
    order = [r["id"] for r in RUNS]
    lock = threading.Lock()
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(run_one, r, a.out, a.torchrun, idx[r["id"]]): r for r in chosen}
        for fut in cf.as_completed(futs):
            r = futs[fut]
            try:
                item, hist = fut.result()
            except Exception as e:  # noqa: BLE001
                print(f"{r['id']}: ERROR {e!r}", flush=True)
                continue
            with lock:
                genlog[r["id"]] = hist
                if item is None:
                    items.pop(r["id"], None)
                    print(f"{r['id']}: DROPPED", flush=True)
                else:
                    items[r["id"]] = item
                    c = item["culprit"]
                    print(f"{r['id']} {r['scenario']:40s} rc={hist[-1]['rcs']} {hist[-1]['elapsed']}s "
                          f"rank={c['rank']} host={c['host']} tries={len(hist)}", flush=True)
                write_manifest(man, [items[i] for i in order if i in items])
                with open(genlog_path, "w") as f:
                    json.dump(genlog, f, indent=1)
    write_manifest(man, [items[i] for i in order if i in items])


if __name__ == "__main__":
    main()
