#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py options]
if [ "$#" -lt 3 ]; then
    echo "usage: $(basename "$0") CONFIG CHECKPOINT GPUS [test.py options]" >&2
    echo "$(basename "$0"): error: expected at least 3 arguments, got $#" >&2
    exit 2
fi
case "$3" in
    ''|*[!0-9]*|0)
        echo "usage: $(basename "$0") CONFIG CHECKPOINT GPUS [test.py options]" >&2
        echo "$(basename "$0"): error: GPUS must be a positive number of processes, got '$3'" >&2
        exit 2 ;;
esac
set -e
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
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
    "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
