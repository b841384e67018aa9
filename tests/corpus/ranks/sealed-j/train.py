"""Small data-parallel training job (CPU, gloo) that make_runs.py launches under torchrun.

Configured through the JOB_CFG environment variable (JSON).  At most one
behaviour per (node, local rank, restart attempt) is taken from cfg["plan"];
node-wide behaviours use local rank "*".  Every worker writes its identity to
side files in $JOB_SIDE_DIR (outside the run folder), and a second side file
at the moment its planned behaviour happens (wall and monotonic time).
make_runs.py builds the labels from those files; nothing printed here names
the plan.
"""
import ctypes
import fcntl
import json
import logging
import math
import mmap
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
import warnings
from datetime import timedelta

RANK = int(os.environ.get("RANK", "0"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
NODE = os.environ.get("NODE_NAME", "node0")
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
CFG = json.loads(os.environ.get("JOB_CFG", "{}"))
SIDE = os.environ.get("JOB_SIDE_DIR", "")


def _atomic_json(name, rec):
    if not SIDE:
        return
    os.makedirs(SIDE, exist_ok=True)
    path = os.path.join(SIDE, name)
    with open(path + ".part", "w") as f:
        json.dump(rec, f)
    os.replace(path + ".part", path)


_atomic_json(f"worker_{NODE}_{LOCAL_RANK}_{ATTEMPT}.json",
             {"rank": RANK, "local_rank": LOCAL_RANK, "node": NODE, "attempt": ATTEMPT,
              "pid": os.getpid(), "world": WORLD})


def _mine():
    out = {}
    for p in CFG.get("plan", []):
        if p["node"] == NODE and p["attempt"] == ATTEMPT and (p["lr"] == "*" or p["lr"] == LOCAL_RANK):
            out[p["kind"]] = p
    return out


MINE = _mine()


def fired(kind, where="rank"):
    _atomic_json(f"fired_{NODE}_{LOCAL_RANK}_{ATTEMPT}_{os.getpid()}.json",
                 {"kind": kind, "rank": RANK, "node": NODE, "local_rank": LOCAL_RANK,
                  "attempt": ATTEMPT, "wall": time.time(), "mono": time.monotonic(),
                  "where": where})


def want(kind, step=None):
    p = MINE.get(kind)
    if p is None:
        return False
    if step is not None and p.get("step") != step:
        return False
    if p.get("delay"):
        time.sleep(p["delay"])
    fired(kind)
    return True


# ---------------------------------------------------------------- output setup
LAYOUT = CFG.get("layout", "")
if LAYOUT in ("per-rank", "host-rank"):
    d = CFG["rank_dir"]
    os.makedirs(d, exist_ok=True)
    fn = f"rank{RANK}.log" if LAYOUT == "per-rank" else f"{NODE}-rank{RANK}.log"
    fd = os.open(os.path.join(d, fn), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

log = logging.getLogger("trainer")
log.setLevel(logging.INFO)
log.propagate = False


class _RankFilter(logging.Filter):
    def filter(self, record):
        record.rank = RANK
        return True


if LAYOUT == "pylogging":
    os.makedirs(CFG["rank_dir"], exist_ok=True)
    fh = logging.FileHandler(os.path.join(CFG["rank_dir"], CFG["pylog_name"]))
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s rank=%(rank)s %(message)s"))
    fh.addFilter(_RankFilter())
    log.addHandler(fh)
    logging.captureWarnings(True)
    wl = logging.getLogger("py.warnings")
    wl.addHandler(fh)
    wl.propagate = False
else:
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(logging.Formatter(f"[%(asctime)s] [rank {RANK}] %(levelname)s %(message)s"))
    if RANK == 0 or CFG.get("all_ranks_log", True):
        log.addHandler(h)

# ---------------------------------------------------------------- node-local setup (before torch)
if "node-missing-vocab" in MINE or CFG.get("vocab"):
    vocab_path = os.environ.get("VOCAB_FILE", "")
    if "node-missing-vocab" in MINE:
        fired("node-missing-vocab")
    with open(vocab_path) as f:
        VOCAB = [w.strip() for w in f]
if CFG.get("need_env"):
    if "node-env-missing" in MINE:
        fired("node-env-missing")
    DATA_ROOT = os.environ["TRAIN_DATA_ROOT"]
if CFG.get("need_pkg"):
    if "node-stale-package" in MINE:
        fired("node-stale-package")
    from fastkern import fused_bias_gelu  # noqa: F401

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

FEAT, CLASSES = 16, 4


class Records(Dataset):
    """Each sample is decoded from a small byte record (text header + floats)."""

    def __init__(self, n, plan):
        g = torch.Generator().manual_seed(11)
        self.x = torch.randn(n, FEAT, generator=g)
        self.y = torch.randint(0, CLASSES, (n,), generator=g)
        self.plan = plan
        self.count = 0

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.count += 1
        p = self.plan
        header = f"rec-{i:06d}".encode()
        if p and p["kind"] == "sample-unicode" and self.count == p["at"]:
            fired("sample-unicode")
            header = b"rec-\xff\xfe" + header[4:]
        tag = header.decode("utf-8")
        if p and self.count == p["at"] and p["kind"] in ("worker-os-exit", "worker-timeout"):
            fired(p["kind"], "dataloader worker")
            if p["kind"] == "worker-os-exit":
                os._exit(1)
            time.sleep(60)
        return {"x": self.x[i], "y": self.y[i], "tag": tag}


def make_collate(plan):
    state = {"n": 0}

    def collate(items):
        state["n"] += 1
        if plan and plan["kind"] == "collate-error" and state["n"] == plan["at"]:
            fired("collate-error", "dataloader worker")
            lens = sorted({len(it["tag"]) for it in items} | {len(items[0]["tag"]) + 3})
            raise ValueError(f"cannot batch records of unequal header length {lens}")
        return {"x": torch.stack([it["x"] for it in items]),
                "y": torch.stack([it["y"] for it in items]),
                "tag": [it["tag"] for it in items]}
    return collate


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEAT, 32)
        self.fc2 = nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def flatten_cfg(node, out, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            flatten_cfg(v, out, f"{prefix}{k}.")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            flatten_cfg(v, out, f"{prefix}{i}.")
    else:
        out[prefix[:-1]] = node
    return out


class Uploader(threading.Thread):
    """Pushes checkpoint metadata in the background; errors are checked later."""

    def __init__(self, fail):
        super().__init__(daemon=True)
        self.fail = fail
        self.error = None

    def run(self):
        try:
            time.sleep(0.05)
            if self.fail:
                fired("uploader-thread-error", "background thread")
                raise ConnectionResetError(104, "Connection reset by peer while uploading shard metadata")
        except BaseException as e:  # noqa: BLE001
            self.error = e


def main():
    torch.manual_seed(0)
    steps = CFG.get("steps", 8)
    bs = 8
    dist.init_process_group("gloo", timeout=timedelta(seconds=CFG.get("pg_timeout", 10)))
    log.info("process group ready: rank %d of %d (local %d) on %s", RANK, WORLD, LOCAL_RANK, NODE)

    # per-rank shard index
    if CFG.get("shard_index"):
        idx_path = os.path.join(CFG["workdir"], f"shards/index-{RANK:03d}.json")
        os.makedirs(os.path.dirname(idx_path), exist_ok=True)
        text = json.dumps({"rank": RANK, "parts": [f"part-{RANK:03d}-{i}" for i in range(4)]})
        if want("shard-index-truncated"):
            text = text[: len(text) // 2]
        with open(idx_path, "w") as f:
            f.write(text)
        with open(idx_path) as f:
            shard_index = json.load(f)
        log.info("shard index: %d parts", len(shard_index["parts"]))

    if CFG.get("flatten_cfg"):
        tree = {"optim": {"lr": 0.05, "momentum": 0.9}, "data": {"workers": CFG.get("workers", 0)}}
        if want("config-cycle"):
            tree["data"]["defaults"] = tree
        flat = flatten_cfg(tree, {})
        log.info("config: %d keys", len(flat))

    model = Net()
    ddp = CFG.get("ddp", False)
    net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    wk = CFG.get("workers", 0)
    plan = None
    for k in ("sample-unicode", "worker-os-exit", "worker-timeout", "collate-error"):
        if k in MINE:
            p = MINE[k]
            plan = {"kind": k, "at": (p["step"] * bs + 1) if k != "collate-error" else p["step"] + 1}
    n = steps * bs * WORLD
    ds = Records(n, plan)
    sampler = DistributedSampler(ds, num_replicas=WORLD, rank=RANK, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=bs, sampler=sampler, num_workers=wk,
                        collate_fn=make_collate(plan), timeout=(4 if wk else 0))

    sub = None
    if CFG.get("subgroup"):
        members = list(range(0, WORLD, 2))
        if want("new-group-skipped"):
            log.info("building evaluation group")
        else:
            sub = dist.new_group(members)
        log.info("evaluation group ready")

    uploader = None
    fd_hoard = []
    if CFG.get("warnings"):
        warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available. Disabling.")
    t0 = time.time()
    for step, batch in enumerate(loader):
        x, y = batch["x"], batch["y"]
        time.sleep(CFG.get("pace", 0.15))

        if want("loss-inf", step):
            x = x.clone()
            x[2] = float("inf")
        if want("float-targets", step):
            y = y.float()
        if want("cpu-alloc", step):
            scratch = torch.empty(2 ** 41, dtype=torch.float32)  # activation buffer sized from a bad config
            del scratch
        if want("fd-leak", step):
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 64), hard))
            while True:
                fd_hoard.append(open(os.path.join(CFG["workdir"], f"cache-{RANK}.bin"), "ab"))

        out = net(x)
        loss = F.cross_entropy(out, y)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}; stopping (check input scaling)")
        opt.zero_grad()
        loss.backward()
        if not ddp:
            flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= WORLD
            off = 0
            for p in model.parameters():
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
        opt.step()

        # -------- things that stop a rank between steps
        if want("flock-deadlock", step):
            lock_path = os.path.join(CFG["workdir"], f"stats-{RANK}.lock")
            a = open(lock_path, "w")
            fcntl.flock(a, fcntl.LOCK_EX)
            b = open(lock_path, "w")  # second open file description: flock blocks on the first
            fcntl.flock(b, fcntl.LOCK_EX)
        if want("blocking-subprocess", step):
            log.info("syncing step %d artifacts", step)
            subprocess.run(["sleep", "100"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if want("queue-dead-producer", step):
            q = queue.Queue()

            def producer():
                try:
                    raise_if = {}["prefetch_depth"]  # noqa: F841
                    q.put(raise_if)
                except KeyError:
                    pass
            threading.Thread(target=producer, daemon=True).start()
            item = q.get()  # noqa: F841
        if want("straggler", step):
            time.sleep(16)
        if want("os-exit-zero", step):
            os._exit(0)
        if want("sys-exit-message", step):
            sys.exit(f"error: step {step}: shard part-{RANK:03d}-2 has 0 usable samples after filtering")
        if want("watchdog-sigkill", step):
            subprocess.Popen(["kill", "-9", str(os.getpid())])
            time.sleep(30)
        if want("null-deref", step):
            ctypes.cast(ctypes.c_void_p(8), ctypes.POINTER(ctypes.c_long)).contents.value
        if want("sigbus-mmap", step):
            path = os.path.join(CFG["workdir"], f"feat-{RANK}.bin")
            with open(path, "wb") as f:
                f.write(b"\0" * (1 << 20))
            f = open(path, "r+b")
            mm = mmap.mmap(f.fileno(), 0)
            os.truncate(path, 0)  # the shard is rewritten underneath the mapping
            _ = mm[(1 << 19)]
        if want("c-stack-overflow", step):
            sys.setrecursionlimit(10 ** 8)
            nest = []
            for _ in range(3_000_000):
                nest = [nest]
            repr(nest)
        if want("uploader-thread-error", step):
            uploader = Uploader(fail=True)
            uploader.start()
        elif uploader is None and step == 1:
            uploader = Uploader(fail=False)
            uploader.start()
        if uploader is not None and step == MINE.get("uploader-thread-error", {}).get("step", -9) + 2:
            uploader.join()
            if uploader.error is not None:
                raise RuntimeError("background metadata upload failed") from uploader.error

        # -------- per-step collectives
        stat = torch.tensor([loss.item(), float(len(y))])
        dist.all_reduce(stat)
        if want("extra-barrier", step):
            log.info("rank %d: waiting for peers before writing eval summary", RANK)
            dist.barrier()
        if CFG.get("bcast"):
            summary = torch.zeros(6)
            if want("broadcast-size", step):
                summary = torch.zeros(9)
            if RANK == 0:
                summary.fill_(loss.item())
            dist.broadcast(summary, src=0)
        if CFG.get("gather_counts"):
            cnt = torch.tensor([len(y), step], dtype=torch.int64)
            if want("allgather-dtype", step):
                cnt = cnt.to(torch.float32)
            outt = torch.zeros(2 * WORLD, dtype=cnt.dtype)
            dist.all_gather_into_tensor(outt, cnt)
        if sub is not None and RANK % 2 == 0 and step % 2 == 1:
            ev = torch.tensor([loss.item()])
            dist.all_reduce(ev, group=sub)
        if step % 2 == 1:
            log.info("step %d loss %.4f mean %.4f", step, loss.item(), stat[0].item() / WORLD)
        if CFG.get("retry_push") and step == 2 and RANK == 0:
            try:
                raise TimeoutError("metrics endpoint did not answer within 2.0s")
            except TimeoutError:
                log.warning("metrics push failed, will retry next step", exc_info=True)

        # -------- checkpoint
        if CFG.get("ckpt_step") == step:
            d = os.path.join(CFG["workdir"], f"ckpt/step-{step}/rank-{RANK}")
            if not want("ckpt-dir-missing", step):
                os.makedirs(d, exist_ok=True)
            sd = model.state_dict()
            if want("ckpt-prefix-keys", step):
                sd = {f"module.{k}": v for k, v in sd.items()}
            torch.save({"model": sd, "step": step}, os.path.join(d, "model.pt"))
            dist.barrier()
            ck = torch.load(os.path.join(d, "model.pt"), map_location="cpu")
            model.load_state_dict(ck["model"])
            log.info("checkpoint at step %d saved and verified", step)
        if CFG.get("mon_barrier_step") == step:
            if want("monitored-barrier-eval", step):
                log.info("running validation pass")
                time.sleep(40)
            dist.monitored_barrier(timeout=timedelta(seconds=8))

    dist.barrier()
    log.info("done: %d steps in %.1fs", steps, time.time() - t0)
    dist.destroy_process_group()
    _atomic_json(f"done_{NODE}_{LOCAL_RANK}_{ATTEMPT}.json", {"rank": RANK})


if __name__ == "__main__":
    if LAYOUT == "pylogging":
        try:
            main()
        except Exception:
            log.exception("training aborted")
            sys.exit(1)
    else:
        main()
