#!/usr/bin/env python3
"""Regenerate the dev multi-rank corpus: real torchrun jobs (PyTorch CPU, gloo).

    python3 make_runs.py --out DIR [--only RUN_ID ...] [--jobs 2]

Every run launches train.py (beside this file) under one or two torchrun
agents on 127.0.0.1, captures what a user would hand to a log diagnoser in
the layout the run asks for, and writes its label into DIR/manifest.yaml.
The label comes from the run's own parameters (which fault was injected on
which node / local rank / restart attempt) plus the side files train.py
writes outside DIR, which tell which global rank that (node, local rank)
got from the rendezvous.  Nothing here reads the logs to decide a label.
"""
import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")

# --------------------------------------------------------------------------
# The runs.  fault: (kind, node_index, local_rank, step, attempt)
# node_index 0/1 = first/second agent.  label = the fault of attempt 0.
# --------------------------------------------------------------------------

CAUSE_OF = {
    "index-error": "exception", "shape-mismatch": "exception", "key-error": "exception",
    "assert": "exception", "value-error": "exception",
    "hang-lock": "hang-stuck-rank", "hang-read": "hang-stuck-rank",
    "early-exit": "early-exit", "sigkill": "sigkill", "sigsegv": "sigsegv",
    "worker-killed": "dataloader-worker-killed",
    "mismatch-shape": "collective-mismatch", "mismatch-dtype": "collective-mismatch",
    "mismatch-op": "collective-mismatch", "missing-module": "missing-module",
    "monitored-barrier": "monitored-barrier", "exit-code": "other",
}

WHAT = {
    "index-error": "raised IndexError (a corrupt label 4 indexes the 4-entry class_counts list) at step {step}",
    "shape-mismatch": "raised RuntimeError from nn.Linear (batch with 24 features against weight 16x32) at step {step}",
    "key-error": "raised KeyError 'labels' (its batch dict used the key 'label') at step {step}",
    "assert": "failed its finite-loss assert (NaN injected into its batch) at step {step}",
    "value-error": "raised ValueError from F.cross_entropy (8 logits, 7 targets) at step {step}",
    "hang-lock": "deadlocked on a non-reentrant threading.Lock after step {step}, so the others timed out in all_reduce",
    "hang-read": "blocked forever in os.read on an empty pipe after step {step}, so the others timed out in all_reduce",
    "early-exit": "left the training loop and exited 0 at step {step} (a per-rank early-stopping decision) while the others kept training",
    "sigkill": "killed itself with SIGKILL at step {step}",
    "sigsegv": "segfaulted (ctypes.string_at(0)) at step {step}",
    "worker-killed": "had its DataLoader worker SIGKILL itself while fetching the batch of step {step}",
    "mismatch-shape": "all_reduced a 3-element stats tensor where the others used 2 elements at step {step}",
    "mismatch-dtype": "all_reduced a float64 stats tensor where the others used float32 at step {step}",
    "mismatch-op": "called all_gather where the others called all_reduce at step {step}",
    "missing-module": "failed to import the fused-kernel module that is installed on {other} only (all ranks of its node did)",
    "monitored-barrier": "slept in a checkpoint write at step {step} and never reached dist.monitored_barrier",
    "exit-code": "printed a shard-checksum error and exited with code 3 (no traceback) at step {step}",
}


def R(id, layout, nnodes, nproc, faults=(), *, restarts=0, steps=8, timeout=12, extra=(),
      env=None, fr=False, rdzv="static", scenario=None, healthy_note=None):
    return dict(id=id, layout=layout, nnodes=nnodes, nproc=nproc, faults=list(faults),
                restarts=restarts, steps=steps, timeout=timeout, extra=list(extra),
                env=dict(env or {}), fr=fr, rdzv=rdzv, scenario=scenario,
                healthy_note=healthy_note)


# Restarted workers otherwise reuse the store keys of attempt 0 and often die in
# gloo connectFullMesh (stale addresses) before reaching their own injected fault.
FRESH_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

