"""Small data-parallel training job (gloo, CPU) with one optional injected fault.

Fault selection comes from environment variables set by make_runs.py.  Each rank
writes a side file (outside the run folder) recording its identity and whether
its fault fired; make_runs.py derives the labels from those files.
"""
import os
import sys
import json
import time

RANK = int(os.environ["RANK"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
NODE = os.environ.get("NODE_NAME", "")
SIDE = os.environ["SIDE_DIR"]
FAULT = os.environ.get("FAULT", "none")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "-1"))
FAULT_STEP = int(os.environ.get("FAULT_STEP", "3"))
FAULT2 = os.environ.get("FAULT2", "none")
FAULT_RANK2 = int(os.environ.get("FAULT_RANK2", "-1"))
MARKER = os.path.join(SIDE, "marker0")
ATTEMPT = 1 if os.path.exists(MARKER) else 0

if os.environ.get("RANK_LOG_DIR"):
    _f = os.open(os.path.join(os.environ["RANK_LOG_DIR"], f"rank_{RANK}.log"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_f, 1)
    os.dup2(_f, 2)


def side(fired, kind="none"):
    path = os.path.join(SIDE, f"r{RANK}_a{ATTEMPT}_{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump({"rank": RANK, "local_rank": LOCAL_RANK, "node": NODE or None,
                   "attempt": ATTEMPT, "fired": fired, "kind": kind,
                   "t": time.time()}, fh)


side(False)


def active_fault():
    """(kind) of the fault this rank should fire in this attempt, or None."""
    if ATTEMPT == 0 and FAULT != "none" and RANK == FAULT_RANK:
        return FAULT
    if ATTEMPT == 1 and FAULT2 != "none" and RANK == FAULT_RANK2:
        return FAULT2
    return None


MY_FAULT = active_fault()


def fire(kind):
    side(True, kind)
    if ATTEMPT == 0 and FAULT2 != "none":
        open(MARKER, "w").close()


import datetime
import warnings
import traceback
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DataLoader

if MY_FAULT == "missing_module" or (FAULT == "missing_module" and NODE == os.environ.get("FAULT_NODE") and LOCAL_RANK == 0 and ATTEMPT == 0):
    fire("missing_module")
if LOCAL_RANK == 0:
    # node leader exports throughput metrics
    from prometheus_client import Gauge  # noqa: E402
    tput = Gauge("samples_per_second", "training throughput") if os.environ.get("USE_METRICS") else None

PG_TIMEOUT = int(os.environ.get("PG_TIMEOUT", "10"))
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=PG_TIMEOUT))
torch.manual_seed(1234 + RANK)
where = f" on {NODE}" if NODE else ""
print(f"[rank {RANK}] init done{where}: local_rank={LOCAL_RANK} world_size={WORLD}", flush=True)

STEPS = int(os.environ.get("STEPS", "8"))
BATCH = 16


class Synthetic(Dataset):
    def __init__(self, n=BATCH * (STEPS + 2)):
        g = torch.Generator().manual_seed(99 + RANK)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x[:, :4].sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if MY_FAULT == "dl_worker" and i == BATCH * FAULT_STEP + 5:
            fire("dl_worker")
            import signal
            os.kill(os.getpid(), signal.SIGKILL)
        return self.x[i], self.y[i]


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
for p in model.parameters():
    dist.broadcast(p.data, src=0)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(Synthetic(), batch_size=BATCH, shuffle=False,
                    num_workers=int(os.environ.get("DL_WORKERS", "0")))

if os.environ.get("HEALTHY_NOISE"):
    warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly", UserWarning)
    try:
        torch.load("/nonexistent/warm_start.pt")
    except FileNotFoundError:
        print(f"[rank {RANK}] no warm-start checkpoint, starting from scratch:", flush=True)
        traceback.print_exc()


def sync_grads(step):
    for i, p in enumerate(model.parameters()):
        g = p.grad
        if MY_FAULT == "shape_mismatch" and step == FAULT_STEP and i == 0:
            fire("shape_mismatch")
            g = torch.cat([g.flatten(), torch.zeros(7)])
        elif MY_FAULT == "dtype_mismatch" and step == FAULT_STEP and i == 0:
            fire("dtype_mismatch")
            g = g.double()
        elif MY_FAULT == "op_mismatch" and step == FAULT_STEP and i == 0:
            fire("op_mismatch")
            out = [torch.empty_like(g) for _ in range(WORLD)]
            dist.all_gather(out, g)
            continue
        dist.all_reduce(g)
        if g is p.grad:
            p.grad /= WORLD


def walk(cfg):
    return {k: walk(v) if isinstance(v, dict) else v for k, v in cfg.items()}


def maybe_fault(step, x, y):
    f = MY_FAULT
    if f is None or step != FAULT_STEP:
        return
    if f in ("shape_mismatch", "dtype_mismatch", "op_mismatch", "dl_worker", "missing_module", "monitored_barrier"):
        return
    fire(f)
    if f == "typeerror":
        torch.cat([x, x.shape[0]])
    elif f == "runtime_op":
        proj = torch.randn(48, 16)
        _ = x @ proj
    elif f == "filenotfound":
        torch.load(f"/tmp/ckpt_sealedc/epoch_0/shard_{RANK:02d}.pt")
    elif f == "recursion":
        cfg = {"optim": {"lr": 0.05}}
        cfg["optim"]["parent"] = cfg
        walk(cfg)
    elif f == "assert":
        assert y.float().mean() < 0.3, f"label imbalance on rank {RANK}: {y.float().mean():.3f}"
    elif f == "stuck_lock":
        import threading
        lk = threading.Lock()
        lk.acquire()
        lk.acquire()
    elif f == "stuck_read":
        r, w = os.pipe()
        os.read(r, 1)
    elif f == "busy":
        v = 0
        while True:
            v = (v * 31 + 7) % 1000003
    elif f == "exit0":
        print(f"[rank {RANK}] shard exhausted, nothing left to do", flush=True)
        sys.exit(0)
    elif f == "sigkill":
        import signal
        os.kill(os.getpid(), signal.SIGKILL)
    elif f == "sigsegv":
        import ctypes
        ctypes.string_at(0)
    elif f == "sigabrt":
        os.abort()
    elif f == "sysexit":
        print(f"ERROR: rank {RANK}: gradient norm is nan at step {step}, aborting", file=sys.stderr, flush=True)
        sys.exit(3)


loss_fn = torch.nn.CrossEntropyLoss()
for step, (x, y) in enumerate(loader):
    if step >= STEPS:
        break
    maybe_fault(step, x, y)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    sync_grads(step)
    opt.step()
    l = loss.detach().clone()
    dist.all_reduce(l)
    if RANK == 0:
        print(f"step {step} loss {l.item() / WORLD:.4f}", flush=True)
    if os.environ.get("MB") and step == FAULT_STEP:
        if MY_FAULT == "monitored_barrier":
            fire("monitored_barrier")
            print(f"[rank {RANK}] running extra validation pass", flush=True)
            time.sleep(60)
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=8))
    time.sleep(0.15)

dist.barrier()
print(f"[rank {RANK}] training finished", flush=True)
dist.destroy_process_group()
