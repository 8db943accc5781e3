#!/usr/bin/env bash
# Regenerate the paper figures and tables: set up .venv from requirements-lock.txt, register the
# `fedlib` Jupyter kernel, then execute the notebooks with `python -m fedlib.paper.reproduce`.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: ./reproduce.sh [--no-install | --install-only] [RUNNER OPTIONS]

Creates or reuses .venv, installs requirements-lock.txt and fedlib (skipped when neither the
lock file nor pyproject.toml changed since the last install), registers the Jupyter kernel
"fedlib", then runs every notebook: python -m fedlib.paper.reproduce RUNNER OPTIONS.

  --no-install       use the current python (PYTHON, default python3); no venv, no install
  --install-only     set up .venv and the kernel, run no notebook
  -h, --help         this help

Runner options (passed through; default profile smoke):
  --profile smoke|lesson|quick|paper
                                smoke: bundled data, seconds; lesson: the course's settings (runs
                                committed, served); quick: real data, reduced (CPU); paper: the
                                papers' settings (GPU)
  --only PATTERNS               comma-separated substrings or globs of notebook names
  --device DEV                  auto (default), cpu, cuda, cuda:1, ...
  --data DIR                    dataset folder (default: $FEDLIB_DATA or the cache)
  --download                    let torchvision download missing datasets (MNIST, Fashion-MNIST,
                                CIFAR-10/100); sets FEDLIB_DOWNLOAD=1 for the notebooks
  -p NAME VALUE                 set one notebook parameter, VALUE read as YAML (-p seeds '[0, 1]');
                                repeatable; it wins over the profile
  --publish                     write the committed figures/ and tables/ and record in their
                                index.json what produced each file (default: output/<profile>/)
  --results DIR --figures DIR --tables DIR --out DIR --kernel NAME
  --verbose                     stream the cells' output (default: one line per notebook)
  --list                        each notebook's paper figure/table, data and profile costs
  --plan                        the table notebooks' runs, how many are stored, estimated CPU- or
                                GPU-hours on --device (on a CPU also the hours on each GPU whose
                                probes are committed), runs whose data are missing here and why;
                                runs nothing but small cached probe rounds (seconds per image from
                                stored runs, else steady-state probes on a stand-in: cached, or
                                committed for this machine in fedlib/orchestration/measured_rates.json).
                                --profile paper prints this plan before it starts.
  --dry-run                     one round of every distinct config the table notebooks declare, on
                                a small slice of its data (a stand-in of the same shape where the
                                data are missing), on the CPU, storing nothing; per config: ok or
                                the error, peak memory, parameters, seconds per image. Resumable:
                                rows are appended to --dry-run-csv (default
                                output/dry_run/<profile>.csv) and configs already there skipped.
  --dry-run-csv FILE --jobs N --limit N --retry-errors
                                dry run: its CSV, worker processes (default 1), at most N new
                                configs (spread over dataset, model, method), re-run errors
  --render-only                 train nothing: tables and figures from the stores (results/ and the
                                committed reference_results/); cells no store holds read "not run"
  --executor serial|local|ray   local/ray: train every run the selected table notebooks declare (each
                                distinct run once) side by side first, then render the notebooks
  --workers N                   runs side by side (alone: --executor local); default one per core
  --address auto|ray://HOST:PORT  --executor ray: a running Ray cluster (default: a local Ray)
  --threads N                   intra-op threads per run (default: cores / workers)
Environment: FEDLIB_DATA (datasets), FEDLIB_BACKEND=sequential|threads|stacked|graphed|auto (default auto),
FEDLIB_THREADS (intra-op threads per process).

Exit status: the runner's (0 all ran, 1 a notebook or a dry-run config failed, 2 bad options).
USAGE
}

install_only=0
do_install=1
runner_args=()
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --no-install) do_install=0 ;;
    --install-only) install_only=1 ;;
    *) runner_args+=("$arg") ;;
  esac
done
if [[ $do_install == 0 && $install_only == 1 ]]; then
  echo "error: --no-install and --install-only contradict each other; pass one" >&2
  exit 2
fi

cd "$(dirname "${BASH_SOURCE[0]}")"
python="${PYTHON:-python3}"

setup_venv() {
  [[ -x .venv/bin/python ]] || "$python" -m venv .venv
  python=.venv/bin/python
  # The stamp holds a hash of what was installed, so an unchanged setup costs no pip run at all
  # (pip would otherwise re-check ~140 pinned packages, torch included, on every call).
  local stamp=.venv/.fedlib-install-stamp wanted
  wanted="$("$python" -c 'import hashlib, sys
print(hashlib.sha256(b"".join(open(f, "rb").read() for f in sys.argv[1:])).hexdigest())' \
    requirements-lock.txt pyproject.toml)"
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]]; then
    "$python" -m pip install -r requirements-lock.txt
    # setuptools comes pinned from the lock file, so no isolated build environment is needed.
    "$python" -m pip install --no-build-isolation -e ".[notebooks,dev]"
    echo "$wanted" > "$stamp"
  else
    echo "reproduce.sh: .venv is up to date with requirements-lock.txt and pyproject.toml"
  fi
  # --sys-prefix: the kernelspec lives inside .venv, so two checkouts never point at each other's venv
  "$python" -m ipykernel install --sys-prefix --name fedlib --display-name "Python (fedlib)"
}

if [[ $do_install == 1 ]]; then
  setup_venv
elif [[ -x .venv/bin/python && -z "${PYTHON:-}" ]]; then
  python=.venv/bin/python  # --no-install: the environment an earlier run set up
fi
if [[ $install_only == 1 ]]; then
  exit 0
fi

status=0
"$python" -m fedlib.paper.reproduce "${runner_args[@]+"${runner_args[@]}"}" || status=$?
exit "$status"
