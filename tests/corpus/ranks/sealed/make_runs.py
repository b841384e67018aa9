#!/usr/bin/env python3
"""Regenerate the sealed multi-rank corpus: real torchrun jobs (PyTorch CPU, gloo).

    python make_runs.py --out DIR            # every run, then DIR/manifest.yaml
    python make_runs.py --out DIR --only run-07

The choice of scenarios is fixed by SEED.  Each run's label (culprit rank, host,
attempt, cause) is written from the run's own parameters; the node a rank ran
on is taken from the side files train.py writes (outside the run folder), which
are checked and then deleted.  No log diagnoser is ever consulted.

Environment: TORCHRUN (default /tmp/torchvenv/bin/torchrun), JOBS (default 2),
PORT_BASE (default 31000).  All traffic stays on 127.0.0.1.
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
TORCHRUN = os.environ.get("TORCHRUN", "/tmp/torchvenv/bin/torchrun")
PORT_BASE = int(os.environ.get("PORT_BASE", "31000"))
SEED = 20261204
OUTER_TIMEOUT = 150

LAYOUTS = ["console", "tee", "log-dir", "local-ranks-filter", "per-rank-files",
           "srun-prefix", "kubectl-prefix", "json-lines"]
COMBOS = ["log-dir+tee", "srun-prefix+tee", "kubectl-prefix+local-ranks-filter",
          "json-lines+tee", "per-rank-files+local-ranks-filter"]

# (cause, variant) list: one run each.  "restart" entries carry a plan per attempt.
FAULTS = (
    [("exception", v) for v in ["index-list", "embedding", "matmul-shape", "zerodiv", "keyerror",
                                "assert", "batch-size", "filenotfound", "cat-dim", "typeerror",
                                "valueerror"]]
    + [("oom-like-exception", v) for v in ["empty", "zeros", "empty", "zeros"]]
    + [("hang-stuck-rank", v) for v in ["lock", "fifo", "eval", "queue", "join", "lock", "fifo"]]
    + [("early-exit", v) for v in ["sys-exit", "os-exit", "return", "return", "sys-exit", "os-exit"]]
    + [("sigkill", v) for v in ["step", "after-backward", "ckpt", "step", "ckpt", "after-backward"]]
    + [("sigsegv", v) for v in ["faulthandler", "ctypes", "faulthandler", "ctypes", "ctypes"]]
    + [("dataloader-worker-killed", v) for v in ["sigkill", "sigsegv", "exit1", "sigkill", "sigbus"]]
    + [("collective-mismatch", v) for v in ["shape", "dtype", "broadcast", "all-gather", "extra",
                                            "skip", "shape"]]
    + [("missing-module", v) for v in ["all-ranks", "all-ranks", "all-ranks", "local-zero-builds",
                                       "local-zero-builds"]]
    + [("monitored-barrier", v) for v in ["default", "wait-all", "default", "wait-all", "default"]]
    + [("other", v) for v in ["abort", "exit-code"]]
    + [("restart", v) for v in [
        [("exception", "keyerror"), ("sigkill", "step")],
        [("sigkill", "after-backward"), ("exception", "index-list"), ("exception", "zerodiv")],
        [("hang-stuck-rank", "lock"), ("exception", "matmul-shape")],
        [("exception", "assert"), None],
        [("early-exit", "sys-exit"), ("sigsegv", "ctypes")],
        [("oom-like-exception", "empty"), ("exception", "filenotfound")],
        [("dataloader-worker-killed", "sigkill"), ("hang-stuck-rank", "queue")],
    ]]
    + [("healthy", v) for v in ["plain", "sched-warning", "handled-exception", "find-unused",
                                "many-workers", "log-all", "plain", "handled-exception",
                                "detail-debug"]]
)

VARIANT_TEXT = {
    "index-list": "raises IndexError indexing a Python list with a corrupted token id",
    "embedding": "raises IndexError from nn.Embedding on an out-of-range token id",
    "matmul-shape": "feeds a batch with one extra feature column, so the Linear layer raises a shape-mismatch RuntimeError",
    "zerodiv": "raises ZeroDivisionError computing throughput",
    "keyerror": "raises KeyError looking up a missing batch key",
    "assert": "fails an assert on a non-finite loss",
    "batch-size": "calls cross_entropy with one target fewer than inputs (ValueError)",
    "filenotfound": "raises FileNotFoundError opening a missing shard index",
    "cat-dim": "concatenates tensors of mismatched width (RuntimeError)",
    "typeerror": "raises TypeError adding 1 to a missing (None) config value",
    "valueerror": "raises ValueError from int() on a non-numeric string",
    "empty": "calls torch.empty on a multi-terabyte shape and gets the real DefaultCPUAllocator error",
    "zeros": "calls torch.zeros on a multi-terabyte shape and gets the real DefaultCPUAllocator error",
    "lock": "sleeps 300 s while holding the checkpoint lock",
    "fifo": "blocks opening a FIFO for reading (no writer ever comes)",
    "eval": "runs a 300 s evaluation loop",
    "queue": "blocks forever on an empty queue.get()",
    "join": "joins a thread that sleeps 300 s",
    "sys-exit": "calls sys.exit(0)",
    "os-exit": "calls os._exit(0)",
    "return": "leaves the training loop and returns normally (exit 0)",
    "step": "SIGKILLs itself at the start of the step",
    "after-backward": "SIGKILLs itself right after optimizer.step()",
    "ckpt": "SIGKILLs itself inside the checkpoint writer",
    "faulthandler": "segfaults via faulthandler._sigsegv()",
    "ctypes": "segfaults via ctypes.string_at(0)",
    "sigkill:dl": "has a DataLoader worker SIGKILL itself",
    "sigsegv:dl": "has a DataLoader worker segfault (ctypes.string_at(0))",
    "exit1:dl": "has a DataLoader worker call os._exit(1)",
    "sigbus:dl": "has a DataLoader worker send itself SIGBUS",
    "shape": "all_reduces a 2-element tensor where the others all_reduce 1 element",
    "dtype": "all_reduces a float64 tensor where the others use float32",
    "broadcast": "calls broadcast where the others call all_reduce",
    "all-gather": "calls all_gather where the others call all_reduce",
    "extra": "issues one extra all_reduce before the common one",
    "skip": "skips the metric all_reduce the others issue",
    "abort": "calls os.abort() (SIGABRT)",
    "exit-code": "prints a one-line error and exits with code 3",
}


def plan_entry(cause, variant, rank, step):
    return {"kind": cause, "variant": variant, "rank": rank, "step": step}


def build_specs():
    rng = random.Random(SEED)
    faults = list(FAULTS)
    rng.shuffle(faults)
    n = len(faults)
    layouts = []
    while len(layouts) < n - len(COMBOS):
        layouts.extend(LAYOUTS)
    layouts = layouts[: n - len(COMBOS)] + COMBOS
    rng.shuffle(layouts)
    pools = [("node-a", "node-b"), ("worker-0", "worker-1"), ("gpu-node-07", "gpu-node-12"),
             ("trn-a01", "trn-a02"), ("host-3", "host-4")]
    specs = []
    for i, ((cause, variant), layout) in enumerate(zip(faults, layouts)):
        run_id = f"run-{i + 1:02d}"
        base = layout.split("+")[0]
        two = (cause == "missing-module"
               or rng.random() < (0.7 if base in ("srun-prefix", "kubectl-prefix") else 0.35))
        if cause == "restart" and variant[-1] is None:
            two = False  # a 2-agent re-rendezvous on one host cannot recover here (gloo reconnect fails)
        world = rng.randint(2, 8)
        if two:
            world = max(world, 3 if cause != "missing-module" else 2)
            if cause == "missing-module" and variant == "all-ranks":
                nproc = [world - 1, 1]
            elif cause == "missing-module":
                world = max(world, 4)
                k = rng.randint(2, world - 2)
                nproc = [world - k, k]
            else:
                k = rng.randint(1, world - 1)
                nproc = [world - k, k]
        else:
            nproc = [world]
        steps = rng.randint(5, 8)
        job = rng.choice(["llm-ft", "resnet-ddp", "bert-pre", "vit-train", "rec-dlrm"]) + f"-{rng.randint(100, 999)}"
        if base == "kubectl-prefix":
            nodes = [f"{job}-worker-{j}" for j in range(len(nproc))]
        else:
            nodes = list(rng.choice(pools)[: len(nproc)])
        cfg = {"batch": 8, "steps": steps,
               "pg_timeout": rng.randint(12, 18) + (4 if world >= 6 else 0) + (3 if two else 0),
               "mb_timeout": 6, "ddp": rng.random() < 0.75,
               "use_record": rng.random() < 0.35, "faulthandler": False,
               "step_sleep": 0.2, "workers": 0}
        env = {}
        plan = {}
        max_restarts = 0

        def pick_rank(kind, avoid=()):
            choices = [r for r in range(world) if r not in avoid] or \
                [r for r in range(world) if r != avoid[-1]]
            if kind == "monitored-barrier":
                choices = [r for r in choices if r != 0] or [1]
            return rng.choice(choices)

        def one(kind, var, attempt, avoid=()):
            r = pick_rank(kind, avoid)
            st = rng.randint(1, steps - 2)
            if kind == "dataloader-worker-killed":
                cfg["workers"] = 2
            if kind == "sigsegv" and var == "faulthandler" or (kind == "sigsegv" and rng.random() < 0.5):
                cfg["faulthandler"] = True
            if kind == "monitored-barrier":
                cfg["mb_timeout"] = rng.randint(5, 8)
            return plan_entry(kind, var, r, st)

        if cause == "restart":
            used = []
            for a, item in enumerate(variant):
                if item is None:
                    continue
                e = one(item[0], item[1], a, avoid=used)
                used.append(e["rank"])
                plan[str(a)] = e
            max_restarts = len(variant) - 1
            # half of the 1-agent restart jobs prefix the store per attempt, so later attempts
            # get as far as their own planned fault; the others keep torch's default
            if not two and (variant[-1] is None or rng.random() < 0.5):
                cfg["attempt_store_prefix"] = True
            label_cause = plan["0"]["kind"]
            scen = "restart: " + " then ".join(v[0] if v else "recovers" for v in variant)
        elif cause == "healthy":
            label_cause = "healthy"
            scen = f"healthy/{variant}"
            if variant in ("sched-warning", "handled-exception", "find-unused"):
                cfg["healthy_extra"] = variant
            if variant == "find-unused":
                cfg["ddp"] = True
                cfg["find_unused"] = True
            if variant == "many-workers":
                cfg["workers"] = 3
            if variant == "log-all":
                cfg["log_all"] = True
            if variant == "detail-debug":
                env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
                cfg["ddp"] = False  # DDP + DETAIL segfaults at construction in this build
        elif cause == "missing-module":
            label_cause = cause
            scen = f"missing-module/{variant}"
            plan["0"] = {"kind": cause, "variant": variant, "rank": None, "step": 0}
        else:
            label_cause = cause
            scen = f"{cause}/{variant}"
            plan["0"] = one(cause, variant, 0)
            if cause == "collective-mismatch" and (i % 2 == 0):
                env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
                cfg["ddp"] = False  # DDP + DETAIL segfaults at construction in this build
                scen += "+detail"
        if base in ("per-rank-files",):
            cfg["per_rank"] = True
        fr = cause != "restart" and rng.random() < 0.2
        specs.append({
            "id": run_id, "layout": layout, "nproc": nproc, "nodes": nodes, "world": world,
            "cause": label_cause, "kind": cause, "variant": variant, "scenario": scen,
            "cfg": cfg, "plan": plan, "env": env, "max_restarts": max_restarts,
            "fr": fr, "job": job, "rdzv": "c10d" if (two or rng.random() < 0.5) else "static",
            "console_too": rng.random() < 0.5, "kube_concat": rng.random() < 0.5,
            "port": PORT_BASE + 20 * i,
        })
    return specs


# ------------------------------------------------------------------ running
class Sink:
    """Collects agent output the way the layout's log system would."""

    def __init__(self, spec, run_dir):
        self.spec = spec
        self.run_dir = run_dir
        self.lock = threading.Lock()
        base = spec["layout"].split("+")[0]
        self.base = base
        self.files = {}
        if base == "srun-prefix":
            self.out = open(os.path.join(run_dir, self.srun_name()), "wb")
        elif base == "json-lines":
            self.out = open(os.path.join(run_dir, "logs.jsonl"), "wb")
        elif base == "kubectl-prefix":
            self.pods = [open(os.path.join(run_dir, f"{n}.log"), "wb") for n in spec["nodes"]]

    def srun_name(self):
        return f"slurm-{int(self.spec['port']) * 7 % 900000 + 100000}.out"

    def line(self, agent, stream, data):
        with self.lock:
            if self.base == "srun-prefix":
                self.out.write(f"{agent}: ".encode() + data)
                self.out.flush()
            elif self.base == "json-lines":
                text = data.decode("utf-8", "replace")
                if text.endswith("\n"):
                    text = text[:-1]
                rec = {"time": datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z"),
                       "host": self.spec["nodes"][agent], "stream": stream, "log": text}
                self.out.write((json.dumps(rec) + "\n").encode())
                self.out.flush()
            elif self.base == "kubectl-prefix":
                pod = self.spec["nodes"][agent]
                self.pods[agent].write(f"[pod/{pod}/pytorch] ".encode() + data)
                self.pods[agent].flush()

    def close(self):
        if self.base in ("srun-prefix", "json-lines"):
            self.out.close()
        elif self.base == "kubectl-prefix":
            for f in self.pods:
                f.close()


