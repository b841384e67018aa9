"""Tiny distributed training loop (gloo, CPU) used to make batch F.

Behaviour is driven by the JSON in env TRAIN_OPTS (written by make_runs.py).
A per-rank state file is written to TRAIN_STATE_DIR (outside the run folder)
recording rank / local rank / node / attempt and whether/when the rank's
injected behaviour fired.  Nothing about that is printed.
"""
import ctypes
import datetime
import json
import os
import signal
import sys
import threading
import time
import traceback
import warnings

OPTS = json.loads(os.environ.get("TRAIN_OPTS", "{}"))
RANK = int(os.environ.get("RANK", "0"))
LOCAL = int(os.environ.get("LOCAL_RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
NODE = os.environ.get("NODE_NAME") or ("node" + os.environ.get("GROUP_RANK", "0"))
STATE_DIR = os.environ.get("TRAIN_STATE_DIR")

if OPTS.get("rank_log_dir"):
    _f = open(os.path.join(OPTS["rank_log_dir"], f"rank{RANK}.log"), "a", buffering=1)
    os.dup2(_f.fileno(), 1)
    os.dup2(_f.fileno(), 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402


def _pick():
    for f in OPTS.get("faults", []):
        if int(f.get("attempt", 0)) != ATTEMPT:
            continue
        if "rank" in f and int(f["rank"]) == RANK:
            return f
        if "node" in f and f["node"] == NODE and int(f.get("local", 0)) == LOCAL:
            return f
    return None


PLAN = _pick()
KIND = PLAN["kind"] if PLAN else None
AT = int(PLAN.get("step", 0)) if PLAN else -1


def _state(fired=None, where=None):
    if not STATE_DIR:
        return
    path = os.path.join(STATE_DIR, f"a{ATTEMPT}_r{RANK}_{os.getpid()}.json")
    rec = {"rank": RANK, "local_rank": LOCAL, "node": NODE, "attempt": ATTEMPT,
           "world": WORLD, "kind": KIND, "planned_step": AT,
           "fired": fired is not None, "fired_at": fired, "where": where,
           "pid": os.getpid()}
    with open(path + ".tmp", "w") as fh:
        json.dump(rec, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(path + ".tmp", path)


def mark(where):
    _state(time.time(), where)


_state()


class Synthetic(Dataset):
    def __init__(self, n=512, kind=None, after=0):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)
        self.kind = kind
        self.after = after
        self.seen = 0

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        if self.kind and info is not None and info.id == 0:
            self.seen += 1
            if self.seen > self.after:
                if self.kind == "dl_exception":
                    mark("worker")
                    rec = {"input": self.x[i], "target": int(self.y[i])}
                    return decode_record(rec, i)
                if self.kind == "dl_sigkill":
                    mark("worker")
                    os.kill(os.getpid(), signal.SIGKILL)
        return self.x[i], self.y[i]


def decode_record(rec, i):
    shard = rec["meta"]["shard"] if "meta" in rec else None
    if shard is None:
        raise ValueError(f"record {i} has no 'meta' field; cannot determine shard for sample")
    return rec


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def log(msg):
    print(f"[rank{RANK}] {msg}", flush=True)


# ---------------------------------------------------------------- behaviours
def load_config():
    cfg = {"optimizer": {"lr": 0.05, "momentum": 0.9}, "schedule": {"type": "cosine"}}
    return cfg["schedule"]["warmup_steps"]


def flatten_cfg(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten_cfg(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


class DataIntegrityError(Exception):
    pass


def verify_shard(batch_idx, x):
    checksum = float(x.abs().sum())
    raise DataIntegrityError(
        f"checksum mismatch for shard {RANK:05d}, batch {batch_idx}: got {checksum:.4f}, expected 0x7a3f")


def behave(step, phase, model, x, y, loss=None):
    """Called at phase 'pre' (before backward/allreduce) and 'post' (after)."""
    if KIND is None or step != AT:
        return
    k = KIND
    if phase == "pre":
        if k == "valueerror":
            mark(phase)
            bad = int(y.max()) + 5
            raise ValueError(f"Invalid label value {bad} encountered in batch {step}; expected labels in [0, 4)")
        if k == "shape":
            mark(phase)
            proj = torch.randn(17, 8)
            model_in = torch.relu(x @ torch.randn(16, 32))
            _ = model_in @ proj
        if k == "keyerror":
            mark(phase)
            load_config()
        if k == "cpu_oom":
            mark(phase)
            torch.empty((1 << 43,), dtype=torch.float32)
        if k == "fnf":
            mark(phase)
            torch.load(os.path.join(os.getcwd(), "checkpoints", f"step_{step:06d}", f"shard_{RANK}.pt"))
        if k == "assert":
            mark(phase)
            gn = float(x.norm()) * 1e6
            assert gn < 1e3, f"grad norm {gn:.2f} exceeds max_grad_norm guard"
        if k == "typeerror":
            mark(phase)
            torch.cat(x, y)
        if k == "modnotfound":
            mark(phase)
            import torchmetrics_ext  # noqa: F401
        if k == "recursion":
            mark(phase)
            a = {"name": "encoder"}
            a["parent"] = a
            flatten_cfg(a)
        if k == "indexerror":
            mark(phase)
            table = torch.zeros(4, 8)
            _ = table[torch.tensor([int(y.max()) + 7])]
        if k == "cholesky":
            mark(phase)
            m = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
            torch.linalg.cholesky(m)
        if k == "jsondecode":
            mark(phase)
            json.loads(open(os.devnull).read())
        if k == "custom":
            mark(phase)
            verify_shard(step, x)
        if k == "sleep":
            mark(phase)
            time.sleep(900)
        if k == "deadlock":
            mark(phase)
            lock = threading.Lock()
            with lock:
                update_stats(lock)
        if k == "pipe_read":
            mark(phase)
            r, _w = os.pipe()
            os.read(r, 4096)
        if k == "busy":
            mark(phase)
            v = 1.0
            while True:
                v = v * 1.0000001 + 1e-9
        if k == "sigkill":
            mark(phase)
            os.kill(os.getpid(), signal.SIGKILL)
        if k == "sigsegv":
            mark(phase)
            ctypes.string_at(0)
        if k == "sigabrt":
            mark(phase)
            os.abort()
        if k == "sigbus":
            mark(phase)
            os.kill(os.getpid(), signal.SIGBUS)
        if k == "exit0":
            mark(phase)
            sys.exit(0)
        if k == "exit_nz":
            mark(phase)
            sys.exit(int(PLAN.get("code", 3)))
    if phase == "post":
        if k == "nan_after":
            mark(phase)
            raise FloatingPointError(f"Non-finite loss detected at step {step}: loss=nan")


def update_stats(lock):
    with lock:
        pass


def long_eval(model):
    mark("eval")
    end = time.time() + 900
    with torch.no_grad():
        while time.time() < end:
            z = torch.randn(256, 16)
            for _ in range(50):
                z = torch.tanh(model(z) @ torch.randn(4, 16))


def allreduce_grads(model, step):
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    mm = KIND if (KIND and KIND.startswith("mm_") and step == AT) else None
    if mm == "mm_shape":
        mark("collective")
        flat = torch.cat([flat, torch.zeros(3)])
        dist.all_reduce(flat)
    elif mm == "mm_dtype":
        mark("collective")
        flat = flat.double()
        dist.all_reduce(flat)
    elif mm == "mm_op":
        mark("collective")
        dist.broadcast(flat, src=0)
    elif mm == "mm_skip":
        mark("collective")
    else:
        dist.all_reduce(flat)
    flat = flat.float()[: sum(g.numel() for g in grads)] / WORLD
    off = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[off:off + n].view_as(g))
        off += n


def save_checkpoint(model, step):
    d = os.path.join(os.getcwd(), "ckpt")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"step{step}_rank{RANK}.pt")
    torch.save(model.state_dict(), path)
    if KIND == "ckpt_hang" and step == AT:
        mark("ckpt")
        with open(path, "ab") as fh:
            wait_for_flush(fh)
    log(f"saved checkpoint {os.path.basename(path)}")


def wait_for_flush(fh):
    while True:
        time.sleep(1.0)


def main():
    timeout = datetime.timedelta(seconds=float(OPTS.get("pg_timeout", 10)))
    if OPTS.get("prefix_store"):
        # the agent's TCPStore outlives a restart; keep each attempt's keys apart
        base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                             is_master=False, timeout=timeout)
        store = dist.PrefixStore(f"trainer/restart_{ATTEMPT}", base)
        dist.init_process_group("gloo", store=store, rank=RANK, world_size=WORLD, timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    torch.manual_seed(0)
    model = Net()
    ddp = bool(OPTS.get("ddp"))
    if OPTS.get("ddp"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lossf = nn.CrossEntropyLoss()
    workers = int(OPTS.get("workers", 0))
    wkind = KIND if KIND in ("dl_exception", "dl_sigkill") else None
    ds = Synthetic(kind=wkind, after=int(AT) if wkind else 0)
    sampler = DistributedSampler(ds, num_replicas=WORLD, rank=RANK, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=workers)
    steps = int(OPTS.get("steps", 12))
    ckpt_step = OPTS.get("ckpt_step")
    eval_step = OPTS.get("eval_step")
    if OPTS.get("warn"):
        warnings.warn("gradient accumulation steps not set; defaulting to 1", UserWarning)
        _ = torch.tensor(torch.ones(2))
    log(f"world_size={WORLD} local_rank={LOCAL} steps={steps}")
    step = 0
    it = iter(loader)
    while step < steps:
        try:
            x, y = next(it)
        except StopIteration:
            sampler.set_epoch(step)
            it = iter(loader)
            continue
        behave(step, "pre", model, x, y)
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        if not ddp:
            allreduce_grads(model.module if hasattr(model, "module") else model, step)
        behave(step, "post", model, x, y, loss)
        opt.step()
        if step % 3 == 0 or step == steps - 1:
            log(f"step {step} loss {loss.item():.4f}")
        if OPTS.get("caught") and step == 4 and RANK == 0:
            try:
                json.loads("{'metrics': 1}")
            except json.JSONDecodeError:
                print("metrics upload failed, will retry next interval:", file=sys.stderr)
                traceback.print_exc()
        if eval_step is not None and step == int(eval_step):
            if KIND == "long_eval":
                long_eval(model)
            dist.barrier()
            log(f"eval done at step {step}")
        if ckpt_step is not None and step == int(ckpt_step):
            save_checkpoint(model, step)
            dist.barrier()
        time.sleep(float(OPTS.get("step_sleep", 0.15)))
        step += 1
    dist.barrier()
    log("training complete")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
