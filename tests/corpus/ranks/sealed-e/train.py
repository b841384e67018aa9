#!/usr/bin/env python
"""Toy seeded multi-rank trainer (gloo, CPU) with one injectable fault.

Environment read by this script (set by make_runs.py):
  FAULTS      JSON list of {"rank": R, "attempt": A, "kind": K, "step": S}; at most
              one entry fires per (rank, attempt)
  SIDE_DIR    directory OUTSIDE the run folder where each rank writes its label side file
  NODE_NAME   logical node name (node0 / node1)
  USE_DDP     "1" -> wrap the model in DistributedDataParallel instead of hand all-reduce
  USE_LOADER  "1" -> feed batches through a DataLoader with one worker
  AUX_IMPORT  "1" -> import the helper module `toyaug_kernels` (only on PYTHONPATH on some nodes)
  PER_RANK_LOG  directory -> this rank writes its stdout+stderr to rank<R>.log there
  PG_TIMEOUT  process-group timeout in seconds (default 9)
  STEPS       number of training steps (default 16)
"""
import json
import os
import signal
import sys
import time

RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
NODE = os.environ.get("NODE_NAME", "node0")
SIDE_DIR = os.environ.get("SIDE_DIR")
FAULTS = json.loads(os.environ.get("FAULTS", "[]"))

if os.environ.get("PER_RANK_LOG"):
    _fd = os.open(os.path.join(os.environ["PER_RANK_LOG"], f"rank{RANK}.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(_fd, 1); os.dup2(_fd, 2)

STEP_HOOK = None
for f in FAULTS:
    if f["rank"] == RANK and f.get("attempt", 0) == ATTEMPT:
        STEP_HOOK = f


def side(fired, kind=None, where=None):
    if not SIDE_DIR:
        return
    rec = {"rank": RANK, "local_rank": LOCAL_RANK, "node": NODE, "attempt": ATTEMPT,
           "pid": os.getpid(), "fired": fired, "kind": kind, "where": where,
           "t": time.time()}
    path = os.path.join(SIDE_DIR, f"r{RANK}_a{ATTEMPT}_{os.getpid()}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(rec, fh)
        fh.flush(); os.fsync(fh.fileno())
    os.replace(path + ".tmp", path)


side(False)

if os.environ.get("AUX_IMPORT") == "1":
    try:
        import toyaug_kernels  # noqa: F401  (present only on some nodes)
    except ImportError:
        side(True, "module_missing", "import")
        raise

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from datetime import timedelta  # noqa: E402


def log(msg):
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} | rank {RANK} | {msg}", flush=True)


class ToyData(torch.utils.data.Dataset):
    def __init__(self, n=4096):
        g = torch.Generator().manual_seed(1234 + RANK)
        self.x = torch.randn(n, 16, generator=g)
        self.y = (self.x[:, :4].sum(1, keepdim=True) > 0).float()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if STEP_HOOK and STEP_HOOK["kind"] == "loader_worker_kill":
            info = torch.utils.data.get_worker_info()
            if info is not None and i == STEP_HOOK["step"] * 32 + 5:
                side(True, "loader_worker_kill", f"worker pid {os.getpid()} index {i}")
                os.kill(os.getpid(), signal.SIGKILL)
        return self.x[i], self.y[i]


def apply_step_hooks(kind, step, model, opt):
    """Inject the fault. Side file is written before the fault takes effect."""
    side(True, kind, f"step {step}")
    if kind == "valueerror":
        raise ValueError(f"invalid label smoothing value -0.{step} in loss config")
    if kind == "keyerror":
        cfg = {"lr": 0.05, "momentum": 0.9}
        return cfg["warmup_steps"]
    if kind == "zerodiv":
        return 1.0 / (step - step)
    if kind == "assertion":
        assert step < 0, f"gradient norm check failed at step {step}"
    if kind == "indexerror":
        buf = [0.0] * 4
        return buf[step + len(buf)]
    if kind == "filenotfound":
        open(f"/tmp/sealed-e-work/missing_shard_{RANK:03d}.bin", "rb")
    if kind == "memoryerror":
        raise MemoryError("unable to allocate activation buffer")
    if kind == "torcherror":
        a = torch.randn(8, 16)
        b = torch.randn(12, 4)
        return a @ b
    if kind == "typeerror":
        return torch.zeros(3) + "scale"
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "sigsegv":
        import ctypes
        ctypes.string_at(0)
    if kind == "sigabrt":
        os.abort()
    if kind == "exit0":
        log("data shard exhausted, leaving training loop")
        sys.exit(0)
    if kind == "stuck_sleep":
        log("saving checkpoint shard ...")
        time.sleep(600)
    if kind == "stuck_lock":
        import threading
        lk = threading.Lock()
        lk.acquire()
        log("waiting for metrics writer lock")
        lk.acquire()
    if kind == "stuck_read":
        r, w = os.pipe()
        log("reading control message")
        os.read(r, 1)
    if kind == "mismatch_shape":
        t = torch.ones(7)
        dist.all_reduce(t)
    if kind == "mismatch_dtype":
        t = torch.ones(sum(p.numel() for p in model.parameters()), dtype=torch.float64)
        dist.all_reduce(t)
    if kind == "mismatch_op":
        t = torch.ones(sum(p.numel() for p in model.parameters()))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if kind == "barrier_absent":
        log("skipping sync point, prefetching next epoch")
        time.sleep(600)
    return None


def main():
    timeout = float(os.environ.get("PG_TIMEOUT", "9"))
    steps = int(os.environ.get("STEPS", "16"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    log(f"initialized process group: world_size={WORLD} local_rank={LOCAL_RANK} "
        f"attempt={ATTEMPT} node={NODE}")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    use_ddp = os.environ.get("USE_DDP") == "1"
    if use_ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.BCEWithLogitsLoss()
    data = ToyData()
    if os.environ.get("USE_LOADER") == "1":
        loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=1)
        it = iter(loader)
        get = lambda s: next(it)  # noqa: E731
    else:
        get = lambda s: data[s * 32:(s + 1) * 32]  # noqa: E731
    barrier_step = None
    if STEP_HOOK and STEP_HOOK["kind"] == "barrier_absent":
        barrier_step = STEP_HOOK["step"]
    for f in FAULTS:
        if f["kind"] == "barrier_absent" and f.get("attempt", 0) == ATTEMPT:
            barrier_step = f["step"]
    t0 = time.time()
    for step in range(steps):
        ts = time.time()
        x, y = get(step)
        if STEP_HOOK and STEP_HOOK["step"] == step and STEP_HOOK["kind"] != "loader_worker_kill":
            apply_step_hooks(STEP_HOOK["kind"], step, model, opt)
        if barrier_step is not None and step == barrier_step:
            dist.monitored_barrier(timeout=timedelta(seconds=5))
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        if not use_ddp:
            flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= WORLD
            off = 0
            for p in model.parameters():
                n = p.numel()
                p.grad.copy_(flat[off:off + n].view_as(p))
                off += n
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        if RANK == 0 or step % 4 == 0:
            log(f"step {step + 1}/{steps} loss {lt.item() / WORLD:.4f} "
                f"lr 0.0500 step_time {time.time() - ts:.3f}s")
        time.sleep(0.15)
    dist.barrier()
    log(f"training done in {time.time() - t0:.1f}s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