def reader(pipe, fn):
    for raw in iter(pipe.readline, b""):
        fn(raw)
    pipe.close()


def agent_cmd(spec, agent, run_dir, work):
    layout = spec["layout"]
    parts = layout.split("+")
    nn = len(spec["nproc"])
    cmd = ["timeout", "-k", "10", str(OUTER_TIMEOUT), TORCHRUN,
           "--nnodes", str(nn), "--nproc-per-node", str(spec["nproc"][agent])]
    if spec["rdzv"] == "c10d":
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{spec['port']}",
                "--rdzv-id", spec["job"], "--local-addr", "127.0.0.1"]
    else:
        cmd += ["--master-addr", "127.0.0.1", "--master-port", str(spec["port"])]
    if spec["max_restarts"]:
        cmd += ["--max-restarts", str(spec["max_restarts"])]
    if "tee" in parts:
        cmd += ["--tee", "3"]
    if "local-ranks-filter" in parts:
        cmd += ["--local-ranks-filter", "0"]
    if "log-dir" in parts:
        d = os.path.join(run_dir, "logs") if nn == 1 else os.path.join(run_dir, "logs", spec["nodes"][agent])
        cmd += ["--log-dir", d]
        if "tee" not in parts:
            cmd += ["--redirects", "3"]
    cmd.append(TRAIN)
    return cmd


