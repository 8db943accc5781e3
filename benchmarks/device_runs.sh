#!/usr/bin/env bash
# Train a notebook's declared runs on a GPU machine's copy of the checkout, a few queues side by
# side, until a deadline; then tar the working store into $OUT/store.tar, to publish here with
# tools/reference_runs.py (same arguments, --commit; it finds the finished runs in results/).
#
#   bash benchmarks/device_runs.sh SECONDS NOTEBOOK PROFILE "FIELD=VALUE ..." METHODS[,METHODS...] ...
#   bash benchmarks/device_runs.sh 400 fedlmd_table3_partitions paper "dataset=mnist partition=shards seed=0" \
#       fedavg,fedntd fedlmd,fedlmd_tf        # two processes: FedAvg then FedNTD, FedLMD then FedLMD-Tf
#
# The copy has no git: stamp it first here (bash benchmarks/gpu_check.sh --prepare-carry MNIST) and
# carry .carry, so each run records the commit it trained from. $EXTRA passes more arguments to
# tools/reference_runs.py (e.g. --param "methods=[...]"); $FEDLIB_THREADS sets each process's CPU threads.
# $DEVICE_RUN_DEVICE=cpu makes the smoke of this script on a machine without a GPU.
set -u
cd "$(dirname "$0")/.."
seconds=$1 notebook=$2 profile=$3 where=$4; shift 4
results=${DEVICE_RESULTS:-/tmp/fedlib-device-results}
mkdir -p "$results"
. benchmarks/unpack_carry.sh && unpack_carry /tmp/fedlib-device-data  # the carried data sets, if any
set -f; extra=(${EXTRA:-}); set +f  # words, never file-name patterns
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD" FEDLIB_THREADS=${FEDLIB_THREADS:-4}
pids=()
for queue in "$@"; do
  timeout "$seconds" ${PYTHON:-python3} tools/reference_runs.py "$notebook" --profile "$profile" --where ${where} \
    --methods "$queue" --device "${DEVICE_RUN_DEVICE:-cuda}" --backend auto --results "$results" --no-publish "${extra[@]}" \
    > "/tmp/device-runs-${queue//,/-}.log" 2>&1 &
  pids+=($!)
done
started=$(date +%s)
while kill -0 "${pids[@]}" 2>/dev/null || [ -n "$(jobs -r)" ]; do  # progress: rounds stored per run
  sleep 10
  line="$(( $(date +%s) - started )) s:"
  for run in "$results"/*/; do [ -f "$run/rounds.jsonl" ] && line+=" $(basename "$run")=$(wc -l < "$run/rounds.jsonl")"; done
  echo "$line"
  [ -z "$(jobs -r)" ] && break
done
wait
tail -n 5 /tmp/device-runs-*.log
# the device tool returns files of at most 16 MiB: the store goes back gzipped in 15 MB pieces
if [ -n "${OUT:-}" ]; then tar -C "$results" -czf - . | split -b 15m - "$OUT/store.tgz." && ls -l "$OUT"/store.tgz.*; fi
