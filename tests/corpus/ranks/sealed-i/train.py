# Tiny seeded distributed training loop (gloo, CPU) used to produce batch I.
# Behaviour is configured through JOB_CFG (JSON); a fault (at most one per
# rank per attempt) is chosen from cfg["faults"] by (RANK, restart attempt).
import os, sys, time, json, signal, logging, threading, warnings, datetime, resource, zlib
import concurrent.futures as cf

_cfg = json.loads(os.environ.get("JOB_CFG", "{}"))
if _cfg.get("rank_log_dir"):
    _name = _cfg.get("rank_log_pattern", "rank{rank}.log").format(
        rank=os.environ.get("RANK", "0"), host=os.environ.get("JOB_NODE", ""))
    _fd = os.open(os.path.join(_cfg["rank_log_dir"], _name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_fd, 1); os.dup2(_fd, 2)

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.utils.data import Dataset, DataLoader
from torch.distributed.elastic.multiprocessing.errors import record

RANK = int(os.environ.get("RANK", 0))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
NODE = os.environ.get("JOB_NODE")
SIDE = os.environ.get("JOB_SIDE_DIR")
PYLOG = os.environ.get("JOB_PYLOG")
CFG = _cfg
MINE = None
for f in CFG.get("faults", []):
    if f["rank"] == RANK and f.get("attempt", 0) == ATTEMPT:
        MINE = f
        break
NOISE = CFG.get("noise", {}).get(str(RANK), [])

if PYLOG:
    # application logging: one shared file, custom format with the rank injected by a filter
    class _RankFilter(logging.Filter):
        def filter(self, record_):
            record_.rank = RANK
            return True
    _h = logging.FileHandler(PYLOG, mode="a", encoding="utf-8")
    _h.addFilter(_RankFilter())
    _h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(name)s] rank=%(rank)s %(message)s"))
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger().addHandler(_h)
    logging.captureWarnings(True)
else:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s [rank" + str(RANK) + "] %(name)s: %(message)s")
log = logging.getLogger("trainer")
dlog = logging.getLogger("trainer.data")
clog = logging.getLogger("trainer.ckpt")


def out(msg):
    if PYLOG:
        log.info(msg)
    else:
        print(msg, flush=True)


def _side(name, rec):
    if not SIDE:
        return
    rec.update(rank=RANK, local_rank=LOCAL_RANK, node=NODE, attempt=ATTEMPT, pid=os.getpid())
    tmp = os.path.join(SIDE, name + ".tmp%d" % os.getpid())
    with open(tmp, "w") as fh:
        json.dump(rec, fh)
    os.replace(tmp, os.path.join(SIDE, name))


def fire(kind):
    _side("fired_r%d_a%d_p%d.json" % (RANK, ATTEMPT, os.getpid()),
          {"kind": kind, "t": time.time(), "mono": time.monotonic(),
           "in_worker": torch.utils.data.get_worker_info() is not None})


def want(place, step):
    return MINE is not None and MINE["place"] == place and MINE.get("step", 0) == step


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.mid = nn.Linear(32, 32)
        self.head = nn.Linear(32, 4)
        self.skip_mid = False

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if not self.skip_mid:
            h = torch.relu(self.mid(h)) + h
        return self.head(h)


class Records(Dataset):
    """Synthetic records; each sample is 'decoded' from a small byte record."""

    def __init__(self, n, seed, as_dict=False):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g).tolist()
        self.as_dict = as_dict
        self.bad_at = None
        self.kind = None

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        raw = ("label=%d" % self.y[i]).encode("utf-8")
        label = int(raw.decode("utf-8").split("=", 1)[1])
        if self.bad_at is not None and i == self.bad_at:
            if self.kind == "worker_memerr":
                fire(self.kind)
                # decompression buffer sized from a corrupt length header
                buf = bytearray(1 << 50)  # noqa
            elif self.kind == "collate_key":
                fire(self.kind)
                # record written by an older exporter: the field is called "target"
                return {"features": self.x[i], "target": label, "idx": i}
        if self.as_dict:
            return {"features": self.x[i], "label": label, "idx": i}
        return self.x[i], label


def collate_records(batch):
    feats = torch.stack([s["features"] for s in batch])
    labels = torch.tensor([s["label"] for s in batch], dtype=torch.long)
    return feats, labels


