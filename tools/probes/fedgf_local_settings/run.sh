#!/bin/sh
# FedGF at FedVLS's MNIST Dir(0.05) setting (MLP, 10 clients, all per round, batch 64, lr 0.01, 50 rounds,
# seed 0) with the local epochs E and momentum m changed, plus FedAvg at FedGF's own local settings, and FedGF
# with the divergence threshold c_cos raised from 0.3 to 1.0.
# Usage, from the repository root: FEDLIB_DATA=../shared/datasets sh tools/probes/fedgf_local_settings/run.sh STORE
# Trains into STORE (not the reference store), one torch thread per run, then prints one JSON line per run.
store=${1:?usage: run.sh STORE}
for spec in "fedgf 1 0" "fedavg 1 0" "fedgf 1 0.9" "fedgf 5 0" "fedgf 1 0 c_cos=1.0" "fedgf 5 0.9 c_cos=1.0"; do
  set -- $spec
  extra=${4:+--method-arg $4}
  python3 -m fedlib run --dataset mnist --model mlp --partition dirichlet --beta 0.05 --clients 10 \
    --method "$1" --rounds 50 --local-epochs "$2" --momentum "$3" --batch-size 64 --lr 0.01 --weight-decay 1e-5 \
    --seed 0 --threads 1 --results "$store" --quiet $extra
done
python3 tools/probes/fedgf_local_settings/summarize.py "$store"