def run_one(spec, out_dir, work_root):
    t0 = time.time()
    run_dir = os.path.join(out_dir, spec["id"])
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    work = os.path.join(work_root, spec["id"])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    side = os.path.join(work, "side")
    cfg = dict(spec["cfg"])
    cfg.update({"side_dir": side, "work_dir": work, "plan": spec["plan"]})
    if cfg.pop("per_rank", False):
        cfg["per_rank_dir"] = run_dir
    if spec["fr"]:
        os.makedirs(os.path.join(run_dir, "fr"))
        cfg["fr_prefix"] = os.path.join(run_dir, "fr", "comm_lib_trace_rank_")
    cfg_path = os.path.join(work, "cfg.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    site = os.path.join(work, f"site-{spec['nodes'][0]}")
    os.makedirs(site)
    with open(os.path.join(site, "fused_ops.py"), "w") as f:
        f.write("def fused_sgd_step(params, lr):\n    for p in params:\n        p.data.add_(p.grad, alpha=-lr)\n")

    sink = Sink(spec, run_dir)
    base = sink.base
    nn = len(spec["nproc"])
    procs, threads, opened = [], [], []
    for agent in range(nn):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.update({"PYTHONUNBUFFERED": "1", "GLOO_SOCKET_IFNAME": "lo", "TRAIN_CFG": cfg_path,
                    "NODE_NAME": spec["nodes"][agent]})
        env.update(spec["env"])
        if spec["kind"] == "missing-module" and agent == 0:
            env["PYTHONPATH"] = site
        if spec["fr"]:
            env["TORCH_FR_BUFFER_SIZE"] = "2000"
            env["TORCH_FR_DUMP_TEMP_FILE"] = cfg["fr_prefix"]
        cmd = agent_cmd(spec, agent, run_dir, work)
        if spec["max_restarts"] and nn == 2:
            cmd[3] = "100"  # a surviving agent may wait in re-rendezvous; stop it sooner
        if base in ("console", "tee", "local-ranks-filter", "per-rank-files", "log-dir"):
            if base == "log-dir" and not spec["console_too"] and "tee" not in spec["layout"]:
                path = os.path.join(work, f"agent{agent}.console")  # not an input
            else:
                path = os.path.join(run_dir, "console.log" if nn == 1 else f"{spec['nodes'][agent]}.log")
            f = open(path, "wb")
            opened.append(f)
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work,
                                 stdin=subprocess.DEVNULL)
        elif base == "json-lines":
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                 cwd=work, stdin=subprocess.DEVNULL)
            for stream, pipe in (("stdout", p.stdout), ("stderr", p.stderr)):
                t = threading.Thread(target=reader, args=(pipe, (lambda a, s: lambda d: sink.line(a, s, d))(agent, stream)))
                t.start()
                threads.append(t)
        else:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                 cwd=work, stdin=subprocess.DEVNULL)
            t = threading.Thread(target=reader, args=(p.stdout, (lambda a: lambda d: sink.line(a, "stdout", d))(agent)))
            t.start()
            threads.append(t)
        procs.append(p)
        if nn == 2 and agent == 0:
            time.sleep(0.3)
    rcs = [p.wait() for p in procs]
    for t in threads:
        t.join()
    for f in opened:
        f.close()
    sink.close()
    # stray workers (should not exist after torchrun exits): kill by our own pids only
    for path in glob.glob(os.path.join(side, "a*_r*_p*.json")):
        try:
            pid = json.load(open(path))["pid"]
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, ValueError, KeyError, OSError):
            pass
    if base == "kubectl-prefix" and spec["kube_concat"]:
        with open(os.path.join(run_dir, "pods.log"), "wb") as out:
            for n in spec["nodes"]:
                p = os.path.join(run_dir, f"{n}.log")
                with open(p, "rb") as f:
                    out.write(f.read())
                os.remove(p)
    elapsed = time.time() - t0
    entry = label(spec, run_dir, side, rcs)
    entry["_elapsed"] = round(elapsed, 1)
    shutil.rmtree(work, ignore_errors=True)
    return entry