_EMA = {}


def ema_hook(opt, args, kwargs):
    """optimizer step post-hook keeping an exponential moving average of the weights"""
    for gi, g in enumerate(opt.param_groups):
        for pi, p in enumerate(g["params"]):
            key = (gi, pi)
            if key not in _EMA:
                _EMA[key] = p.detach().clone()
            _EMA[key].mul_(0.99).add_(p.detach(), alpha=0.01)


def fetch_meta(step, fail):
    """runs in a prefetch thread: fetches shard metadata for the next step"""
    time.sleep(0.02)
    if fail:
        fire("prefetch_reset")
        raise ConnectionResetError(104, "Connection reset by peer")
    return {"step": step, "shard": "shard-%05d" % (step * WORLD + RANK), "bytes": 65536}


def do_fault(kind, step, ctx):
    """Faults that act at the call site."""
    if kind == "hang_sleep":
        fire(kind)
        log.info("waiting for upstream shard server before step %d", step)
        time.sleep(3600)
    if kind == "busy_hang":
        fire(kind)
        log.info("recomputing spectral norm estimate at step %d", step)
        a = torch.randn(64, 64)
        w = torch.randn(64, 64)
        while True:  # power iteration that never converges (no exit condition)
            a = a @ w
            a = a / a.norm()
    if kind.startswith("sig_"):
        fire(kind)
        sig = {"sig_bus": signal.SIGBUS, "sig_fpe": signal.SIGFPE, "sig_int": signal.SIGINT}[kind]
        os.kill(os.getpid(), sig)
        time.sleep(5)
    if kind == "destroy_early":
        fire(kind)
        log.info("early stopping criterion met at step %d; leaving training loop", step)
        dist.destroy_process_group()
        return "stop"
    if kind == "two_err_a":
        fire(kind)
        hdr = "n/a"
        shard_len = int(hdr)  # noqa
    if kind == "two_err_b":
        log.info("verifying shard checksums before step %d", step)
        time.sleep(1.0)
        fire(kind)
        blob = b"\x00\x01corrupt-shard-block" * 4
        zlib.decompress(blob)
    if kind == "nofile":
        fire(kind)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        handles = []
        src = os.path.join(CFG["workdir"], "shard_index_r%d.json" % RANK)
        log.info("opening shard readers for step %d", step)
        for s in range(4096):
            handles.append(open(src, "rb"))  # leaked reader handles, never closed
    if kind == "zerodiv_accum":
        fire(kind)
        micro_batches = CFG.get("batch", 16) // 32
        per_micro = CFG.get("batch", 16) // micro_batches  # noqa
    if kind == "env_missing":
        fire(kind)
        root = os.environ["DATA_SHARD_INDEX"]  # noqa
    if kind == "json_index":
        fire(kind)
        p = os.path.join(CFG["workdir"], "shard_index_r%d.json" % RANK)
        with open(p) as fh:
            json.load(fh)
    if kind == "p2p_recv":
        fire(kind)
        log.info("waiting for activations from rank 0 at step %d", step)
        buf = torch.zeros(16, 32)
        dist.recv(buf, src=0)
    if kind == "p2p_send":
        fire(kind)
        log.info("sending stage output to rank 0 at step %d", step)
        dist.send(torch.ones(16, 32), dst=0)


def allreduce_grads(model):
    for p in model.parameters():
        if p.grad is None:
            continue
        dist.all_reduce(p.grad)
        p.grad.div_(WORLD)


def route_tokens(step):
    """MoE-style exchange of per-expert token counts (all_to_all_single)"""
    inp = torch.arange(WORLD * 2, dtype=torch.float32) + RANK * 100 + step
    outb = torch.zeros(WORLD * 2)
    if want("a2a", step):
        fire(MINE["kind"])
        dist.all_to_all_single(outb, inp, output_split_sizes=[3] + [2] * (WORLD - 2) + [1],
                               input_split_sizes=[2] * WORLD)
    else:
        dist.all_to_all_single(outb, inp)
    return outb


def shard_stats(step):
    """reduce_scatter of per-shard gradient statistics"""
    n = 2
    if want("rs", step):
        fire(MINE["kind"])
        n = 3
    o = torch.zeros(n)
    dist.reduce_scatter_tensor(o, torch.ones(WORLD * n) * (step + 1))
    return o


