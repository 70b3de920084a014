#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG GPUS [train.py options]
# Multi-node: set NNODES, NODE_RANK, MASTER_ADDR and PORT on every node.
if [ "$#" -lt 2 ]; then
    echo "usage: $(basename "$0") CONFIG GPUS [train.py options]" >&2
    echo "$(basename "$0"): error: expected at least 2 arguments, got $#" >&2
    exit 2
fi
case "$2" in
    ''|*[!0-9]*|0)
        echo "usage: $(basename "$0") CONFIG GPUS [train.py options]" >&2
        echo "$(basename "$0"): error: GPUS must be a positive number of processes, got '$2'" >&2
        exit 2 ;;
esac
set -e
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
TOOLS="$(cd "$(dirname "$0")" && pwd)"

PYTHONPATH="$TOOLS/..":$PYTHONPATH \
exec python -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$TOOLS/train.py" "$CONFIG" --launcher pytorch "${@:3}"