def load_side(side):
    starts, fired = [], []
    for p in glob.glob(os.path.join(side, "*.json")):
        d = json.load(open(p))
        (fired if os.path.basename(p).startswith("fired_") else starts).append(d)
    return starts, fired


def host_label(spec, node):
    base = spec["layout"].split("+")[0]
    nn = len(spec["nproc"])
    if base in ("kubectl-prefix", "json-lines"):
        return node
    if base == "srun-prefix":
        return str(spec["nodes"].index(node)) if nn == 2 else None
    return node if nn == 2 else None


def input_files(spec, run_dir):
    base = spec["layout"].split("+")[0]
    nn = len(spec["nproc"])
    names = []
    if base in ("console", "tee", "local-ranks-filter"):
        names = ["console.log"] if nn == 1 else [f"{n}.log" for n in spec["nodes"]]
    elif base == "log-dir":
        if spec["console_too"] or "tee" in spec["layout"]:
            names = ["console.log"] if nn == 1 else [f"{n}.log" for n in spec["nodes"]]
        names.append("logs")
    elif base == "per-rank-files":
        names = ["console.log"] if nn == 1 else [f"{n}.log" for n in spec["nodes"]]
        names += [f"rank_{r}.log" for r in range(spec["world"])]
    elif base == "srun-prefix":
        names = [f for f in os.listdir(run_dir) if f.startswith("slurm-")]
    elif base == "kubectl-prefix":
        names = ["pods.log"] if spec["kube_concat"] else [f"{n}.log" for n in spec["nodes"]]
    elif base == "json-lines":
        names = ["logs.jsonl"]
    if spec["fr"] and os.path.isdir(os.path.join(run_dir, "fr")):
        names += sorted(os.path.join("fr", f) for f in os.listdir(os.path.join(run_dir, "fr")))
    return names