RUNS = [
    # ---- a Python exception on one rank
    R("r01-console-indexerror-w6", "console", 1, 6, [("index-error", 0, 2, 3, 0)]),
    R("r02-tee-shapemismatch-w3", "tee", 1, 3, [("shape-mismatch", 0, 1, 2, 0)]),
    R("r03-logdir-keyerror-w4-fr", "log-dir", 1, 4, [("key-error", 0, 1, 4, 0)],
      extra=["--record"], fr=True, rdzv="c10d"),
    R("r04-filter-assert-w4", "local-ranks-filter", 1, 4, [("assert", 0, 3, 2, 0)]),
    R("r05-perrank-valueerror-w6", "per-rank-files", 1, 6, [("value-error", 0, 4, 3, 0)]),
    R("r06-srun-indexerror-2x2", "srun-prefix", 2, 2, [("index-error", 1, 0, 2, 0)]),
    R("r07-kubectl-shapemismatch-2x4", "kubectl-prefix", 2, 4, [("shape-mismatch", 0, 2, 3, 0)]),
    R("r08-json-keyerror-2x2", "json-lines", 2, 2, [("key-error", 0, 1, 1, 0)], extra=["--record"]),
    # ---- one rank stuck, the others time out in a collective
    R("r09-console-hanglock-w4", "console", 1, 4, [("hang-lock", 0, 1, 3, 0)], timeout=10),
    R("r10-tee-hangread-w3", "tee", 1, 3, [("hang-read", 0, 0, 2, 0)], timeout=10),
    R("r11-srun-hanglock-2x2", "srun-prefix", 2, 2, [("hang-lock", 0, 1, 2, 0)], timeout=10),
    R("r12-logdir-hangread-w4-fr", "log-dir", 1, 4, [("hang-read", 0, 2, 3, 0)], timeout=10, fr=True),
    # ---- a rank that exits 0 early
    R("r13-console-earlyexit-w3", "console", 1, 3, [("early-exit", 0, 1, 3, 0)]),
    R("r14-kubectl-earlyexit-2x2", "kubectl-prefix", 2, 2, [("early-exit", 1, 1, 2, 0)]),
    # ---- SIGKILL, SIGSEGV
    R("r15-tee-sigkill-w4", "tee", 1, 4, [("sigkill", 0, 2, 3, 0)]),
    R("r16-json-sigkill-w5", "json-lines", 1, 5, [("sigkill", 0, 3, 2, 0)]),
    R("r17-console-segv-faulthandler-w3", "console", 1, 3, [("sigsegv", 0, 1, 2, 0)],
      env={"PYTHONFAULTHANDLER": "1"}),
    R("r18-perrank-segv-w4", "per-rank-files", 1, 4, [("sigsegv", 0, 2, 4, 0)]),
    # ---- a DataLoader worker killed
    R("r19-console-dlworker-w3", "console", 1, 3, [("worker-killed", 0, 2, 2, 0)], extra=["--workers", "1"]),
    R("r20-filter-dlworker-w4", "local-ranks-filter", 1, 4, [("worker-killed", 0, 1, 3, 0)],
      extra=["--workers", "1"], rdzv="c10d"),
    # ---- collective mismatch
    R("r21-console-collshape-w4", "console", 1, 4, [("mismatch-shape", 0, 3, 2, 0)]),
    R("r22-logdir-colldtype-w3-fr", "log-dir", 1, 3, [("mismatch-dtype", 0, 1, 2, 0)], fr=True, timeout=10),
    R("r23-tee-collop-detail-w4", "tee", 1, 4, [("mismatch-op", 0, 2, 3, 0)],
      env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, timeout=10, extra=["--no-ddp"]),
    # ---- a module present on one node only
    R("r24-srun-missingmodule-2x2", "srun-prefix", 2, 2, [("missing-module", 1, 0, 0, 0)]),
    R("r25-console2-missingmodule-2x3", "console", 2, 3, [("missing-module", 1, 0, 0, 0)]),
    # ---- monitored_barrier with one rank absent
    R("r26-console-monbarrier-w4", "console", 1, 4, [("monitored-barrier", 0, 2, 4, 0)], timeout=20),
    R("r27-kubectl-monbarrier-2x2", "kubectl-prefix", 2, 2, [("monitored-barrier", 1, 0, 4, 0)], timeout=20),
    # ---- restarts: attempt 0 fails on one rank, later attempts differently
    R("r28-console-restart1-w4", "console", 1, 4,
      [("index-error", 0, 1, 2, 0), ("sigkill", 0, 3, 1, 1)], restarts=1, rdzv="c10d",
      env=FRESH_STORE),
    R("r29-logdir-restart2-w3", "log-dir", 1, 3,
      [("hang-lock", 0, 2, 2, 0), ("key-error", 0, 0, 1, 1), ("shape-mismatch", 0, 1, 3, 2)],
      restarts=2, timeout=10, extra=["--record"], rdzv="c10d", env=FRESH_STORE),
    R("r30-srun-restart1-2x2", "srun-prefix", 2, 2,
      [("sigsegv", 1, 1, 2, 0), ("assert", 0, 0, 1, 1)], restarts=1, env=FRESH_STORE),
    # torch's default: the restarted workers share the agent's store with attempt 0
    R("r36-console-restart1-sharedstore-w3", "console", 1, 3, [("sigkill", 0, 1, 2, 0)],
      restarts=1, rdzv="c10d"),
    # ---- other: non-zero exit without a traceback
    R("r31-tee-exitcode-w3", "tee", 1, 3, [("exit-code", 0, 1, 1, 0)]),
    # ---- healthy
    R("r32-console-healthy-w2", "console", 1, 2, healthy_note="plain 2-rank run that finishes"),
    R("r33-tee-healthy-warnings-w4", "tee", 1, 4, extra=["--warnings", "--workers", "3"],
      healthy_note="finishes; every rank prints torch UserWarnings (lr_scheduler order, tensor copy-construct, DataLoader worker count)"),
    R("r34-json-healthy-resume-2x2", "json-lines", 2, 2, extra=["--resume", "ckpt/last.pt"],
      healthy_note="finishes; every rank prints a handled FileNotFoundError traceback for a missing resume checkpoint"),
    R("r35-perrank-healthy-w8", "per-rank-files", 1, 8, extra=["--warnings"], steps=6,
      healthy_note="8-rank run that finishes, with harmless UserWarnings on every rank"),
]

