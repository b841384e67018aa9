"""Facts about the run that logs print in passing: versions, launcher, sizes.

Each pattern has a literal `key` that a line must contain before the regex runs.
Versions and launch lines are printed at start-up, so the scanner runs these on
every line of the first HEAD_BYTES of each input and on every candidate line
after that (see scan.py).
"""
from __future__ import annotations

import re

# (fact, key literal, regex with group 'v'); first value seen wins, except where noted.
PATTERNS: list[tuple[str, str, re.Pattern]] = [(f, k, re.compile(r)) for f, k, r in [
    # python -m torch.utils.collect_env
    ("pytorch_version", "PyTorch version", r"PyTorch version: (?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("pytorch_version", "torch==", r"\btorch==(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("pytorch_version", "torch version", r"[Tt]orch version:? ?(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("pytorch_version", "Torch version", r"Torch version:? ?(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("pytorch_version", "torch.__version__", r"torch\.__version__\W{1,6}(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("cuda_version", "CUDA Version", r"CUDA Version: (?P<v>\d+\.\d+)"),                    # nvidia-smi
    ("cuda_version", "CUDA used to build PyTorch", r"CUDA used to build PyTorch: (?P<v>\d+\.\d+)"),
    ("cuda_version", "CUDA runtime version", r"CUDA runtime version: (?P<v>\d+\.\d+)"),
    ("cuda_version", "NCCL version", r"NCCL version \d+\.\d+\.\d+\+cuda(?P<v>\d+\.\d+)"),
    ("nccl_version", "NCCL version", r"NCCL version (?P<v>\d+\.\d+\.\d+)"),
    ("driver_version", "Driver Version", r"Driver Version: (?P<v>\d+\.\d+(?:\.\d+)?)"),  # nvidia-smi
    ("driver_version", "driver version", r"[Dd]river version: (?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("cudnn_version", "cuDNN version", r"cuDNN version: (?:[^\d]{0,40})?(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("python_version", "Python version", r"Python version: (?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("deepspeed_version", "DeepSpeed info", r"DeepSpeed info: version=(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("deepspeed_version", "deepspeed==", r"\bdeepspeed==(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("vllm_version", "vLLM", r"vLLM(?: API server)? version:? ?v?(?P<v>\d+\.\d+(?:\.\d+)?)"),
    ("transformers_version", "transformers", r"transformers(?:==| version:? ?)(?P<v>\d+\.\d+(?:\.\d+)?)"),
    # launchers
    ("launcher", "torchrun", r"(?P<v>torchrun)\b"),
    ("launcher", "torch.distributed.run", r"(?P<v>torch\.distributed\.run)\b"),
    ("launcher", "torch.distributed.launch", r"(?P<v>torch\.distributed\.launch)\b"),
    ("launcher", "deepspeed", r"(?:^|\s|/)(?P<v>deepspeed) --"),
    ("launcher", "accelerate launch", r"(?P<v>accelerate launch)"),
    ("launcher", "srun", r"(?:^|\s)(?P<v>srun)[ :]"),
    ("launcher", "mpirun", r"(?P<v>mpirun)\b"),
    # the launch command itself, when the log echoes it (bash -x, a job script's echo)
    ("launch_command", "torchrun ", r"(?P<v>\btorchrun\s+--\S.{0,400})"),
    ("launch_command", "torch.distributed.run ", r"(?P<v>\S*python\S* -m torch\.distributed\.(?:run|launch)\s+--\S.{0,400})"),
    ("launch_command", "srun ", r"(?P<v>\bsrun\s+-\S.{0,400})"),
    ("launch_command", "deepspeed ", r"(?P<v>\bdeepspeed\s+--\S.{0,400})"),
    ("launch_command", "accelerate launch ", r"(?P<v>\baccelerate launch\s.{0,400})"),
    # torchrun's launch-config summary and flags
    ("nnodes", "min_nodes", r"min_nodes\s*: (?P<v>\d+)"),
    ("nnodes", "nnodes", r"--nnodes[= ](?P<v>\d+(?::\d+)?)"),
    ("nproc_per_node", "nproc_per_node", r"nproc_per_node\s*[:=] ?(?P<v>\d+)"),
    ("nproc_per_node", "nproc-per-node", r"--nproc-per-node[= ](?P<v>\d+)"),
    ("rdzv_backend", "rdzv_backend", r"rdzv_backend\s*[:=] ?(?P<v>\w+)"),
    ("rdzv_endpoint", "rdzv_endpoint", r"rdzv_endpoint\s*[:=] ?(?P<v>[\w.\-\[\]:]+)"),
    ("rdzv_endpoint", "rdzv-endpoint", r"rdzv-endpoint[= ](?P<v>[\w.\-\[\]:]+)"),
    ("max_restarts", "max_restarts", r"max_restarts\s*[:=] ?(?P<v>\d+)"),
    ("world_size", "world_size", r"world_size\s*[:=] ?(?P<v>\d+)"),
    ("world_size", "WORLD_SIZE", r"WORLD_SIZE\s*[:=] ?(?P<v>\d+)"),
    ("timeout_ms", "Timeout(ms)", r"Timeout\(ms\)=(?P<v>\d+)"),
    # a clean finish: torchrun's agent, HF Trainer, Lightning (reason.rank: vetoes warnings)
    ("run_completed", "WorkerState.SUCCEEDED", r"(?P<v>Local worker group finished \(WorkerState\.SUCCEEDED\))"),
    ("run_completed", "Training completed", r"(?P<v>Training completed)\. Do not forget to share your model"),
    ("run_completed", "stopped: `max_epochs", r"(?P<v>`Trainer\.fit` stopped: `max_epochs=\d+` reached)"),
]]

KEYS = sorted({k for _, k, _ in PATTERNS})

# The software whose versions the engine reads from logs and entries pin (an entry's
# `affects[].software`): key -> (its name, the fact holding its version, how to get the
# version when the log lacks it). The one table: the schema, the reasoner, the renderings
# and the site take their names from here.
SOFTWARE = {
    "pytorch": ("PyTorch", "pytorch_version", "python -c 'import torch; print(torch.__version__)'"),
    "cuda": ("CUDA", "cuda_version", "python -c 'import torch; print(torch.version.cuda)'; nvidia-smi"),
    "cudnn": ("cuDNN", "cudnn_version", "python -c 'import torch; print(torch.backends.cudnn.version())'"),
    "nccl": ("NCCL", "nccl_version", "python -c 'import torch; print(torch.cuda.nccl.version())' (or NCCL_DEBUG=INFO)"),
    "driver": ("NVIDIA driver", "driver_version", "nvidia-smi --query-gpu=driver_version --format=csv,noheader"),
    "deepspeed": ("DeepSpeed", "deepspeed_version", "ds_report | grep 'deepspeed info'"),
    "vllm": ("vLLM", "vllm_version", "python -c 'import vllm; print(vllm.__version__)'"),
    "transformers": ("Transformers", "transformers_version",
                     "python -c 'import transformers; print(transformers.__version__)'"),
    "python": ("Python", "python_version", "python --version"),
}
SOFTWARE_NAME = {k: name for k, (name, _, _) in SOFTWARE.items()}
SOFTWARE_FACT = {k: fact for k, (_, fact, _) in SOFTWARE.items()}
HOW_TO_GET = {fact: how for _, fact, how in SOFTWARE.values()}
# the version facts, in the order the renderings list them (PyTorch first)
VERSION_FACTS = ("pytorch_version", "cuda_version", "cudnn_version", "nccl_version", "driver_version",
                 "python_version", "deepspeed_version", "vllm_version", "transformers_version")
VERSION_LABELS = {fact: f"{name} version" for name, fact, _ in SOFTWARE.values()}


def extract(text: str, facts: dict) -> None:
    """Add the facts this line states to facts (first value wins)."""
    for fact, key, rx in PATTERNS:
        if key in text and fact not in facts:
            m = rx.search(text)
            if m:
                facts[fact] = m.group("v")
