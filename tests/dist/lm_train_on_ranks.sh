#!/usr/bin/env bash
# lm_train_on_ranks.sh EDDY PYTHON DIR MPIEXEC FLAGS...: `eddy lm train` of a small Llama on the
# fortunes (float64) as one process, then on 2 ranks tensor parallel (parallel.mesh [2], names
# [mp]), data parallel (no parallel section) and data parallel with ZeRO stage 1
# (training.zero_stage=1), both also with two micro-batches a step and clipping, and with a batch
# of 5 windows that 2 ranks split unevenly: every step's
# training loss and the validation loss in history.h5 must agree to 1e-9, and the progress line
# says how many bytes a rank sent per step. Then a ZeRO-1
# checkpoint written on 2 ranks after 2 steps resumes on one process to the losses of 3
# uninterrupted steps. PYTHON has h5py.
set -eu
eddy=$1 python=$2 dir=$3 mpiexec=$4
shift 4
rm -rf "$dir"
small=(model.type=llama model.hidden_size=32 model.layers=1 model.heads=4 model.context=16 tokenizer.vocab_size=300
       training.steps=3 training.batch_size=4 training.evaluation_batches=1 training.evaluate_every=3
       training.schedule.warmup=1 training.dtype=float64 output.checkpoint_every=2)
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" output.dir="$dir/one" --quiet > /dev/null
# compare ONE RANKS NAME: the histories of two runs agree.
compare() {
  "$python" - "$1/history.h5" "$2/history.h5" "$3" <<'PY'
import sys
import h5py
import numpy as np
one, ranks = (h5py.File(path, "r") for path in sys.argv[1:3])
for key in ("train_loss", "validation/loss"):
    a, b = one[key][()], ranks[key][()]
    assert a.shape == b.shape and len(a) > 0, (key, a, b)
    assert np.all(np.abs(a - b) <= 1e-9 * np.abs(a)), f"{sys.argv[3]}: {key} {a} on one process, {b} on 2 ranks"
print(f"{sys.argv[3]}: training losses {one['train_loss'][()]} as on one process")
PY
}
for run in "tensor_parallel:parallel.mesh=[2] parallel.names=[mp]" "data_parallel:" "zero1:training.zero_stage=1"; do
  name=${run%%:*}
  # shellcheck disable=SC2206
  extra=(${run#*:})
  "$mpiexec" -n 2 "$@" "$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" "${extra[@]}" \
    output.dir="$dir/$name" > "$dir/$name.log" 2>&1
  compare "$dir/one" "$dir/$name" "$name on 2 ranks"
  # The progress line says what the rank sent per step.
  grep -q "sent [0-9.]* KiB/step" "$dir/$name.log" || { echo "$name: no 'sent .../step' in its log"; exit 1; }
done
# Two micro-batches a step and clipping at work (the gradient norm is above 0.05 throughout):
# the dp ranks' gradient parts are summed once per step, in one all-reduce or ZeRO-1's
# reduce-scatter, and clipped on the reduced slices there.
accumulated=(training.accumulation=2 training.clip=0.05)
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" "${accumulated[@]}" output.dir="$dir/one_accumulated" \
  --quiet > /dev/null
for run in "data_parallel_accumulated:" "zero1_accumulated:training.zero_stage=1"; do
  name=${run%%:*}
  # shellcheck disable=SC2206
  extra=(${run#*:})
  "$mpiexec" -n 2 "$@" "$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" "${accumulated[@]}" "${extra[@]}" \
    output.dir="$dir/$name" --quiet > /dev/null
  compare "$dir/one_accumulated" "$dir/$name" "$name on 2 ranks"
done
# A batch the ranks do not divide: 5 windows a step, 2 on one rank and 3 on the other.
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" training.batch_size=5 output.dir="$dir/one_uneven" \
  --quiet > /dev/null
for run in "data_parallel_uneven:" "zero1_uneven:training.zero_stage=1"; do
  name=${run%%:*}
  # shellcheck disable=SC2206
  extra=(${run#*:})
  "$mpiexec" -n 2 "$@" "$eddy" lm train examples/lm/fortunes_gpt.yaml "${small[@]}" training.batch_size=5 "${extra[@]}" \
    output.dir="$dir/$name" --quiet > /dev/null
  compare "$dir/one_uneven" "$dir/$name" "$name on 2 ranks"
done
# A constant schedule, so that a run of 2 steps takes the first 2 steps of a run of 3, and an
# evaluation after every step, so that both runs evaluate at the same steps.
constant=("${small[@]/training.schedule.warmup=1/training.schedule=\{type: constant\}}")
constant=("${constant[@]/training.evaluate_every=3/training.evaluate_every=1}")
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${constant[@]}" output.dir="$dir/constant" --quiet > /dev/null
"$mpiexec" -n 2 "$@" "$eddy" lm train examples/lm/fortunes_gpt.yaml "${constant[@]}" training.steps=2 \
  training.zero_stage=1 output.dir="$dir/zero1_resumed" --quiet > /dev/null
"$eddy" lm train examples/lm/fortunes_gpt.yaml "${constant[@]}" output.dir="$dir/zero1_resumed" --resume --quiet > /dev/null
compare "$dir/constant" "$dir/zero1_resumed" "zero1 on 2 ranks resumed on one process"
echo "lm train on ranks: the losses agree"