# --------------------------------------------------------------------------


def node_names(run):
    if run["layout"] == "kubectl-prefix":
        job = "tinymlp-ddp"
        return [f"{job}-worker-{i}" for i in range(run["nnodes"])]
    return [f"node-{chr(ord('a') + i)}" for i in range(run["nnodes"])]


def host_label(run, node_index):
    """How the files name the node that holds the culprit (None if they don't)."""
    lay = run["layout"]
    names = node_names(run)
    if lay == "srun-prefix":
        return str(node_index)
    if lay in ("kubectl-prefix", "json-lines"):
        return names[node_index]
    if run["nnodes"] > 1:  # one file / folder per node, named after it
        return names[node_index]
    return None


def files_of(run):
    lay, names = run["layout"], node_names(run)
    if lay in ("console", "tee", "local-ranks-filter"):
        return [f"{n}.log" for n in names] if run["nnodes"] > 1 else ["console.log"]
    if lay == "log-dir":
        out = ["console.log", "logs"]
        return out + (["fr"] if run["fr"] else [])
    if lay == "per-rank-files":
        return ["console.log"] + [f"rank_{r}.log" for r in range(run["nnodes"] * run["nproc"])]
    if lay == "srun-prefix":
        return ["slurm-73%02d.out" % int(run["id"][1:3])]
    if lay == "kubectl-prefix":
        return ["kubectl-logs.txt"]
    if lay == "json-lines":
        return ["pod-logs.jsonl"]
    raise ValueError(lay)


