#!/usr/bin/env bash
# The GPU check: every part of benchmarks/gpu_check.py under its own time limit (about 9 minutes at
# most), joined into benchmarks/RESULTS-gpu.md (and copied to $OUT when set, with the plan's probes).
#
#   bash benchmarks/gpu_check.sh                      # on a machine with one CUDA GPU
#   bash benchmarks/gpu_check.sh --device cpu --tiny  # the smoke: every part on a CPU (minutes)
#   FEDLIB_DATA=... bash benchmarks/gpu_check.sh --prepare-carry  # gzip Fashion-MNIST into .carry/ to carry it
#   FEDLIB_DATA=... bash benchmarks/gpu_check.sh --prepare-carry MNIST  # another data set (one fits a call)
#   GPU_CHECK_LIMITS="env 15 tests 90 workloads 170" bash benchmarks/gpu_check.sh  # these parts, these limits
#
# No data need travel: CIFAR-10 and Fashion-MNIST have full-size stand-ins, and timings do not
# depend on the pixels (a carried data set is used when present).
#
# Data: read from $FEDLIB_DATA, else unpacked from .carry/<Name>/raw/*.gz (torchvision's file names,
# gzipped: what a device call carries); CIFAR-10 is a full-size stand-in, and so is Fashion-MNIST
# when it was not carried (the timings do not depend on the pixels).
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--prepare-carry" ]; then  # here, before a device call: gzip data sets into .carry/ (ignored by git)
  shift; names=("$@"); [ ${#names[@]} -eq 0 ] && names=(FashionMNIST)  # torchvision's folder names, e.g. MNIST
  for name in "${names[@]}"; do
    src=${FEDLIB_DATA:?set FEDLIB_DATA to the folder holding $name/raw}/$name/raw
    mkdir -p ".carry/$name/raw"
    for f in "$src"/*-ubyte; do gzip -c "$f" > ".carry/$name/raw/$(basename "$f").gz"; done
  done
  # the commit and a digest of fedlib/, so runs on the copy (which has no git) record their code revision
  ${PYTHON:-.venv/bin/python} -c 'from fedlib import store; print(store.code_revision_stamp())' || exit 2
  du -sh .carry; exit 0
fi
PY=${PYTHON:-python3}
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--device cuda)
TINY=0; for a in "${ARGS[@]}"; do [ "$a" = "--tiny" ] && TINY=1; done

. benchmarks/unpack_carry.sh && unpack_carry /tmp/fedlib-gpu-check-data  # the carried data sets, if any
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# part and its limit in seconds (the smoke gives each part the same ample limit)
# (opcount counts on the CPU: run it on the machine you work on; the limits sum to about 9 minutes)
PARTS=("env 15" "tests 140" "rates 170" "workloads 150" "packing 60")
# GPU_CHECK_LIMITS="env 15 tests 90 ..." replaces the limits; a part left out of it is skipped
if [ -n "${GPU_CHECK_LIMITS:-}" ]; then
  read -ra words <<< "$GPU_CHECK_LIMITS"; PARTS=()
  for ((i = 0; i + 1 < ${#words[@]}; i += 2)); do PARTS+=("${words[i]} ${words[i+1]}"); done
fi
RESULTS=benchmarks/RESULTS-gpu.md
[ "$TINY" = 1 ] && RESULTS=${GPU_CHECK_RESULTS:-/tmp/RESULTS-gpu-smoke.md}
{
  echo "# GPU check (benchmarks/gpu_check.sh)"
  echo
  # fedlib's own reading: git where it is current, else the commit a copy was stamped with
  echo "Code $("$PY" -c 'from fedlib import store; print(store.code_revision()[:12])' 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC'), arguments: ${ARGS[*]}."
  echo "Each part ran under its own time limit; a part that ran out says so. Regenerate with the same command."
} > "$RESULTS"
for entry in "${PARTS[@]}"; do
  set -- $entry
  part=$1; limit=$2
  [ "$TINY" = 1 ] && limit=300
  started=$(date +%s)
  section=$(timeout "$limit" "$PY" -m benchmarks.gpu_check --part "$part" "${ARGS[@]}" 2>/tmp/gpu-check-$part.err)
  code=$?
  took=$(( $(date +%s) - started ))
  {
    echo
    if [ -n "$section" ]; then echo "$section"; else echo "## $part"; fi
    echo
    if [ $code -eq 124 ]; then echo "_part $part ran out of its $limit s limit after printing the above_"
    elif [ $code -ne 0 ]; then echo "_part $part failed (exit $code): $(tail -n 1 /tmp/gpu-check-$part.err)_"
    else echo "_part $part: $took s_"; fi
  } >> "$RESULTS"
  echo "part $part: exit $code, $took s" >&2
done
cat "$RESULTS"
# the rates part's probes (merge them into fedlib/orchestration/measured_rates.json back home)
rates="${FEDLIB_CACHE:-$HOME/.cache/fedlib}/plan_rates.json"
if [ -n "${OUT:-}" ]; then
  cp "$RESULTS" "$OUT/"; cat /tmp/gpu-check-*.err > "$OUT/gpu-check-stderr.log" 2>/dev/null
  [ -f "$rates" ] && cp "$rates" "$OUT/plan_rates.json"
fi
exit 0