def label(spec, run_dir, side, rcs):
    starts, fired = load_side(side)
    problems = []
    att0 = {}
    for d in sorted(starts, key=lambda d: d["t"]):
        if d["attempt"] == 0 and d["rank"] not in att0:
            att0[d["rank"]] = d
    if sorted(att0) != list(range(spec["world"])):
        problems.append(f"attempt-0 ranks seen: {sorted(att0)}")
    nodes_used = {d["node"] for d in att0.values()}
    if len(nodes_used) != len(spec["nproc"]):
        problems.append(f"nodes seen {sorted(nodes_used)}")
    culprit = {"rank": None, "host": None, "attempt": None}
    p0 = spec["plan"].get("0")
    if spec["cause"] == "healthy":
        if any(rc != 0 for rc in rcs):
            problems.append(f"healthy run exited {rcs}")
        note = f"all {spec['world']} ranks train {spec['cfg']['steps']} steps and finish"
        extra = {"sched-warning": "; lr_scheduler.step() is called before optimizer.step(), so torch warns",
                 "handled-exception": "; each rank catches FileNotFoundError for a missing resume checkpoint and prints its traceback",
                 "find-unused": "; DDP has find_unused_parameters=True with no unused parameters, so torch warns",
                 "many-workers": "; DataLoader uses 3 workers on a 2-CPU machine, so torch warns",
                 "log-all": "; every rank logs its loss",
                 "detail-debug": "; TORCH_DISTRIBUTED_DEBUG=DETAIL is set"}.get(spec["variant"], "")
        note += extra
    elif spec["kind"] == "missing-module":
        bad_node = spec["nodes"][1]
        bad = sorted(r for r, d in att0.items() if d["node"] == bad_node)
        if spec["variant"] == "all-ranks":
            cands = bad
        else:
            cands = [r for r in bad if att0[r]["local_rank"] == 0]
        if not cands:
            problems.append("no rank on the failing node")
            r = None
        else:
            r = cands[0]
        if spec["variant"] == "all-ranks" and len(bad) != 1:
            problems.append(f"expected one rank on {bad_node}, got {bad}")
        culprit = {"rank": r, "host": host_label(spec, bad_node), "attempt": 0}
        if spec["variant"] == "all-ranks":
            note = (f"fused_ops exists only on {spec['nodes'][0]}; the single rank {r} on {bad_node} "
                    f"fails its import with ModuleNotFoundError right after init_process_group")
        else:
            note = (f"fused_ops exists only on {spec['nodes'][0]}; local rank 0 of each node imports it "
                    f"while the others wait in a barrier, so rank {r} (local rank 0 on {bad_node}) "
                    f"raises ModuleNotFoundError")
        if any(rc == 0 for rc in rcs):
            problems.append(f"failing run exited {rcs}")
    else:
        r = p0["rank"]
        node = att0.get(r, {}).get("node")
        if node is None:
            problems.append(f"culprit rank {r} never started")
        culprit = {"rank": r, "host": host_label(spec, node) if node else None, "attempt": 0}
        if not any(f["rank"] == r and f["attempt"] == 0 for f in fired):
            problems.append(f"culprit rank {r} never reached its fault point")
        note = describe(p0, spec)
        if spec["kind"] == "restart":
            later = [spec["plan"].get(str(a)) for a in range(1, spec["max_restarts"] + 1)]
            bits = []
            for a, e in enumerate(later, start=1):
                started = any(d["attempt"] == a for d in starts)
                if not started:
                    bits.append(f"attempt {a} never starts")
                elif e is None:
                    bits.append(f"attempt {a} trains to completion")
                elif any(f["attempt"] == a and f["rank"] == e["rank"] for f in fired):
                    bits.append(f"in attempt {a} rank {e['rank']} {short(e)} at step {e['step']}")
                else:
                    bits.append(f"attempt {a} fails before reaching its planned fault (rank {e['rank']} at step {e['step']})")
            note += f"; torchrun restarts (--max-restarts {spec['max_restarts']}): " + "; ".join(bits)
            if later[-1] is None and any(rc != 0 for rc in rcs):
                problems.append(f"recovering run exited {rcs}")
        elif any(rc == 0 for rc in rcs) and spec["kind"] != "early-exit":
            problems.append(f"failing run exited {rcs}")
    files = input_files(spec, run_dir)
    for f in files:
        if not os.path.exists(os.path.join(run_dir, f)):
            problems.append(f"missing input {f}")
    return {"id": spec["id"], "files": files, "layout": spec["layout"], "ranks": spec["world"],
            "agents": len(spec["nproc"]), "scenario": spec["scenario"], "culprit": culprit,
            "cause": spec["cause"], "note": note, "_problems": problems, "_rcs": rcs,
            "_nproc": spec["nproc"],
            "_placement": {str(r): att0[r]["node"] for r in sorted(att0)}}


