#!/usr/bin/env bash
# Usage: [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#     tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]
# GPUS > GPUS_PER_NODE spans several nodes (one task per GPU).
#
# Time limits and preemption. Slurm ends a job by sending SIGTERM to the
# tasks of its steps (time limit, scancel, preemption; not to a batch
# script) and SIGKILL KillWait seconds later (30 by default). train.py then
# saves a checkpoint at the next iteration and exits with status 143;
# --resume continues bit-identically.
# A warning before the time limit, to every task (checkpoint, exit 138):
#     SRUN_ARGS="--signal=USR1@120" tools/slurm_train.sh ...
# Requeue (only batch jobs can be requeued): submit this script with sbatch
# and --resume. "B:" sends the warning to this script, which forwards
# SIGUSR1 to srun and so to every task (SIGTERM is not forwarded: srun
# answers it by killing its tasks); train.py saves a checkpoint, runs
# `scontrol requeue $SLURM_JOB_ID` and exits; slurm runs this script again
# and --resume continues from the checkpoint:
#     sbatch -p PARTITION --job-name=JOB_NAME --nodes=2 --ntasks-per-node=8 \
#         --gres=gpu:8 --cpus-per-task=5 --time=24:00:00 \
#         --requeue --signal=B:USR1@120 --open-mode=append \
#         tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR --resume
# (GPUS / GPUS_PER_NODE / CPUS_PER_TASK must match what sbatch allocates.)
# `scancel --batch --signal=USR1 JOBID` does the same at once.
if [ "$#" -lt 4 ]; then
    echo "usage: $(basename "$0") PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]" >&2
    echo "$(basename "$0"): error: expected at least 4 arguments, got $#" >&2
    exit 2
fi
set -x
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PY_ARGS=${@:5}
TOOLS="$(cd "$(dirname "$0")" && pwd)"

PYTHONPATH="$TOOLS/..":$PYTHONPATH \
srun -p "${PARTITION}" \
    --job-name="${JOB_NAME}" \
    --gres=gpu:"${GPUS_PER_NODE}" \
    --ntasks="${GPUS}" \
    --ntasks-per-node="${GPUS_PER_NODE}" \
    --cpus-per-task="${CPUS_PER_TASK}" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    python -u "$TOOLS/train.py" "${CONFIG}" --work-dir="${WORK_DIR}" \
    --launcher="slurm" ${PY_ARGS} &
SRUN_PID=$!
# SIGUSR1 for this script (sbatch --signal=B:USR1@T, scancel --batch
# --signal=USR1) goes on to srun, which forwards it to every task. SIGTERM
# is not forwarded: srun answers SIGTERM by killing its tasks (SIGKILL);
# slurm sends SIGTERM to the tasks itself. bash runs a trap only between
# commands, hence srun in the background and wait, which a trapped signal
# interrupts (status > 128) while srun still runs.
trap 'kill -s USR1 "$SRUN_PID" 2>/dev/null' USR1
while :; do
    wait "$SRUN_PID"
    STATUS=$?
    kill -0 "$SRUN_PID" 2>/dev/null || break
done
exit "$STATUS"
