#!/bin/bash
# Regenerates the torchrun-*.log files: healthy gloo jobs on 127.0.0.1 with
# PyTorch 2.13.0 CPU. Usage: torchrun_runs.sh PYTHON_BIN_DIR OUT_DIR
set -u
BIN=$1; OUT=$2; HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/ddp_gloo_train.py
cd "$OUT"

# 16 ranks, no tee: C++ log lines carry the [rankN]: prefix, c10d debug at INFO.
TORCH_DISTRIBUTED_DEBUG=INFO TORCH_CPP_LOG_LEVEL=INFO \
  "$BIN/torchrun" --nproc-per-node 16 --master-addr 127.0.0.1 --master-port 29612 \
  "$SCRIPT" --steps 20 > torchrun-16rank-cpp-info.log 2>&1

# 32 ranks, plain stdout (no tee), agent logging at INFO.
LOGLEVEL=INFO "$BIN/torchrun" --nproc-per-node 32 --master-addr 127.0.0.1 \
  --master-port 29613 "$SCRIPT" --steps 10 > torchrun-32rank-loglevel-info.log 2>&1

# Two "nodes" on one host: two agents meet through c10d rendezvous.
for node in 0 1; do
  LOGLEVEL=INFO TORCH_CPP_LOG_LEVEL=INFO "$BIN/torchrun" --nnodes 2 --nproc-per-node 4 \
    --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29614 --rdzv-id healthy-2node \
    --tee 3 --log-dir "logs-2node-$node" "$SCRIPT" --steps 20 \
    > "torchrun-2node-c10d-rdzv-node$node.log" 2>&1 &
done
wait
