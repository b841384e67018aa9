"""Logs shaped like real jobs, for the engine benchmark: one generator per profile.

Each profile is a weighted mix of line types. Every line type imitates, field for
field, a line that the named software prints in a healthy run (the formats are
those of the healthy corpus in entries/healthy/ and of the public reports it
cites); only numbers, hosts and ranks vary, drawn from a seeded RNG so that a run
is reproducible. A profile's failure is the first example of a real entry,
placed near the end; its "healthy twin" is the same mix without it.

    python bench/profiles.py OUT.log --profile nccl-info --size 200M [--healthy]
    python bench/profiles.py OUT.log --line-type nccl-info/channel-p2p --size 20M
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loggen import example_failures, generate, parse_size, write_lines  # noqa: E402

Line = Callable[[random.Random, int], str]   # (rng, step) -> one line, with its "\n"


def _host(r: int) -> str:
    return f"gpu-node-{r // 8:03d}"


def _hms(step: int) -> str:
    return f"{10 + step // 3_600_000 % 12:02d}:{step // 60_000 % 60:02d}:{step // 1000 % 60:02d}"


# ---------------------------------------------------------------- NCCL_DEBUG=INFO

def _nccl(rng, r, text):
    # "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO ..." (NCCL debug.cc prefix)
    return f"{_host(r)}:{48000 + r}:{48100 + r} [{r % 8}] NCCL INFO {text}\n"


NCCL_INFO: dict[str, tuple[float, Line]] = {
    "channel-p2p": (0.30, lambda rng, s: (lambda r: _nccl(
        rng, r, f"Channel {rng.randrange(32):02d}/32 : {r % 8} {(r + 1) % 8} via P2P/CUMEM/read"))(rng.randrange(64))),
    "channel-net": (0.14, lambda rng, s: (lambda r: _nccl(
        rng, r, f"Channel {rng.randrange(32):02d}/0 : {r}[{r % 8}] -> {(r + 8) % 64}[{r % 8}] [send] "
                f"via NET/IB/{r % 4}/GDRDMA"))(rng.randrange(64))),
    "channel-ipc": (0.08, lambda rng, s: (lambda r: _nccl(
        rng, r, f"Channel {rng.randrange(32):02d}/0 : {r}[{r % 8}] -> {r + 1 if r % 8 < 7 else r - 7}"
                f"[{(r + 1) % 8}] via P2P/IPC/read"))(rng.randrange(64))),
    "trees": (0.05, lambda rng, s: (lambda r: _nccl(
        rng, r, "Trees " + " ".join(f"[{c}] {r + 1}/-1/-1->{r}->{r - 1}" for c in range(8))))(rng.randrange(1, 63))),
    "ring": (0.04, lambda rng, s: (lambda r: _nccl(
        rng, r, f"Ring {rng.randrange(32):02d} : {r - 1} -> {r} -> {r + 1}"))(rng.randrange(1, 63))),
    "connected": (0.03, lambda rng, s: _nccl(rng, rng.randrange(64),
                                              rng.choice(["Connected all rings", "Connected all trees",
                                                          "Connected NVLS"]))),
    "init-complete": (0.03, lambda rng, s: (lambda r: _nccl(
        rng, r, f"comm 0x{0x55d0c8a00000 + r * 4096:x} rank {r} nranks 64 cudaDev {r % 8} nvmlDev {r % 8} "
                f"busId {0x18000 + (r % 8) * 0x10000:x} commId 0x{rng.getrandbits(64):x} - Init COMPLETE"))(rng.randrange(64))),
    "bootstrap": (0.02, lambda rng, s: (lambda r: _nccl(
        rng, r, f"Bootstrap : Using ibp{r % 4}s0:10.{r // 8}.{r % 8}.{r}<0>"))(rng.randrange(64))),
    "net-ib": (0.02, lambda rng, s: (lambda r: _nccl(
        rng, r, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; "
                f"OOB ibp0s0:10.{r // 8}.0.{r}<0>"))(rng.randrange(64))),
    "affinity": (0.02, lambda rng, s: _nccl(rng, rng.randrange(64),
                                             "Setting affinity for GPU 3 to ffff,ffffffff,00000000,0000ffff")),
    "thresholds": (0.02, lambda rng, s: _nccl(rng, rng.randrange(64),
                                               "threadThresholds 8/8/64 | 512/8/64 | 512 | 512")),
    "channels": (0.01, lambda rng, s: _nccl(rng, rng.randrange(64),
                                             "32 coll channels, 32 collnet channels, 0 nvls channels, "
                                             "32 p2p channels, 32 p2p channels per peer")),
    "train-step": (0.24, lambda rng, s: (
        f"[rank{rng.randrange(64)}]:[2026-11-30 {_hms(s)},{s % 1000:03d}] INFO train.py:212 step={s} "
        f"loss={rng.uniform(1.5, 3.0):.4f} lr={3e-4 * rng.uniform(0.9, 1.0):.3e} "
        f"grad_norm={rng.uniform(0.2, 1.4):.3f} tokens/s={rng.randint(90000, 130000)}\n")),
}

# ---------------------------------------------------------------- torchrun, 64 ranks

def _glog(rng, r, s, level, src, text):
    # c10d's bracketed glog line after torchrun's [rankN]: prefix (PyTorch 2.4+)
    return f"[rank{r}]:[{level}1130 {_hms(s)}.{rng.randrange(10**9):09d} {src}] {text}\n"


TORCHRUN_64: dict[str, tuple[float, Line]] = {
    # start-up lines: once per rank and process group, a few hundred in a whole job
    "barrier-warning": (0.001, lambda rng, s: (lambda r: _glog(
        rng, r, s, "W", "ProcessGroupNCCL.cpp:4561",
        f"[PG ID 0 PG GUID 0 Rank {r}]  using GPU {r % 8} to perform barrier as devices used by this process "
        "are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. "
        "Specify device_ids in barrier() to force use of a particular device, or call init_process_group() "
        "with a device_id."))(rng.randrange(64))),
    "pg-options": (0.0005, lambda rng, s: (lambda r: _glog(
        rng, r, s, "I", "ProcessGroupNCCL.cpp:938",
        f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] ProcessGroupNCCL initialization options: size: 64, "
        f"global rank: {r}, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, "
        "SPLIT_COLOR: -2, PG Name: default_pg"))(rng.randrange(64))),
    "pg-environments": (0.0005, lambda rng, s: (lambda r: _glog(
        rng, r, s, "I", "ProcessGroupNCCL.cpp:947",
        f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] ProcessGroupNCCL environments: NCCL version: 2.21.5, "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING: 3, TORCH_NCCL_DUMP_ON_TIMEOUT: 1, "
        "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC: 60000, TORCH_NCCL_DESYNC_DEBUG: 0, "
        "TORCH_NCCL_ENABLE_TIMING: 0, TORCH_NCCL_BLOCKING_WAIT: 0, TORCH_DISTRIBUTED_DEBUG: OFF, "
        "TORCH_NCCL_ENABLE_MONITORING: 1, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: 480, "
        "TORCH_NCCL_TRACE_BUFFER_SIZE: 2000, TORCH_NCCL_COORD_CHECK_MILSEC: 1000, "
        "TORCH_NCCL_NAN_CHECK: 0, TORCH_NCCL_CUDA_EVENT_CACHE: 1, TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN: 1"
    ))(rng.randrange(64))),
    "autograd-warning": (0.08, lambda rng, s: (
        f"[rank{rng.randrange(64)}]:/opt/venv/lib/python3.11/site-packages/torch/autograd/graph.py:824: "
        "UserWarning: c10d::allreduce_: an autograd kernel was not registered to the Autograd key(s) but we "
        "are trying to backprop through it. This may lead to silently incorrect behavior. (Triggered "
        "internally at /pytorch/torch/csrc/autograd/autograd_not_implemented_fallback.cpp:62.)\n")),
    "omp-notice": (0.01, lambda rng, s: (
        f"W1130 {_hms(s)}.{s % 1000000:06d} 4242 torch/distributed/run.py:792] Setting OMP_NUM_THREADS "
        "environment variable for each process to be 1 in default, to avoid your system being overloaded, "
        "please further tune the variable for optimal performance in your application as needed.\n")),
    "train-step": (0.75, lambda rng, s: (
        f"[rank{rng.randrange(64)}]: step {s} | loss {rng.uniform(1.5, 3.0):.4f} | lr {3e-4:.2e} | "
        f"grad_norm {rng.uniform(0.2, 1.4):.3f} | {rng.randint(2000, 3000)} tokens/s/gpu | "
        f"mfu {rng.uniform(38, 45):.1f}%\n")),
}

# ---------------------------------------------------------------- HF Trainer / Accelerate

def _tqdm(rng, s):
    n = s % 5000
    return "".join(f"\r {p * 100 // 5000:3d}%|{'█' * (p * 10 // 5000):<10}| {p}/5000 "
                   f"[{p // 120:02d}:{p // 2 % 60:02d}<{(5000 - p) // 120:02d}:{p % 60:02d},  "
                   f"2.{rng.randrange(10)}{rng.randrange(10)}it/s]" for p in range(n, n + 4)) + "\n"


HF_TRAINER: dict[str, tuple[float, Line]] = {
    "tqdm": (0.55, lambda rng, s: _tqdm(rng, s)),
    "loss-dict": (0.25, lambda rng, s: (
        f"{{'loss': {rng.uniform(0.5, 2.5):.4f}, 'grad_norm': {rng.uniform(0.5, 9):.6f}, "
        f"'learning_rate': {5e-5 * rng.random():.6e}, 'epoch': {s / 5000:.2f}}}\n")),
    "eval-dict": (0.03, lambda rng, s: (
        f"{{'eval_loss': {rng.uniform(0.5, 2.5):.6f}, 'eval_runtime': {rng.uniform(10, 30):.4f}, "
        f"'eval_samples_per_second': {rng.uniform(50, 90):.3f}, 'eval_steps_per_second': "
        f"{rng.uniform(1, 4):.3f}, 'epoch': {s / 5000:.2f}}}\n")),
    "trainer-info": (0.05, lambda rng, s: (
        f"[INFO|trainer.py:{rng.choice([2314, 2315, 2316, 4226])}] 2026-11-30 {_hms(s)},{s % 1000:03d} >> "
        + rng.choice(["***** Running training *****", "  Num examples = 120,000", "  Num Epochs = 3",
                      "  Instantaneous batch size per device = 8", "Saving model checkpoint to out/checkpoint-500",
                      "***** Running Evaluation *****", "  Batch size = 16"]) + "\n")),
    "tokenizers-fork": (0.04, lambda rng, s: (
        "huggingface/tokenizers: The current process just got forked, after parallelism has already been "
        "used. Disabling parallelism to avoid deadlocks...\n")),
    "tokenizers-hint": (0.04, lambda rng, s: rng.choice([
        "To disable this warning, you can either:\n", "\t- Avoid using `tokenizers` before the fork if possible\n",
        "\t- Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)\n"])),
    "weights-not-initialized": (0.02, lambda rng, s: (
        "Some weights of LlamaForSequenceClassification were not initialized from the model checkpoint at "
        "meta-llama/Llama-3.2-1B and are newly initialized: ['score.weight']\n")),
    "accelerate-info": (0.02, lambda rng, s: (
        f"{rng.randrange(8)}: 11/30/2026 {_hms(s)} - INFO - accelerate.accelerator - "
        "Saving current state to out/step_500\n")),
}

# ---------------------------------------------------------------- DeepSpeed ZeRO, verbose

def _ds(s, src, text):
    return f"[2026-11-30 {_hms(s)},{s % 1000:03d}] [INFO] [{src}] {text}\n"


DEEPSPEED: dict[str, tuple[float, Line]] = {
    "log-dist": (0.35, lambda rng, s: _ds(
        s, "logging.py:107:log_dist",
        f"[Rank 0] step={s}, skipped={s // 900}, lr=[{3e-5 * rng.random():.15e}], mom=[(0.9, 0.95)]")),
    "timer": (0.35, lambda rng, s: _ds(
        s, "timer.py:264:stop",
        f"epoch=0/micro_step={s * 4}/global_step={s}, RunningAvgSamplesPerSec={rng.uniform(40, 50):.14f}, "
        f"CurrSamplesPerSec={rng.uniform(40, 50):.14f}, MemAllocated={rng.uniform(10, 14):.2f}GB, "
        f"MaxMemAllocated={rng.uniform(18, 22):.2f}GB")),
    "overflow-skip": (0.03, lambda rng, s: _ds(
        s, "loss_scaler.py:183:update_scale",
        f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** rng.randrange(14, 18)}, "
        f"reducing to {2 ** rng.randrange(12, 14)}")),
    "fused-adam-overflow": (0.02, lambda rng, s: _ds(
        s, "fused_optimizer.py:362:_update_scale",
        f"\nGrad overflow on iteration {s}\nReducing dynamic loss scale from 65536 to 32768.0")),
    "config-print": (0.05, lambda rng, s: _ds(
        s, "config.py:1004:print",
        rng.choice(["  zero_allow_untested_optimizer  False", "  zero_config .................. stage=3 "
                    "contiguous_gradients=True reduce_scatter=True reduce_bucket_size=500000000 "
                    "overlap_comm=True offload_param=None offload_optimizer=None",
                    "  fp16_enabled ................. True", "  gradient_accumulation_steps .. 4"]))),
    "train-line": (0.20, lambda rng, s: (
        f"Epoch 1/3 with loss {rng.uniform(0.5, 2.5):.6f}\n" if rng.random() < 0.5 else
        f"[2026-11-30 {_hms(s)},{s % 1000:03d}] [INFO] [engine.py:2103:_save_checkpoint] Saving model checkpoint: "
        f"/ckpt/global_step{s}/mp_rank_00_model_states.pt\n")),
}

# ---------------------------------------------------------------- vLLM server, request logging

def _vllm(s, src, text):
    return f"INFO 11-30 {_hms(s)} [{src}] {text}\n"


VLLM: dict[str, tuple[float, Line]] = {
    "received-request": (0.25, lambda rng, s: _vllm(
        s, "logger.py:43",
        f"Received request chatcmpl-{rng.getrandbits(64):016x}: prompt: '<|im_start|>user\\nSummarize the "
        f"following report in {rng.randint(2, 9)} sentences...', params: SamplingParams(n=1, presence_penalty=0.0, "
        "frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, "
        "seed=None, stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, "
        f"ignore_eos=False, max_tokens={rng.choice([256, 512, 1024])}, min_tokens=0, logprobs=None, "
        "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
        "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None), prompt_token_ids: None, "
        "prompt_embeds shape: None, lora_request: None.")),
    "added-request": (0.25, lambda rng, s: _vllm(
        s, "engine.py:316", f"Added request chatcmpl-{rng.getrandbits(64):016x}.")),
    "http-200": (0.25, lambda rng, s: (
        f"INFO:     10.2.{rng.randrange(256)}.{rng.randrange(256)}:{rng.randint(30000, 60000)} - "
        f"\"POST /v1/chat/completions HTTP/1.1\" 200 OK\n")),
    "metrics": (0.05, lambda rng, s: _vllm(
        s, "metrics.py:486",
        f"Avg prompt throughput: {rng.uniform(100, 900):.1f} tokens/s, Avg generation throughput: "
        f"{rng.uniform(300, 2000):.1f} tokens/s, Running: {rng.randint(1, 64)} reqs, Swapped: 0 reqs, "
        f"Pending: 0 reqs, GPU KV cache usage: {rng.uniform(1, 60):.1f}%, CPU KV cache usage: 0.0%.")),
    "finished": (0.15, lambda rng, s: _vllm(
        s, "async_llm_engine.py:176", f"Finished request chatcmpl-{rng.getrandbits(64):016x}.")),
    "aborted": (0.05, lambda rng, s: _vllm(
        s, "async_llm_engine.py:190", f"Aborted request chatcmpl-{rng.getrandbits(64):016x}.")),
}

# ---------------------------------------------------------------- Slurm / Kubernetes

def _k8s(rng, s, pod, text):
    # kubectl logs --prefix --timestamps
    return (f"2026-11-30T{_hms(s)}.{rng.randrange(10**9):09d}Z [pod/{pod}/pytorch] {text}\n")


SLURM_K8S: dict[str, tuple[float, Line]] = {
    "srun-step": (0.35, lambda rng, s: (lambda r: (
        f"{r}: [2026-11-30 {_hms(s)}] iteration {s:>8d}/  500000 | consumed samples: {s * 512:>12d} | "
        f"elapsed time per iteration (ms): {rng.uniform(900, 1100):.1f} | learning rate: {3e-4:.3E} | "
        f"global batch size:   512 | lm loss: {rng.uniform(1.5, 3.0):.6E} | loss scale: 1.0 | "
        f"grad norm: {rng.uniform(0.2, 1.4):.3f} | number of skipped iterations:   0 | "
        f"number of nan iterations:   0 |\n"))(rng.randrange(64))),
    "k8s-step": (0.35, lambda rng, s: _k8s(
        rng, s, f"llama-train-worker-{rng.randrange(8)}",
        f"[rank{rng.randrange(64)}]: step {s} loss {rng.uniform(1.5, 3.0):.4f} "
        f"throughput {rng.uniform(180, 220):.1f} TFLOP/s/GPU")),
    "k8s-omp": (0.05, lambda rng, s: _k8s(
        rng, s, f"llama-train-worker-{rng.randrange(8)}",
        f"W1130 {_hms(s)}.{s % 1000000:06d} 1 torch/distributed/run.py:792] Setting OMP_NUM_THREADS "
        "environment variable for each process to be 1 in default, to avoid your system being overloaded, "
        "please further tune the variable for optimal performance in your application as needed.")),
    "srun-timer": (0.15, lambda rng, s: (lambda r: (
        f"{r}: (min, max) time across ranks (ms):\n" if rng.random() < 0.3 else
        f"{r}:     forward-backward ...............................: ({rng.uniform(800, 900):.2f}, "
        f"{rng.uniform(900, 1000):.2f})\n"))(rng.randrange(64))),
    "sacct": (0.05, lambda rng, s: (
        f"{4200000 + s % 1000:<12d} {'train':<10} gpu      research   {rng.choice([64, 128])} "
        f"{rng.choice(['RUNNING', 'COMPLETED', 'PENDING'])}      0:0\n")),
    "slurm-epilog": (0.05, lambda rng, s: (
        f"[2026-11-30T{_hms(s)}.{s % 1000:03d}] slurm_script: job {4200000 + s % 1000} step 0 "
        f"on nodes gpu-node-[{rng.randrange(100):03d}-{rng.randrange(100, 200):03d}] running\n")),
}

# ---------------------------------------------------------------- the original bench mix

PROFILES: dict[str, tuple[dict, list[str]]] = {
    # name: (line types, failures placed near the end)
    "nccl-info": (NCCL_INFO, ["nccl-ib-retry-exceeded"]),
    "torchrun-64": (TORCHRUN_64, ["cuda-out-of-memory", "nccl-watchdog-timeout"]),
    "hf-trainer": (HF_TRAINER, ["cuda-out-of-memory"]),
    "deepspeed": (DEEPSPEED, ["worker-sigkill-host-oom"]),
    "vllm": (VLLM, ["vllm-kv-cache-insufficient"]),
    "slurm-k8s": (SLURM_K8S, ["slurm-time-limit"]),
    # bench/loggen.py's original mix (no line types of its own here)
    "bench-mix": ({}, ["cuda-out-of-memory", "nccl-watchdog-timeout", "elastic-child-failed"]),
}


def line_types() -> list[str]:
    return [f"{p}/{t}" for p, (types, _) in PROFILES.items() if p != "bench-mix" for t in types]


def _writer(path: Path, size: int, lines, failures: list[str]) -> None:
    """Write about `size` bytes from the line iterator; failures go in the last tenth."""
    places = [int(size * (0.9 + 0.05 * i / max(1, len(failures)))) for i in range(len(failures))]
    write_lines(path, size, lines, failures, places)


def _mix(types: dict, rng: random.Random):
    names = list(types)
    weights = [types[n][0] for n in names]
    step = 0
    while True:
        step += 1
        for name in rng.choices(names, weights, k=256):
            yield types[name][1](rng, step)
            step += 1


def generate_profile(path: Path, profile: str, size: int, seed: int = 0, healthy: bool = False) -> list[str]:
    """Write the profile's log; returns the entry ids of the failures placed in it."""
    types, failure_ids = PROFILES[profile]
    if profile == "bench-mix":
        failure_ids = [] if healthy else failure_ids
        generate(path, size, seed, example_failures(ROOT, failure_ids))
        return failure_ids
    rng = random.Random(f"{profile}:{seed}")
    failure_ids = [] if healthy else failure_ids
    _writer(path, size, _mix(types, rng), example_failures(ROOT, failure_ids))
    return failure_ids


def generate_line_type(path: Path, line_type: str, size: int, seed: int = 0) -> None:
    """A file made of one line type only (the worst case for that line)."""
    profile, name = line_type.split("/", 1)
    fn = PROFILES[profile][0][name][1]
    rng = random.Random(f"{line_type}:{seed}")

    def lines():
        step = 0
        while True:
            step += 1
            yield fn(rng, step)
    _writer(path, size, lines(), [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output")
    ap.add_argument("--profile", choices=sorted(PROFILES))
    ap.add_argument("--line-type", choices=line_types())
    ap.add_argument("--size", default="100M")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--healthy", action="store_true", help="the healthy twin: no failure")
    args = ap.parse_args()
    if args.line_type:
        generate_line_type(Path(args.output), args.line_type, parse_size(args.size), args.seed)
    else:
        generate_profile(Path(args.output), args.profile or "bench-mix", parse_size(args.size),
                         args.seed, args.healthy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
