#!/bin/sh
# Rerun every miner with the sources this catalogue was made from (see README.md), each
# project's file from empty (--fresh), then reapply the mapping decisions (catalog/decisions/).
# Set the locations of the sources; a missing one skips that project (its file stays as it is).
#   NCCL_GIT GLOO_GIT SLURM_GIT   git directories of NVIDIA/nccl, pytorch/gloo, SchedMD/slurm
#   TORCH_SITE                    site-packages holding torch==2.13.0
#   TORCH_OLD                     the Python files (torch/**/*.py) of the torch 2.4.1 wheel, unzipped:
#                                 the older wordings stay templates (historical forms)
#   TORCH_1_13_1                  the same of the torch 1.13.1 wheel (cp310 manylinux1_x86_64): the
#                                 1.x wordings most pasted logs carry
#   TORCH_CPP                     copied PyTorch C++ files with COMMITS.tsv: every file that catalog/pytorch.yaml's
#                                 header lists under cpp_files, each at its commit (the helpers of its headers,
#                                 Utils.hpp's assert* checks, are read for the .cpp files read with them)
#   LIBCUDART                     libcudart.so.12 of nvidia-cuda-runtime-cu12==12.9.79
#   WHEELS                        folder with the wheels and sdists named below
#   KUBE_1_15_5 KUBE_1_28_7       git directories of copies of those Kubernetes release trees (README.md),
#   KUBE_MASTER                   and the master files read one by one, with their COMMITS.tsv
set -e
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
M="$PY catalog/mine.py"
[ -n "$NCCL_GIT" ] && $M nccl --fresh --git "$NCCL_GIT" --tags v2.10.3-1 v2.12.12-1 v2.14.3-1 v2.16.5-1 v2.18.6-1 v2.21.5-1 v2.23.4-1 v2.26.2-1 v2.27.7-1 v2.28.9-1 v2.29.7-1 v2.30.7-1
[ -n "$GLOO_GIT" ] && $M gloo --fresh --git "$GLOO_GIT"
# the PyTorch releases go into one file, oldest first: the first run starts it empty, the
# others merge (a template keeps its mapping and widens its range)
if [ -n "$TORCH_SITE" ]; then
  FRESH=--fresh
  if [ -n "$TORCH_1_13_1" ]; then $M pytorch $FRESH --tree "$TORCH_1_13_1" --release 1.13.1; FRESH=; fi
  if [ -n "$TORCH_OLD" ]; then $M pytorch $FRESH --tree "$TORCH_OLD" --release 2.4.1; FRESH=; fi
  $M pytorch $FRESH --tree "$TORCH_SITE" --release 2.13.0 ${TORCH_CPP:+--cpp-tree "$TORCH_CPP"}
fi
[ -n "$LIBCUDART" ] && $M cuda-runtime --fresh --libcudart "$LIBCUDART" --release 12.9.79
if [ -n "$WHEELS" ]; then
  # the old release first (from empty), then the current one merges: older wordings stay templates
  $M transformers --fresh --archive "$WHEELS/transformers-4.57.1-py3-none-any.whl" --release 4.57.1
  $M transformers --archive "$WHEELS/transformers-5.25.0-py3-none-any.whl" --release 5.25.0
  $M accelerate --fresh --archive "$WHEELS/accelerate-1.10.1-py3-none-any.whl" --release 1.10.1
  $M accelerate --archive "$WHEELS/accelerate-1.16.0-py3-none-any.whl" --release 1.16.0
  $M huggingface_hub --fresh --archive "$WHEELS/huggingface_hub-0.35.3-py3-none-any.whl" --release 0.35.3
  $M huggingface_hub --archive "$WHEELS/huggingface_hub-2.4.0-py3-none-any.whl" --release 2.4.0
  $M deepspeed --fresh --archive "$WHEELS/deepspeed-0.17.6.tar.gz" --release 0.17.6
  $M deepspeed --archive "$WHEELS/deepspeed-0.19.8.tar.gz" --release 0.19.8
  # vLLM: the V0-engine releases first, then 0.11.0 (0.4.3 has no abi3 wheel: its cp311 one)
  $M vllm --fresh --archive "$WHEELS/vllm-0.4.3-cp311-cp311-manylinux1_x86_64.whl" --release 0.4.3
  for v in 0.5.5 0.6.6.post1 0.8.5 0.11.0; do
    $M vllm --archive "$WHEELS/vllm-$v-cp38-abi3-manylinux1_x86_64.whl" --release $v
  done
fi
[ -n "$SLURM_GIT" ] && $M slurm --fresh --git "$SLURM_GIT" --tags slurm-23-11-11-1 slurm-24-11-6-1 slurm-25-11-7-1
if [ -n "$KUBE_1_15_5" ] && [ -n "$KUBE_1_28_7" ]; then
  $M kubelet --fresh --git "$KUBE_1_15_5" --tags c50e5c3c693a49337d46846cc204a17662fca218 --release 1.15.5
  $M kubelet --git "$KUBE_1_28_7" --tags HEAD --release 1.28.7
  [ -n "$KUBE_MASTER" ] && $M kubelet --tree "$KUBE_MASTER" --release master-2026-12-08
fi
# the Xid catalog is kept in the repository as a table (catalog/nvidia-xid-catalog.tsv)
$M nvidia-xid --fresh --table catalog/nvidia-xid-catalog.tsv --release 2026-12-08
$PY catalog/apply.py --all
exit 0
