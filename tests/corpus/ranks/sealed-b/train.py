"""Small multi-rank training job with one injected fault (see make_runs.py)."""
import argparse, ctypes, json, os, signal, socket, sys, threading, time, traceback, warnings
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
NODE = os.environ.get("NODE_NAME", "")
SIDE = os.environ.get("SIDE_DIR")
# an agent that restarts because its peer failed may not bump its restart count,
# so a worker also counts as a restart if a fault already fired in this run
if SIDE and os.path.exists(os.path.join(SIDE, "fired_marker")):
    ATTEMPT = max(ATTEMPT, 1)
RANK_LOG = None
if os.environ.get("RANK_LOG_DIR"):
    RANK_LOG = open(os.path.join(os.environ["RANK_LOG_DIR"], f"rank_{RANK}.log"), "a", buffering=1)


def side(fired):
    if not SIDE:
        return
    os.makedirs(SIDE, exist_ok=True)
    p = os.path.join(SIDE, f"a{ATTEMPT}_r{RANK}_p{os.getpid()}.json")
    with open(p + ".tmp", "w") as f:
        json.dump({"rank": RANK, "local_rank": LOCAL_RANK, "node": NODE, "attempt": ATTEMPT,
                   "fired": fired, "t": time.time()}, f)
    os.replace(p + ".tmp", p)
    if fired:
        open(os.path.join(SIDE, "fired_marker"), "a").close()


def log(msg, err=False):
    stream = sys.stderr if err else sys.stdout
    print(msg, file=stream, flush=True)
    if RANK_LOG:
        RANK_LOG.write(time.strftime("%Y-%m-%d %H:%M:%S ") + msg + "\n")


class Toy(Dataset):
    def __init__(self, n, kill_at=None):
        self.n, self.kill_at = n, kill_at
        g = torch.Generator().manual_seed(1234 + RANK)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.kill_at is not None and i == self.kill_at:
            side(True)
            os.kill(os.getpid(), signal.SIGKILL)
        return self.x[i], self.y[i]


def fault(kind, sub, model):
    side(True)
    if kind == "exception":
        if sub == "shape":
            w = torch.randn(32, 16)
            torch.randn(8, 24) @ w
        elif sub == "key":
            cfg = {"lr": 0.1, "momentum": 0.9}
            print(cfg["weight_decay"])
        elif sub == "index":
            buckets = [torch.zeros(4) for _ in range(3)]
            buckets[RANK + 5].add_(1)
        elif sub == "zerodiv":
            n_tokens = 0
            print(1.0 / n_tokens)
        else:
            with open("/nonexistent/checkpoints/step_000100.pt", "rb") as f:
                f.read()
    elif kind == "hang-stuck-rank":
        if sub == "lock":
            lk = threading.Lock()
            lk.acquire()
            t = threading.Timer(35, lk.release)
            t.start()
            lk.acquire()
        elif sub == "read":
            r, w = os.pipe()
            threading.Timer(35, lambda: os.write(w, b"x")).start()
            os.read(r, 1)
        else:
            end = time.time() + 35
            acc = 0
            while time.time() < end:
                acc += sum(range(1000))
    elif kind == "early-exit":
        log(f"rank {RANK}: data shard exhausted, stopping")
        sys.exit(0)
    elif kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "sigsegv":
        ctypes.string_at(0)
    elif kind == "sigabrt":
        os.abort()
    elif kind == "exit-code":
        log(f"ERROR: rank {RANK}: checksum mismatch in shard {RANK:03d}, refusing to continue", err=True)
        sys.exit(int(sub or 2))
    elif kind == "collective-mismatch":
        if sub == "shape":
            t = torch.ones(7)
            dist.all_reduce(t)
        elif sub == "dtype":
            t = torch.ones(sum(p.numel() for p in model.parameters()), dtype=torch.float64)
            dist.all_reduce(t)
        else:
            t = torch.ones(sum(p.numel() for p in model.parameters()))
            dist.broadcast(t, src=0)
    elif kind == "monitored-barrier":
        time.sleep(40)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="healthy")
    ap.add_argument("--sub", default="")
    ap.add_argument("--culprit", type=int, default=-1)
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--pg-timeout", type=int, default=10)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--need-ext", action="store_true")
    ap.add_argument("--warn", default="")
    ap.add_argument("--a1-kind", default="")
    ap.add_argument("--a1-culprit", type=int, default=-1)
    a = ap.parse_args()
    side(False)
    if ATTEMPT >= 1 and a.a1_kind:
        a.kind, a.culprit = a.a1_kind, a.a1_culprit
    if a.need_ext:
        try:
            import fused_shard_ext  # noqa: F401  (present only on some nodes)
        except ImportError:
            side(True)
            raise
    torch.manual_seed(0)
    dist.init_process_group("gloo", timeout=timedelta(seconds=a.pg_timeout))
    world = dist.get_world_size()
    if RANK == 0:
        log(f"initialized process group: world_size={world} backend=gloo")
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kill_at = None
    if a.kind == "dataloader-worker-killed" and RANK == a.culprit:
        kill_at = 8 * a.step + 3
    ds = Toy(64, kill_at)
    dl = DataLoader(ds, batch_size=8, num_workers=a.workers, shuffle=False)
    if a.warn == "warn" and RANK in (0, world - 1):
        warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
    if a.warn == "handled" and RANK == 1 % world:
        try:
            torch.load("/tmp/does-not-exist/latest.pt")
        except FileNotFoundError:
            traceback.print_exc()
            log(f"rank {RANK}: no checkpoint found, starting from scratch", err=True)
    step = 0
    for ep in range(100):
        for x, y in dl:
            if step >= a.steps:
                break
            if RANK == a.culprit and step == a.step and a.kind not in ("dataloader-worker-killed", "healthy"):
                if a.kind == "monitored-barrier":
                    fault(a.kind, a.sub, model)
                else:
                    fault(a.kind, a.sub, model)
            if a.kind == "monitored-barrier" and step == a.step:
                dist.monitored_barrier(timeout=timedelta(seconds=a.pg_timeout), wait_all_ranks=True)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= world
            off = 0
            for p in model.parameters():
                n = p.numel()
                p.grad.copy_(flat[off:off + n].view_as(p))
                off += n
            opt.step()
            log(f"[rank {RANK}] epoch {ep} step {step} loss {loss.item():.4f}")
            time.sleep(0.3)
            step += 1
        if step >= a.steps:
            break
    dist.barrier()
    if RANK == 0:
        log("training finished")
    dist.destroy_process_group()


if os.environ.get("USE_RECORD"):
    from torch.distributed.elastic.multiprocessing.errors import record
    main = record(main)

if __name__ == "__main__":
    try:
        main()
    except Exception:
        if RANK_LOG:
            RANK_LOG.write(traceback.format_exc())
        raise
