#!/usr/bin/env bash
# lm_train_on_ranks.sh EDDY PYTHON DIR MPIEXEC FLAGS...: `eddy lm train` of a small Llama on the
# fortunes (float64) as one process, then on 2 ranks tensor parallel (parallel.mesh [2], names
# [mp]) and data parallel (no parallel section): every step's training loss and the validation
# loss in history.h5 must agree to 1e-9. PYTHON has h5py.
set -eu
eddy=$1 python=$2 dir=$3 mpiexec=$4
shift 4
rm -rf "$dir"
small=(model.type=llama model.hidden_size=32 model.layers=1 model.heads=4 model.context=16 tokenizer.vocab_size=300
       training.steps=3 training.batch_size=4 training.evaluation_batches=1 training.evaluate_every=3
       training.schedule.warmup=1 training.dtype=float64 output.checkpoint_every=2)
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" output.dir="$dir/one" --quiet > /dev/null
for run in "tensor_parallel:parallel.mesh=[2] parallel.names=[mp]" "data_parallel:"; do
  name=${run%%:*}
  # shellcheck disable=SC2206
  extra=(${run#*:})
  "$mpiexec" -n 2 "$@" "$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" "${extra[@]}" \
    output.dir="$dir/$name" --quiet > /dev/null
  "$python" - "$dir/one/history.h5" "$dir/$name/history.h5" "$name" <<'PY'
import sys
import h5py
import numpy as np
one, ranks = (h5py.File(path, "r") for path in sys.argv[1:3])
for key in ("train_loss", "validation/loss"):
    a, b = one[key][()], ranks[key][()]
    assert a.shape == b.shape and len(a) > 0, (key, a, b)
    assert np.all(np.abs(a - b) <= 1e-9 * np.abs(a)), f"{sys.argv[3]}: {key} {a} on one process, {b} on 2 ranks"
print(f"{sys.argv[3]} on 2 ranks: training losses {one['train_loss'][()]} as on one process")
PY
done
echo "lm train on ranks: the losses agree"