def short(e):
    v = e["variant"]
    k = e["kind"]
    if k == "dataloader-worker-killed":
        return VARIANT_TEXT[v + ":dl"]
    if k == "sigkill" and v == "step":
        return "SIGKILLs itself"
    return VARIANT_TEXT.get(v, f"{k}/{v}")


def describe(e, spec):
    r, k, s = e["rank"], e["kind"], e["step"]
    what = short(e)
    others = "the others"
    if k == "hang-stuck-rank":
        return f"rank {r} {what} at step {s}; {others} wait in the next collective until the gloo timeout ({spec['cfg']['pg_timeout']} s)"
    if k == "monitored-barrier":
        return (f"rank {r} sleeps 300 s before dist.monitored_barrier(timeout={spec['cfg']['mb_timeout']} s"
                f"{', wait_all_ranks=True' if spec['variant'] == 'wait-all' else ''}) at step {s}; rank 0 reports it")
    if k == "early-exit":
        return f"rank {r} {what} at step {s}; {others} continue into the next collective"
    if k == "collective-mismatch":
        return f"rank {r} {what} at step {s}" + (" (TORCH_DISTRIBUTED_DEBUG=DETAIL)" if spec["env"].get("TORCH_DISTRIBUTED_DEBUG") else "")
    return f"rank {r} {what} at step {s}; {others} then fail or are stopped"


