"""Tiny data-parallel regression job launched by make_runs.py under torchrun.

Every run gets a JSON config (path in env TRAIN_CFG, kept outside the run
folder).  The config's "plan" maps a restart attempt (TORCHELASTIC_RESTART_COUNT)
to at most one fault: {"kind", "rank", "step", "variant"}.  Only the rank named
there misbehaves, at the step named there; every other rank trains normally.

At start-up each rank records who it is (global rank, local rank, node name from
env NODE_NAME, attempt, pid) in a side file under cfg["side_dir"], which
make_runs.py reads to write the labels and then deletes.  The side files are
never part of a run's inputs.
"""
import json
import os
import sys
import time

CFG = json.load(open(os.environ["TRAIN_CFG"]))
RANK = int(os.environ["RANK"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
NODE = os.environ.get("NODE_NAME", "node-a")

if CFG.get("per_rank_dir"):
    # The job's own logging setup: each rank appends its stdout+stderr to rank_<N>.log.
    _fd = os.open(os.path.join(CFG["per_rank_dir"], f"rank_{RANK}.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_fd, 1)
    os.dup2(_fd, 2)
    os.close(_fd)

os.makedirs(CFG["side_dir"], exist_ok=True)
with open(os.path.join(CFG["side_dir"], f"a{ATTEMPT}_r{RANK}_p{os.getpid()}.json"), "w") as _f:
    json.dump({"rank": RANK, "local_rank": LOCAL_RANK, "world": WORLD, "node": NODE,
               "attempt": ATTEMPT, "pid": os.getpid(), "t": time.time(),
               "group_rank": int(os.environ.get("GROUP_RANK", "0"))}, _f)

PLAN = CFG.get("plan", {}).get(str(ATTEMPT)) or {}
KIND = PLAN.get("kind")
VARIANT = PLAN.get("variant", "")
FAULT_STEP = PLAN.get("step", -1)
IS_CULPRIT = PLAN.get("rank") == RANK

if CFG.get("faulthandler"):
    import faulthandler
    faulthandler.enable()

import logging
import signal
import threading
import traceback
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torch.distributed.elastic.multiprocessing.errors import record

logging.basicConfig(level=logging.INFO,
                    format="%(asctime)s %(levelname)s [rank%(rank)s] %(message)s")
log = logging.LoggerAdapter(logging.getLogger("train"), {"rank": RANK})

FEATURES = 16
VOCAB = [f"tok{i}" for i in range(32)]


def mark_fired(what):
    """Side record (never an input) that the planned fault point was reached."""
    path = os.path.join(CFG["side_dir"], f"fired_a{ATTEMPT}_r{RANK}_p{os.getpid()}.json")
    if not os.path.exists(path):
        with open(path, "w") as f:
            json.dump({"rank": RANK, "node": NODE, "attempt": ATTEMPT, "what": what,
                       "t": time.time()}, f)


def fault(kind, step):
    hit = IS_CULPRIT and KIND == kind and step == FAULT_STEP
    if hit:
        mark_fired(kind)
    return hit


class ShardDataset(Dataset):
    def __init__(self, n, rank):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, FEATURES, generator=g)
        self.w = torch.randn(FEATURES, 1, generator=g)
        self.rank = rank
        self.fetched = 0

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        self.fetched += 1
        if (KIND == "dataloader-worker-killed" and self.rank == PLAN.get("rank")
                and torch.utils.data.get_worker_info() is not None
                and self.fetched == CFG["batch"] * max(FAULT_STEP, 1) // 2 + 1):
            mark_fired("dataloader-worker-killed")
            if VARIANT == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif VARIANT == "sigsegv":
                import ctypes
                ctypes.string_at(0)
            elif VARIANT == "sigbus":
                os.kill(os.getpid(), signal.SIGBUS)
            else:
                os._exit(1)
        x = self.x[idx]
        return x, x @ self.w


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.fc2 = nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


# ---------------------------------------------------------------- helpers
_ckpt_lock = threading.Lock()


def save_checkpoint(model, step):
    # stand-in for a checkpoint writer: everything happens under a lock
    with _ckpt_lock:
        if fault("hang-stuck-rank", step) and VARIANT == "lock":
            time.sleep(300)
        if fault("sigkill", step) and VARIANT == "ckpt":
            os.kill(os.getpid(), signal.SIGKILL)
        torch.save(model.state_dict(), os.path.join(CFG["work_dir"], f"ckpt_r{RANK}.pt"))


def read_control_message(step):
    # ranks may read an operator control message from a pipe before evaluation
    path = os.path.join(CFG["work_dir"], f"control_{RANK}.fifo")
    if not os.path.exists(path):
        os.mkfifo(path)
    with open(path) as f:
        return f.readline()


def evaluate(model, steps):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(steps):
            x = torch.randn(64, FEATURES)
            total += float(model(x).abs().mean())
            time.sleep(0.25)
    model.train()
    return total / max(steps, 1)


def lookup_tokens(ids):
    return [VOCAB[i] for i in ids]


def tokens_for(step):
    ids = [(step * 7 + j) % len(VOCAB) for j in range(6)]
    if fault("exception", step) and VARIANT in ("index-list", "embedding"):
        ids[3] = len(VOCAB) + RANK  # corrupt sample in this rank's shard
    return ids


def throughput(samples, intervals):
    return samples / intervals


def all_reduce_mean(t):
    dist.all_reduce(t)
    t /= WORLD
    return t


def dump_flight_recorder(reason):
    prefix = CFG.get("fr_prefix")
    if not prefix:
        return
    try:
        data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)
        with open(f"{prefix}{RANK}", "wb") as f:
            f.write(data)
        print(f"[rank{RANK}] wrote flight recorder trace ({reason}) to {prefix}{RANK}",
              file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        print(f"[rank{RANK}] flight recorder dump failed: {e!r}", file=sys.stderr)


def inject(step, model, x, y):
    """Per-step behaviour of the culprit; returns possibly modified (x, y)."""
    if not IS_CULPRIT or step != FAULT_STEP:
        return x, y
    if KIND in ("hang-stuck-rank", "early-exit", "sigkill", "sigsegv", "other"):
        mark_fired(KIND)
    if KIND == "exception" or KIND == "oom-like-exception":
        if VARIANT == "matmul-shape":
            x = torch.cat([x, torch.ones(x.shape[0], 1)], dim=1)  # extra feature column
        elif VARIANT == "batch-size":
            y = y[:-1]
        elif VARIANT == "cat-dim":
            x = x[:, :-2]
    if KIND == "hang-stuck-rank":
        if VARIANT == "fifo":
            log.info("reading control message before evaluation")
            read_control_message(step)
        elif VARIANT == "eval":
            log.info("running evaluation")
            evaluate(model, 1200)
        elif VARIANT == "queue":
            import queue
            q = queue.Queue()
            log.info("waiting for prefetch queue")
            q.get()
        elif VARIANT == "join":
            t = threading.Thread(target=time.sleep, args=(300,), daemon=True)
            t.start()
            log.info("waiting for async upload thread")
            t.join()
    if KIND == "early-exit":
        if VARIANT == "sys-exit":
            log.info("reached sample budget for this shard, exiting")
            sys.exit(0)
        elif VARIANT == "os-exit":
            os._exit(0)
        elif VARIANT == "return":
            raise StopIteration  # handled in train(): leaves the loop and returns
    if KIND == "sigkill" and VARIANT == "step":
        os.kill(os.getpid(), signal.SIGKILL)
    if KIND == "sigsegv":
        if VARIANT == "faulthandler":
            import faulthandler
            faulthandler._sigsegv()
        else:
            import ctypes
            ctypes.string_at(0)
    if KIND == "other":
        if VARIANT == "abort":
            os.abort()
        elif VARIANT == "exit-code":
            print(f"fatal: shard index file for rank {RANK} is inconsistent", file=sys.stderr)
            sys.exit(3)
    return x, y


def metric_all_reduce(loss, step):
    t = loss.detach().reshape(1).clone()
    if fault("collective-mismatch", step):
        if VARIANT == "shape":
            t = torch.cat([t, t])
        elif VARIANT == "dtype":
            t = t.double()
        elif VARIANT == "broadcast":
            dist.broadcast(t, src=RANK)
            return t
        elif VARIANT == "all-gather":
            out = [torch.zeros_like(t) for _ in range(WORLD)]
            dist.all_gather(out, t)
            return t
        elif VARIANT == "extra":
            extra = torch.tensor([float(step)])
            dist.all_reduce(extra)
        elif VARIANT == "skip":
            return t
    dist.all_reduce(t)
    return t / WORLD


# ---------------------------------------------------------------- main loop
def train():
    timeout = timedelta(seconds=CFG["pg_timeout"])
    if CFG.get("attempt_store_prefix"):
        # keep each restart attempt's rendezvous keys apart in the long-lived store
        use_agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), WORLD,
                              is_master=(not use_agent and RANK == 0), timeout=timeout)
        store = dist.PrefixStore(f"attempt_{ATTEMPT}", store)
        dist.init_process_group("gloo", store=store, rank=RANK, world_size=WORLD, timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    log.info("initialized process group: rank %d/%d local_rank %d", RANK, WORLD, LOCAL_RANK)

    if KIND == "missing-module":
        if VARIANT == "all-ranks" or LOCAL_RANK == 0:
            log.info("loading fused optimizer extension")
            mark_fired("missing-module-import")
            import fused_ops  # noqa: F401
        if VARIANT == "local-zero-builds":
            dist.barrier()

    if CFG.get("healthy_extra") == "handled-exception":
        try:
            state = torch.load(os.path.join(CFG["work_dir"], "resume", "latest.pt"))
        except FileNotFoundError:
            log.warning("no checkpoint to resume from, starting from scratch")
            traceback.print_exc()

    torch.manual_seed(0)
    model = Net()
    tok_emb = nn.Embedding(len(VOCAB), 4)
    if CFG.get("ddp", True):
        model = DDP(model, find_unused_parameters=CFG.get("find_unused", False))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    if CFG.get("healthy_extra") == "sched-warning":
        sched.step()  # before any optimizer.step(): torch warns about the order

    ds = ShardDataset(CFG["batch"] * WORLD * (CFG["steps"] + 2), RANK)
    sampler = DistributedSampler(ds, num_replicas=WORLD, rank=RANK, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=CFG["batch"], sampler=sampler,
                        num_workers=CFG.get("workers", 0))

    t0 = time.time()
    steps_done = 0
    for step, (x, y) in enumerate(loader):
        if step >= CFG["steps"]:
            break
        try:
            x, y = inject(step, model, x, y)
        except StopIteration:
            log.info("no more local data at step %d, leaving training loop", step)
            return

        if fault("oom-like-exception", step):
            # activation cache sized from a bad sequence length
            seq = 1 << 21
            cache = torch.empty(seq, seq // 8, FEATURES) if VARIANT == "empty" else \
                torch.zeros(x.shape[0], seq, seq // 64)
        if fault("exception", step):
            if VARIANT == "index-list":
                names = lookup_tokens(tokens_for(step))
            elif VARIANT == "embedding":
                tok_emb(torch.tensor(tokens_for(step)))
            elif VARIANT == "zerodiv":
                log.info("throughput %.1f samples/s", throughput(steps_done * CFG["batch"], steps_done - step))
            elif VARIANT == "keyerror":
                batch = {"inputs": x, "target": y}
                y = batch["labels"]
            elif VARIANT == "assert":
                probs = torch.softmax(x, dim=1) * 0.0
                nll = -torch.log(probs).mean()
                assert torch.isfinite(nll), f"non-finite loss {nll.item()} at step {step}"
            elif VARIANT == "filenotfound":
                with open(os.path.join(CFG["work_dir"], f"shard-{RANK:05d}-of-{WORLD:05d}.idx")) as f:
                    f.read()
            elif VARIANT == "cat-dim":
                x = torch.cat([x, torch.randn(2, FEATURES)], dim=0)
            elif VARIANT == "typeerror":
                scale = CFG.get("loss_scale")
                y = y * (scale + 1)
            elif VARIANT == "valueerror":
                int("step-" + str(step))

        out = model(x)
        if fault("exception", step) and VARIANT == "batch-size":
            loss = F.cross_entropy(out.repeat(1, 3), y.squeeze(1).long().clamp(0, 2))
        else:
            loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        if not CFG.get("ddp", True):
            for p in model.parameters():
                if p.grad is not None:
                    all_reduce_mean(p.grad)
        opt.step()
        sched.step()

        if fault("sigkill", step) and VARIANT == "after-backward":
            os.kill(os.getpid(), signal.SIGKILL)
        mean_loss = metric_all_reduce(loss, step)
        steps_done += 1
        if RANK == 0 or CFG.get("log_all"):
            print(f"[rank{RANK}] step {step} loss {mean_loss.sum().item():.4f} "
                  f"lr {sched.get_last_lr()[0]:.4f}", flush=True)

        if KIND == "monitored-barrier" and step == FAULT_STEP:
            if fault("monitored-barrier", step):
                log.info("saving local shard of optimizer state")
                time.sleep(300)
            dist.monitored_barrier(timeout=timedelta(seconds=CFG["mb_timeout"]),
                                   wait_all_ranks=(VARIANT == "wait-all"))
        if CFG.get("ckpt_every") and step % CFG["ckpt_every"] == 0 and step > 0:
            save_checkpoint(model, step)
        elif (KIND == "hang-stuck-rank" and VARIANT == "lock") or (KIND == "sigkill" and VARIANT == "ckpt"):
            if fault(KIND, step):
                save_checkpoint(model, step)
        time.sleep(CFG.get("step_sleep", 0.2))

    dist.barrier()
    if CFG.get("fr_prefix"):
        dump_flight_recorder("end of training")
    if RANK == 0:
        print(f"training finished: {steps_done} steps in {time.time() - t0:.1f}s", flush=True)
    dist.destroy_process_group()


def main():
    if CFG.get("fr_prefix"):
        def _on_term(signum, frame):
            dump_flight_recorder(signal.Signals(signum).name)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        signal.signal(signal.SIGTERM, _on_term)
    try:
        train()
    except Exception as e:
        if CFG.get("fr_prefix"):
            dump_flight_recorder(type(e).__name__)
        raise


if __name__ == "__main__":
    if CFG.get("use_record"):
        record(main)()
    else:
        main()