class Sink:
    """Serialises lines from several agents' pipes into one file."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.lock = threading.Lock()

    def write(self, data):
        with self.lock:
            self.f.write(data)
            self.f.flush()

    def close(self):
        self.f.close()


def pump(pipe, sink, fmt):
    for line in iter(pipe.readline, b""):
        sink.write(fmt(line))
    pipe.close()


def now_iso():
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def port_is_free(port):
    import socket
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as so:
            try:
                so.bind((host, port))
            except OSError:
                return False
    return True


def launch(run, rdir, scratch, port, torchrun):
    """Start the run's agent(s), capture their output in the layout's files, wait."""
    side = os.path.join(scratch, "side")
    work = os.path.join(scratch, "workspace")  # one shared "filesystem" for all agents
    os.makedirs(work)
    shutil.copy(TRAIN, os.path.join(work, "train.py"))
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp)
    names = node_names(run)
    lay = run["layout"]

    fault_args = []
    for kind, ni, lr, step, att in run["faults"]:
        if kind == "missing-module":
            continue
        fault_args += ["--fault", f"{kind}:{names[ni]}:{lr}:{step}:{att}"]
    missing = [f for f in run["faults"] if f[0] == "missing-module"]

    procs, threads, sinks, files = [], [], [], []
    for ni, node in enumerate(names):
        env = dict(os.environ)
        for k in ("TORCH_DISTRIBUTED_DEBUG", "PYTHONFAULTHANDLER", "TORCH_FR_BUFFER_SIZE",
                  "TORCH_FR_DUMP_TEMP_FILE", "PYTHONPATH", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"):
            env.pop(k, None)
        env.update(PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo", NODE_NAME=node,
                   FAILDEX_SIDE_DIR=side, TMPDIR=tmp)
        env.update(run["env"])
        targs = ["--steps", str(run["steps"]), "--pg-timeout", str(run["timeout"])] + fault_args + run["extra"]
        if missing:
            # the extension is installed on the other node(s) only
            targs += ["--needs-module", "fused_mlp_kernels"]
            if ni != missing[0][1]:
                site = os.path.join(scratch, f"site-{ni}")
                os.makedirs(site)
                with open(os.path.join(site, "fused_mlp_kernels.py"), "w") as f:
                    f.write("def fused_linear_relu(x, w, b):\n    return (x @ w.t() + b).relu()\n")
                env["PYTHONPATH"] = site
        if lay == "per-rank-files":
            targs += ["--rank-log-dir", os.path.join(work, "run_logs")]
        if run["fr"]:
            env["TORCH_FR_BUFFER_SIZE"] = "2000"
            env["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(work, "fr", "comm_lib_trace_rank_")
            targs += ["--fr-dump"]
        cmd = ["timeout", "120", torchrun, "--nnodes", str(run["nnodes"]),
               "--nproc-per-node", str(run["nproc"]), "--max-restarts", str(run["restarts"])]
        if run["nnodes"] > 1 or run["rdzv"] == "c10d":
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", rid_short(run), "--local-addr", "127.0.0.1"]
        else:
            cmd += ["--master-addr", "127.0.0.1", "--master-port", str(port)]
        if lay == "tee":
            cmd += ["--tee", "3"]
        elif lay == "log-dir":
            cmd += ["--log-dir", os.path.join(work, "logs"), "--redirects", "3"]
        elif lay == "local-ranks-filter":
            cmd += ["--local-ranks-filter", "0"]
        cmd += ["train.py"] + targs

        if lay in ("console", "tee", "local-ranks-filter", "log-dir", "per-rank-files"):
            fname = f"{node}.log" if run["nnodes"] > 1 else "console.log"
            fh = open(os.path.join(rdir, fname), "wb")
            files.append(fh)
            p = subprocess.Popen(cmd, cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        elif lay in ("srun-prefix", "kubectl-prefix"):
            if not sinks:
                sinks.append(Sink(os.path.join(rdir, files_of(run)[0])))
            pre = (f"{ni}: " if lay == "srun-prefix" else f"[pod/{node}/pytorch] ").encode()
            p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            th = threading.Thread(target=pump, args=(p.stdout, sinks[0], lambda l, pre=pre: pre + l))
            th.start()
            threads.append(th)
        elif lay == "json-lines":
            if not sinks:
                sinks.append(Sink(os.path.join(rdir, files_of(run)[0])))
            p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            for stream, pipe in (("stdout", p.stdout), ("stderr", p.stderr)):
                def fmt(line, stream=stream, node=node):
                    rec = {"time": now_iso(), "host": node, "stream": stream,
                           "log": line.decode("utf-8", "replace").rstrip("\n")}
                    return (json.dumps(rec, ensure_ascii=False) + "\n").encode()
                th = threading.Thread(target=pump, args=(pipe, sinks[0], fmt))
                th.start()
                threads.append(th)
        else:
            raise ValueError(lay)
        procs.append(p)
        if ni == 0 and run["nnodes"] > 1:
            time.sleep(0.5)  # the first agent hosts the rendezvous store

    rcs = [p.wait() for p in procs]
    for th in threads:
        th.join()
    for s in sinks:
        s.close()
    for fh in files:
        fh.close()
    # what the user would hand over besides the console: copy it into the run folder
    if lay == "log-dir":
        shutil.copytree(os.path.join(work, "logs"), os.path.join(rdir, "logs"))
    if run["fr"] and os.path.isdir(os.path.join(work, "fr")):
        shutil.copytree(os.path.join(work, "fr"), os.path.join(rdir, "fr"))
    if lay == "per-rank-files":
        for fn in sorted(os.listdir(os.path.join(work, "run_logs"))):
            shutil.copy(os.path.join(work, "run_logs", fn), os.path.join(rdir, fn))
    return rcs


def rid_short(run):
    return run["id"].split("-")[0] + "job"


def port_clash(rdir):
    for root, _, fns in os.walk(rdir):
        for fn in fns:
            with open(os.path.join(root, fn), "rb") as f:
                if b"EADDRINUSE" in f.read():
                    return True
    return False


def run_one(run, out_root, port_block, torchrun):
    """One run; a healthy run whose job still failed (gloo sometimes aborts a rank while it
    exits: "terminate called without an active exception") is made again, at most twice."""
    for n in range(3):
        item, rcs, elapsed, problems = run_once(run, out_root, port_block, torchrun)
        if run["faults"] or not problems or n == 2:
            return item, rcs, elapsed, problems
        print(f"{run['id']}: healthy run failed {rcs} ({'; '.join(problems)}), making it again", flush=True)


def run_once(run, out_root, port_block, torchrun):
    rid = run["id"]
    rdir = os.path.join(out_root, rid)
    names = node_names(run)
    lay = run["layout"]
    t0 = time.time()
    for port in range(port_block, port_block + 10):
        if not port_is_free(port):
            continue
        if os.path.exists(rdir):
            shutil.rmtree(rdir)
        os.makedirs(rdir)
        # a neutral path: tracebacks show it, so it must not name the scenario or the node
        scratch = tempfile.mkdtemp()
        rcs = launch(run, rdir, scratch, port, torchrun)
        if not port_clash(rdir):
            break
        print(f"{rid}: port {port} was taken meanwhile, retrying", flush=True)
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        raise RuntimeError(f"{rid}: no free port in {port_block}..{port_block + 9}")
    side = os.path.join(scratch, "side")
    elapsed = time.time() - t0

    # ---- the label, from the run's parameters + the side files
    workers, fired = {}, {}
    for fn in sorted(os.listdir(side)) if os.path.isdir(side) else []:
        if not fn.endswith(".json"):
            continue  # a worker killed while writing its side file
        with open(os.path.join(side, fn)) as f:
            rec = json.load(f)
        key = (rec["node"], rec["local_rank"], rec["attempt"])
        (fired if fn.startswith("fired_") else workers)[key] = rec
    faults0 = [f for f in run["faults"] if f[4] == 0]
    problems = []
    if faults0:
        kind, ni, lr, step, att = faults0[0]
        node = names[ni]
        rec = workers.get((node, lr, att))
        if rec is None:
            problems.append(f"no side file for {node} local {lr} attempt {att}")
            grank = None
        else:
            grank = rec["rank"]
        if (node, lr, att) not in fired:
            problems.append(f"the attempt-{att} fault did not fire")
        culprit = {"rank": grank, "host": host_label(run, ni), "attempt": att}
        cause = CAUSE_OF[kind]
        what = WHAT[kind].format(step=step, other=", ".join(n for i, n in enumerate(names) if i != ni))
        where = f"global rank {grank} ({node}, local rank {lr})" if run["nnodes"] > 1 else f"rank {grank}"
        note = f"train.py on {where} {what}"
        if run["restarts"]:
            later = [f for f in run["faults"] if f[4] > 0]
            bits = []
            for k2, n2, l2, s2, a2 in later:
                r2 = workers.get((names[n2], l2, a2), {}).get("rank")
                ok = "" if (names[n2], l2, a2) in fired else ", which did not fire"
                bits.append(f"attempt {a2}: {k2} on global rank {r2} at step {s2}{ok}")
            if bits:
                note += (f" in attempt 0; with --max-restarts {run['restarts']} the later attempts were given "
                         f"different faults ({'; '.join(bits)})")
            else:
                seen = sorted({a for (_, _, a) in workers})
                note += (f" in attempt 0; with --max-restarts {run['restarts']} torchrun restarted the workers "
                         f"(attempts seen: {seen}) with no fault injected after attempt 0, on torch's default "
                         f"shared store")
        note += "."
        scenario = kind if not run["restarts"] else f"restart-{kind}"
        if all(rc == 0 for rc in rcs) and not run["restarts"]:
            problems.append(f"fault run exited 0: {rcs}")
    else:
        culprit = {"rank": None, "host": None, "attempt": None}
        cause = "healthy"
        note = f"No fault injected: {run['healthy_note']}."
        scenario = "healthy"
        if any(rc != 0 for rc in rcs):
            problems.append(f"healthy run exited {rcs}")
    for rc in rcs:
        if rc == 124:
            problems.append("an agent hit the outer 120 s timeout")
    if run["restarts"]:
        seen = {a for (_, _, a) in workers}
        if max(seen, default=0) < run["restarts"]:
            problems.append(f"restart attempts seen {sorted(seen)}")
    if run["fr"]:
        frd = os.path.join(rdir, "fr")
        if not (os.path.isdir(frd) and os.listdir(frd)):
            problems.append("no flight-recorder dump written")

    if not os.environ.get("FAILDEX_KEEP_SCRATCH"):
        shutil.rmtree(scratch, ignore_errors=True)
    item = {
        "id": rid, "files": files_of(run), "layout": lay, "ranks": run["nnodes"] * run["nproc"],
        "agents": run["nnodes"], "scenario": scenario, "culprit": culprit, "cause": cause, "note": note,
    }
    return item, rcs, elapsed, problems


def q(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v, ensure_ascii=False)


def write_manifest(path, items):
    lines = ["# Dev multi-rank corpus: labels written by make_runs.py from each run's own parameters.",
             "# culprit.rank = global rank that started the failure (null if healthy);",
             "# culprit.host = how the files name that rank's node (srun -l index, pod, json host,",
             "#   per-node file name), null when the layout names no node; culprit.attempt = 0-based",
             "#   torchrun restart attempt in which it started.", ""]
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
    ap.add_argument("--only", action="append", default=[], help="run id (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (2 cores: keep 2)")
    ap.add_argument("--torchrun", default="/tmp/torchvenv/bin/torchrun")
    ap.add_argument("--base-port", type=int, default=41000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    chosen = [r for r in RUNS if not a.only or r["id"] in a.only]
    if a.only and len(chosen) != len(a.only):
        sys.exit(f"unknown run id in {a.only}")
    port_of = {r["id"]: a.base_port + 10 * i for i, r in enumerate(RUNS)}
    man_path = os.path.join(a.out, "manifest.yaml")
    items = {}
    if os.path.exists(man_path):
        try:
            import yaml
            with open(man_path) as f:
                for it in yaml.safe_load(f) or []:
                    items[it["id"]] = it
        except ImportError:
            if a.only:
                sys.exit("--only needs PyYAML to keep the other runs' labels")
    t_all = time.time()
    failures = 0
    order = [r["id"] for r in RUNS]
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(run_one, r, a.out, port_of[r["id"]], a.torchrun): r for r in chosen}
        for fut in cf.as_completed(futs):
            try:
                item, rcs, el, problems = fut.result()
            except Exception as e:  # noqa: BLE001 - report, keep the other runs' labels
                failures += 1
                print(f"{futs[fut]['id']}: ERROR {type(e).__name__}: {e}", flush=True)
                continue
            items[item["id"]] = item
            status = "ok" if not problems else "PROBLEM: " + "; ".join(problems)
            failures += bool(problems)
            c = item["culprit"]
            print(f"{item['id']:38s} rc={rcs} {el:5.1f}s cause={item['cause']} rank={c['rank']} "
                  f"host={c['host']} {status}", flush=True)
            write_manifest(man_path, [items[i] for i in order if i in items])
    write_manifest(man_path, [items[i] for i in order if i in items])
    print(f"{len(chosen)} run(s) in {time.time() - t_all:.0f}s; manifest: {man_path}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