# ------------------------------------------------------------------ manifest
def yq(v):
    return json.dumps(v)


def render_item(e):
    lines = [f"- id: {yq(e['id'])}", "  files:"]
    lines += [f"    - {yq(f)}" for f in e["files"]]
    lines += [f"  layout: {yq(e['layout'])}", f"  ranks: {e['ranks']}", f"  agents: {e['agents']}",
              f"  scenario: {yq(e['scenario'])}", "  culprit:",
              f"    rank: {yq(e['culprit']['rank'])}", f"    host: {yq(e['culprit']['host'])}",
              f"    attempt: {yq(e['culprit']['attempt'])}",
              f"  cause: {yq(e['cause'])}", f"  note: {yq(e['note'])}"]
    return "\n".join(lines) + "\n"


HEADER = ("# Sealed multi-rank corpus: labels written by make_runs.py from each run's own\n"
          "# parameters (see README.md).  Do not tune a diagnoser by reading these runs.\n")


def write_manifest(out_dir, entries):
    with open(os.path.join(out_dir, "manifest.yaml"), "w") as f:
        f.write(HEADER)
        for e in sorted(entries, key=lambda e: e["id"]):
            f.write(render_item(e))


def splice_manifest(out_dir, entry):
    path = os.path.join(out_dir, "manifest.yaml")
    if not os.path.exists(path):
        return write_manifest(out_dir, [entry])
    text = open(path).read()
    head, _, body = text.partition("- id: ")
    blocks = ["- id: " + b for b in body.split("\n- id: ")] if body else []
    blocks = [b if b.endswith("\n") else b + "\n" for b in blocks]
    new = render_item(entry)
    out, done = [], False
    for b in blocks:
        if b.startswith(f"- id: {yq(entry['id'])}\n"):
            out.append(new)
            done = True
        else:
            out.append(b)
    if not done:
        out.append(new)
    out.sort(key=lambda b: b.split("\n", 1)[0])
    with open(path, "w") as f:
        f.write(head + "".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", action="append")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    ap.add_argument("--list", action="store_true", help="print the planned runs and exit")
    args = ap.parse_args()
    specs = build_specs()
    if args.list:
        for s in specs:
            print(s["id"], s["layout"], s["nproc"], s["scenario"], json.dumps(s["plan"]))
        return
    if args.only:
        specs = [s for s in specs if s["id"] in args.only]
    os.makedirs(args.out, exist_ok=True)
    work_root = tempfile.mkdtemp(prefix="sealed-work-")
    t0 = time.time()
    results = []
    # longest first so the two slots stay busy
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = {s["id"]: ex.submit(run_one, s, args.out, work_root) for s in specs}
        for rid, fut in futs.items():
            e = fut.result()
            results.append(e)
            status = "OK" if not e["_problems"] else "PROBLEM " + "; ".join(e["_problems"])
            print(f"{rid} {e['layout']:<34} {e['cause']:<26} culprit={e['culprit']} "
                  f"rc={e['_rcs']} {e['_elapsed']}s {status}", flush=True)
    if args.only:
        for e in results:
            splice_manifest(args.out, e)
    else:
        write_manifest(args.out, results)
    shutil.rmtree(work_root, ignore_errors=True)
    print(f"done: {len(results)} runs in {time.time() - t0:.0f}s", flush=True)
    bad = [e["id"] for e in results if e["_problems"]]
    if bad:
        print("runs with problems:", " ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
