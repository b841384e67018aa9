"""Tiny DDP training job (CPU, gloo) that make_runs.py launches under torchrun.

It trains a 2-layer MLP on synthetic data and, when told to with --fault,
breaks in one real way on exactly one (node, local rank, restart attempt).
A fault spec is KIND:NODE:LOCAL_RANK:STEP[:ATTEMPT] (attempt defaults to 0).

Before anything else each worker appends its identity (global rank, local
rank, NODE_NAME, restart attempt, pid) to $FAILDEX_SIDE_DIR, which
make_runs.py keeps outside the run folder and uses to turn the (node, local
rank) it targeted into the global rank of the label.
"""
import argparse
import ctypes
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from datetime import timedelta

RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))
NODE = os.environ.get("NODE_NAME", "node-a")
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def _write_side_file():
    side = os.environ.get("FAILDEX_SIDE_DIR")
    if not side:
        return
    os.makedirs(side, exist_ok=True)
    rec = {"rank": RANK, "local_rank": LOCAL_RANK, "node": NODE, "attempt": ATTEMPT,
           "group_rank": int(os.environ.get("GROUP_RANK", "0")), "pid": os.getpid(),
           "world_size": WORLD_SIZE}
    _atomic_json(os.path.join(side, f"worker_{NODE}_{LOCAL_RANK}_{ATTEMPT}.json"), rec)


def _atomic_json(path, rec):
    with open(path + ".part", "w") as f:
        json.dump(rec, f)
    os.replace(path + ".part", path)


_write_side_file()


def _record_fired(kind):
    """Tell make_runs.py that the injected fault really happened (side file, not a log)."""
    side = os.environ.get("FAILDEX_SIDE_DIR")
    if side:
        _atomic_json(os.path.join(side, f"fired_{NODE}_{LOCAL_RANK}_{ATTEMPT}.json"),
                     {"kind": kind, "rank": RANK, "node": NODE, "local_rank": LOCAL_RANK,
                      "attempt": ATTEMPT})

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=8)
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--pg-timeout", type=float, default=15)
p.add_argument("--fault", action="append", default=[],
               help="KIND:NODE:LOCAL_RANK:STEP[:ATTEMPT]")
p.add_argument("--workers", type=int, default=0, help="DataLoader workers")
p.add_argument("--needs-module", default="", help="import this extension at start-up")
p.add_argument("--rank-log-dir", default="", help="each rank also logs to rank_<N>.log here")
p.add_argument("--log-all-ranks", action="store_true")
p.add_argument("--warnings", action="store_true", help="trigger a few harmless torch warnings")
p.add_argument("--resume", default="", help="checkpoint to resume from (missing = start fresh)")
p.add_argument("--fr-dump", action="store_true",
               help="on failure or SIGTERM write the flight recorder to $TORCH_FR_DUMP_TEMP_FILE<rank>")
p.add_argument("--no-ddp", action="store_true", help="average gradients by hand instead of DDP")
p.add_argument("--record", action="store_true", help="wrap main in torch.distributed.elastic @record")
p.add_argument("--detail-barrier-timeout", type=float, default=6)
args = p.parse_args()

if args.needs_module:
    # The fused kernels are installed on some nodes only.
    try:
        __import__(args.needs_module)
    except ModuleNotFoundError:
        _record_fired("missing-module")
        raise

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 4
FEATURES = 16
CLASS_NAMES = ["cat", "dog", "bird", "fish"]

log = logging.getLogger("train")


def setup_logging():
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s [rank{RANK}] %(message)s")
    log.setLevel(logging.INFO)
    if RANK == 0 or args.log_all_ranks:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(fmt)
        log.addHandler(h)
    if args.rank_log_dir:
        os.makedirs(args.rank_log_dir, exist_ok=True)
        fh = logging.FileHandler(os.path.join(args.rank_log_dir, f"rank_{RANK}.log"))
        fh.setFormatter(fmt)
        log.addHandler(fh)
    log.propagate = False