def sync_lr_scale(step):
    t = torch.tensor([1.0 + 0.01 * step + (0.5 if RANK else 0.0)])
    src = 0
    if want("bcast", step):
        fire(MINE["kind"])
        src = RANK
    dist.broadcast(t, src=src)
    return t


def scatter_seeds(step):
    src = step % WORLD
    t = torch.zeros(2)
    if RANK == src:
        n = WORLD
        if want("scatter", step):
            fire(MINE["kind"])
            n = WORLD - 1
        lst = [torch.full((2,), float(step * 100 + r)) for r in range(n)]
        dist.scatter(t, lst, src=src)
    else:
        dist.scatter(t, None, src=src)
    return t


def gather_metrics(loss, step):
    m = {"rank": RANK, "loss": float(loss.item()), "step": step}
    if want("gather_obj", step):
        fire(MINE["kind"])
        m["fmt"] = lambda v: "%.4f" % v
    objs = [None] * WORLD
    dist.all_gather_object(objs, m)
    return objs


def store_exchange(step):
    store = dist.distributed_c10d._get_default_store()
    key = "ckpt_shard/%d/%d" % (step, RANK)
    if want("store_get", step):
        fire(MINE["kind"])
        log.info("checkpoint shard for step %d unchanged, not republishing", step)
    else:
        store.set(key, os.path.join(CFG["workdir"], "checkpoints", "shard%d.pt" % RANK))
    paths = [store.get("ckpt_shard/%d/%d" % (step, r)).decode() for r in range(WORLD)]
    return paths


