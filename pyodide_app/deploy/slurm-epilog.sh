#!/bin/sh
# faildex in a Slurm epilog: the job that just ended diagnoses its own logs, and
# one JSON line (faildex triage) goes to a shared folder. Only lines travel.
#
# slurm.conf:   Epilog=/etc/slurm/epilog.d/faildex.sh   (this file; see README.md)
# Settings (environment, or edit the defaults below):
#   FAILDEX            the faildex command          (default: faildex on PATH)
#   FAILDEX_JOB_DIR    the job's log folder, %j = job id  (default: the job's
#                      StdOut/StdErr files from `scontrol show job`)
#   FAILDEX_LINES_DIR  where the lines go, on a shared file system
#                      (default: /shared/faildex/lines); one file per node and day
#   FAILDEX_TIMEOUT    seconds before giving up      (default: 300)
#
# An epilog that fails makes Slurm drain the node, so this script always exits 0,
# and a slow diagnosis is cut off by timeout.

FAILDEX=${FAILDEX:-faildex}
LINES_DIR=${FAILDEX_LINES_DIR:-/shared/faildex/lines}
TIMEOUT=${FAILDEX_TIMEOUT:-300}
JOB=${SLURM_JOB_ID:-}
NODE=${SLURMD_NODENAME:-$(hostname -s)}

log() { echo "faildex-epilog: $*" >&2; logger -t faildex-epilog "$*" 2>/dev/null; }

[ -n "$JOB" ] || { log "no SLURM_JOB_ID"; exit 0; }

# The epilog runs on every node of the job; diagnose once, on the first one.
NODES=""
if command -v scontrol >/dev/null 2>&1 && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
  NODES=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | paste -sd, -)
  FIRST=${NODES%%,*}
  [ -z "$FIRST" ] || [ "$FIRST" = "$NODE" ] || exit 0
  # scontrol that cannot expand the list (no slurm.conf on this host): the list as given
  [ -n "$NODES" ] || NODES=$SLURM_JOB_NODELIST
else
  NODES=${SLURM_JOB_NODELIST:-$NODE}
fi

if [ -n "${FAILDEX_JOB_DIR:-}" ]; then
  set -- "$(printf '%s' "$FAILDEX_JOB_DIR" | sed "s/%j/$JOB/g")"
elif command -v scontrol >/dev/null 2>&1; then
  # StdOut=/path StdErr=/path of the job record, which Slurm keeps during the epilog
  set -- $(scontrol show job -o "$JOB" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Std\(Out\|Err\)=//p' | sort -u)
else
  log "job $JOB: set FAILDEX_JOB_DIR (no scontrol to find the job's output)"; exit 0
fi
[ $# -gt 0 ] && [ -e "$1" ] || { log "job $JOB: no logs at ${1:-?}"; exit 0; }

mkdir -p "$LINES_DIR" 2>/dev/null
OUT="$LINES_DIR/$(date -u +%Y-%m-%d)-$NODE.jsonl"
# Two jobs can end on one node at once: flock keeps their lines whole.
LOCK=""
command -v flock >/dev/null 2>&1 && LOCK="flock $OUT.lock"
if ! $LOCK timeout "$TIMEOUT" "$FAILDEX" triage --job "$JOB" --nodes "$NODES" --jobs 1 \
     -o "$OUT" "$@" 2>/dev/null; then
  log "job $JOB: faildex triage did not finish (exit $?); the job is unaffected"
fi
exit 0