def parse_faults():
    out = []
    for spec in args.fault:
        parts = spec.split(":")
        kind, node, lr, step = parts[0], parts[1], int(parts[2]), int(parts[3])
        attempt = int(parts[4]) if len(parts) > 4 else 0
        if node == NODE and lr == LOCAL_RANK and attempt == ATTEMPT:
            out.append((kind, step))
    return out


MY_FAULTS = parse_faults()


def fault_at(step, kinds):
    for kind, s in MY_FAULTS:
        if s == step and kind in kinds:
            _record_fired(kind)
            return kind
    return None


class SyntheticShard(Dataset):
    def __init__(self, n, seed, kill_worker_at=None):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, FEATURES, generator=g)
        self.y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        self.kill_worker_at = kill_worker_at
        self.fetched = 0

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.fetched += 1
        if self.kill_worker_at is not None and self.fetched == self.kill_worker_at:
            # the worker process dies the way the OOM killer would take it
            _record_fired("worker-killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return {"x": self.x[i], "labels": self.y[i]}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.fc2 = nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MetricsBuffer:
    def __init__(self):
        self.lock = threading.Lock()
        self.rows = []

    def flush(self):
        with self.lock:
            self.rows.clear()

    def add_and_maybe_flush(self, row, flush):
        with self.lock:
            self.rows.append(row)
            if flush:
                self.flush()  # re-acquires the non-reentrant lock: deadlock


def dump_flight_recorder(reason):
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not (args.fr_dump and prefix):
        return
    try:
        data = torch._C._distributed_c10d._dump_fr_trace(True, True)
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        with open(f"{prefix}{RANK}", "wb") as f:
            f.write(data)
        print(f"[rank{RANK}] flight recorder dumped ({reason}) to {prefix}{RANK}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        print(f"[rank{RANK}] flight recorder dump failed: {e}", file=sys.stderr)


def on_sigterm(signum, frame):
    dump_flight_recorder("SIGTERM")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def main():
    setup_logging()
    if args.fr_dump:
        signal.signal(signal.SIGTERM, on_sigterm)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    log.info("initialized process group: rank %d/%d local_rank %d", RANK, WORLD_SIZE, LOCAL_RANK)

    torch.manual_seed(0)
    model = MLP()
    start_step = 0
    if args.resume:
        try:
            ckpt = torch.load(args.resume, map_location="cpu")
            model.load_state_dict(ckpt["model"])
            start_step = ckpt["step"]
        except FileNotFoundError:
            log.warning("could not load checkpoint %s, starting from scratch", args.resume)
            traceback.print_exc()
    ddp = model if args.no_ddp else DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)

    kill_at = None
    for kind, s in MY_FAULTS:
        if kind == "worker-killed":
            kill_at = s * args.batch_size + 1
    n = args.steps * args.batch_size * WORLD_SIZE
    ds = SyntheticShard(n, seed=1234, kill_worker_at=kill_at)
    sampler = DistributedSampler(ds, num_replicas=WORLD_SIZE, rank=RANK, shuffle=True, seed=7)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.workers, persistent_workers=False)
    if args.warnings:
        # harmless warnings: scheduler stepped before the optimizer, a note, a tensor copy-construct
        sched.step()
        warnings.warn(f"rank {RANK}: gradient clipping disabled for this run (max_norm=None)")
        init_bias = torch.tensor(model.fc2.bias.data)

    metrics = MetricsBuffer()
    class_counts = [0] * NUM_CLASSES
    t0 = time.time()
    for step, batch in enumerate(loader, start=start_step):
        x, y = batch["x"], batch["labels"]
        kind = fault_at(step, {"index-error", "shape-mismatch", "key-error", "assert", "value-error"})
        if kind == "index-error":
            y = y.clone()
            y[3] = NUM_CLASSES  # a corrupt record carries label 4
        elif kind == "shape-mismatch":
            x = torch.randn(x.shape[0], FEATURES + 8)  # shard written with 24 features
        elif kind == "key-error":
            batch = {"x": x, "label": y}
            y = batch["labels"]
        elif kind == "assert":
            x = x.clone()
            x[0, 0] = float("nan")
        elif kind == "value-error":
            y = y[:-1]

        for label in y.tolist():
            class_counts[label] += 1

        kind = fault_at(step, {"early-exit", "sigkill", "sigsegv", "exit-code"})
        if kind == "early-exit":
            log.info("early stopping: local validation loss has not improved for 3 checks, stopping at step %d", step)
            print(f"[rank{RANK}] early stopping at step {step}")
            return
        if kind == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "sigsegv":
            ctypes.string_at(0)
        if kind == "exit-code":
            print(f"[rank{RANK}] ERROR: shard checksum mismatch for part-{RANK:05d}, refusing to train on it",
                  file=sys.stderr)
            sys.exit(3)

        out = ddp(x)
        loss = F.cross_entropy(out, y)
        assert torch.isfinite(loss), f"loss is {loss.item()} at step {step}"
        opt.zero_grad()
        loss.backward()
        if args.no_ddp:
            for prm in model.parameters():
                dist.all_reduce(prm.grad)
                prm.grad /= WORLD_SIZE
        opt.step()
        if step % 4 == 3:
            sched.step()

        kind = fault_at(step, {"hang-lock", "hang-read", "sleep"})
        if kind == "hang-lock":
            log.info("flushing metrics")
            metrics.add_and_maybe_flush({"step": step, "loss": loss.item()}, flush=True)
        elif kind == "hang-read":
            r, w = os.pipe()  # waits for a progress byte that the writer never sends
            os.read(r, 1)
        elif kind == "sleep":
            time.sleep(300)
        else:
            metrics.add_and_maybe_flush({"step": step, "loss": loss.item()}, flush=False)

        # average loss over ranks for logging
        stat = torch.tensor([loss.item(), float(len(y))])
        kind = fault_at(step, {"mismatch-shape", "mismatch-dtype", "mismatch-op"})
        if kind == "mismatch-shape":
            stat = torch.tensor([loss.item(), float(len(y)), 0.0])
            dist.all_reduce(stat)
        elif kind == "mismatch-dtype":
            stat = stat.to(torch.float64)
            dist.all_reduce(stat)
        elif kind == "mismatch-op":
            gathered = [torch.zeros_like(stat) for _ in range(WORLD_SIZE)]
            dist.all_gather(gathered, stat)
        else:
            dist.all_reduce(stat)
        if step % 2 == 1 or args.log_all_ranks:
            log.info("step %d loss %.4f (global mean %.4f) lr %.4f", step, loss.item(),
                     stat[0].item() / WORLD_SIZE, sched.get_last_lr()[0])
        if step == args.steps // 2:
            if fault_at(step, {"monitored-barrier"}):
                log.info("saving checkpoint shard")
                time.sleep(300)  # stuck writing its checkpoint shard to a slow filesystem
            log.info("epoch checkpoint: entering monitored barrier")
            dist.monitored_barrier(timeout=timedelta(seconds=args.detail_barrier_timeout))

    log.info("class counts: %s", dict(zip(CLASS_NAMES, class_counts)))
    dist.barrier()
    if RANK == 0:
        log.info("training finished in %.1fs", time.time() - t0)
    dist.destroy_process_group()


def run():
    try:
        main()
    except BaseException as e:
        if not isinstance(e, SystemExit):
            if args.rank_log_dir:
                log.exception("training failed on rank %d", RANK)
            dump_flight_recorder(type(e).__name__)
        raise


if __name__ == "__main__":
    if args.record:
        from torch.distributed.elastic.multiprocessing.errors import record
        record(run)()
    else:
        run()