def main():
    _side("start_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=CFG.get("pg_timeout", 10)))
    torch.manual_seed(CFG.get("seed", 0))
    log.info("initialized process group: world_size=%d local_rank=%d attempt=%d", WORLD, LOCAL_RANK, ATTEMPT)
    sub = None
    if CFG.get("subgroup"):
        sub = dist.new_group(CFG["subgroup"])
        log.info("created subgroup %s", CFG["subgroup"])
    # per-rank shard index written by the data prep step
    idx_path = os.path.join(CFG["workdir"], "shard_index_r%d.json" % RANK)
    idx_txt = json.dumps({"rank": RANK, "shards": ["shard-%05d" % (RANK * 8 + k) for k in range(8)],
                          "samples_per_shard": 64})
    if MINE is not None and MINE["kind"] == "json_index":
        idx_txt = idx_txt[:57]  # copy interrupted
    with open(idx_path, "w") as fh:
        fh.write(idx_txt)
    if MINE is not None and MINE["place"] == "startup":
        do_fault(MINE["kind"], 0, {})
    with open(idx_path) as fh:
        shard_index = json.load(fh)
    dlog.info("loaded shard index with %d shards", len(shard_index["shards"]))
    model = Net()
    use_ddp = CFG.get("ddp", False)
    net = model
    if use_ddp:
        net = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if CFG.get("ema"):
        opt.register_step_post_hook(ema_hook)
    ds = Records(CFG.get("n", 512), seed=1234 + RANK, as_dict=CFG.get("dict_samples", False))
    if MINE is not None and MINE["place"] == "data":
        ds.bad_at = MINE.get("index", 40)
        ds.kind = MINE["kind"]
    nw = CFG.get("workers", 0)
    dl = DataLoader(ds, batch_size=CFG.get("batch", 16), shuffle=False, num_workers=nw,
                    persistent_workers=nw > 0,
                    collate_fn=collate_records if CFG.get("dict_samples") else None)
    it = iter(dl)
    ckdir = os.path.join(CFG["workdir"], "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch") if CFG.get("prefetch") else None
    pending = None
    steps = CFG.get("steps", 10)
    for step in range(steps):
        if "warn" in NOISE and step == 2:
            warnings.warn("lr scheduler step() called before optimizer step(); skipping first value", UserWarning)
            warnings.warn("`torch.cuda.amp.GradScaler(args...)` style config is deprecated, use `torch.amp`", FutureWarning)
        if "retry" in NOISE and step == 3:
            log.warning("metrics push failed: TimeoutError('timed out'); will retry in 2s (attempt 1/3)")
            log.info("metrics push succeeded on retry")
        if "caught_json" in NOISE and step == 2:
            try:
                json.loads('{"mean": 0.4812, "std": 0.2')
            except json.JSONDecodeError:
                log.exception("ignoring corrupt normalization stats cache; recomputing")
        if "caught_diskfull" in NOISE and step == 3:
            tp = os.path.join(CFG["workdir"], "trace_r%d.pt" % RANK)
            try:
                os.symlink("/dev/full", tp)
                torch.save({"trace": torch.randn(64, 64)}, tp)
            except RuntimeError:
                log.exception("profiler trace dump failed; continuing without trace")
        if pool is not None:
            if pending is not None:
                meta = pending.result()
                dlog.debug("prefetched %s", meta["shard"])
            pending = pool.submit(fetch_meta, step + 1, want("prefetch", step))
        if MINE is not None and MINE["place"] == "step" and MINE.get("step", 0) == step:
            if do_fault(MINE["kind"], step, {"model": model}) == "stop":
                return
        if CFG.get("store_get_step") == step:
            store_exchange(step)
        if CFG.get("scatter"):
            scatter_seeds(step)
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(dl); x, y = next(it)
        scale = 1.0
        if want("forward", step) and MINE["kind"] == "ddp_skip":
            fire(MINE["kind"])
            model.skip_mid = True  # "layer drop" decided locally on this rank only
        out_ = net(x)
        model.skip_mid = False
        if want("forward", step) and MINE["kind"] == "inplace":
            fire(MINE["kind"])
            probs = out_.softmax(dim=1)
            probs.clamp_(min=1e-6)  # modifies the softmax output saved for backward
            loss = nn.functional.nll_loss(probs.log(), y)
        else:
            loss = nn.functional.cross_entropy(out_, y)
        if want("forward", step) and MINE["kind"] == "nonfinite":
            fire(MINE["kind"])
            scale = float("inf")  # dynamic loss scale overflowed on this rank
        opt.zero_grad()
        (loss * scale).backward()
        if CFG.get("clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, error_if_nonfinite=True)
        if sub is not None and RANK in CFG["subgroup"]:
            st = torch.tensor([loss.item(), float(step)])
            if want("sub", step):
                fire(MINE["kind"])
                log.info("stage stats already reduced for step %d", step)
            else:
                dist.all_reduce(st, group=sub)
        if not use_ddp:
            allreduce_grads(model)
        if CFG.get("a2a"):
            route_tokens(step)
        if CFG.get("rs"):
            shard_stats(step)
        if CFG.get("bcast"):
            sync_lr_scale(step)
        if want("optim", step) and MINE["kind"] == "ema_shape":
            fire(MINE["kind"])
            # EMA shadow restored from a run with a narrower hidden layer
            _EMA[(0, 2)] = torch.zeros(16, 32)
        opt.step()
        if step % CFG.get("log_every", 2) == 0 or step == steps - 1:
            if CFG.get("gather_obj"):
                gather_metrics(loss, step)
            if RANK == 0 or CFG.get("all_log"):
                out("step %d/%d loss %.4f" % (step, steps, loss.item()))
        ce = CFG.get("ckpt_every", 0)
        if ce and step > 0 and step % ce == 0:
            path = os.path.join(ckdir, "step%03d_rank%d.pt" % (step, RANK))
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
            if want("ckpt", step) and MINE["kind"] == "ckpt_diskfull":
                fire(MINE["kind"])
                os.symlink("/dev/full", path)  # checkpoint volume is full
            torch.save(state, path)
            if want("ckpt", step) and MINE["kind"] == "ckpt_truncate":
                fire(MINE["kind"])
                sz = os.path.getsize(path)
                with open(path, "r+b") as fh:
                    fh.truncate(sz // 2)  # writer interrupted half way
            torch.load(path, weights_only=False)
            if CFG.get("ckpt_barrier"):
                dist.barrier()
            if RANK == 0:
                clog.info("saved checkpoint for step %d", step)
        time.sleep(CFG.get("step_sleep", 0.15))
    if pending is not None:
        pending.result()
        pool.shutdown()
    dist.barrier()
    log.info("training finished")
    _side("done_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.destroy_process_group()


if __name__ == "__main__":
    if PYLOG:
        try:
            main()
        except Exception:
            log.exception("rank %d failed, exiting", RANK)
            logging.shutdown()
            sys.exit(1)
    elif CFG.get("record"):
        record(main)()
    else:
        main()
