"""Same as PyTorch: eddy's language-model trainer against transformers + torch, step by step.

A small GPT-2 (width 64, 2 layers, 4 heads, context 64, vocabulary 1024) is trained for 100 steps
on the fortunes corpus of examples/lm/fortunes_gpt.yaml (Debian's `fortunes`, installed by
scripts/install-deps.sh), in float32, with every part of an `eddy lm train` step switched on: a
cosine schedule with warmup, gradient clipping (at 0.5, which acts in about half the steps), AdamW
with weight decay 0.1 on the matrices only, and 2 micro-batches accumulated per step. The same
model, from the same initial weights, is trained on the same batches by transformers'
GPT2LMHeadModel with torch.optim.AdamW and torch.nn.utils.clip_grad_norm_.

The check: the training loss of every step agrees to --rtol (1e-4) relative; exit status 1 if a
step does not, 0 if all do. The final weights are compared too and printed, but not checked.

How the two sides get the same start and the same data:

* Initial weights: eddy's depend only on the model section, the vocabulary, the dtype and
  training.seed (make_model in solvers/lm/model.cpp), not on the schedule or the number of steps.
  A first eddy run of 0 steps writes them as its checkpoint (with a constant schedule: a cosine
  one needs warmup < steps, checked when the schedule is made even for 0 steps), and
  `eddy lm export RUN --format hf` turns them into a folder that
  AutoModelForCausalLM.from_pretrained loads (safetensors, Hugging Face names).
* Batches: eddy.lm.draw_batch(RUN/data/train.tokens, batch, context, seed, stream) gives the
  windows `eddy lm train` trains on; micro-batch m of step s is stream s * accumulation + m.
* Schedule: eddy's CosineWithWarmupSchedule (src/eddy/optim/schedule.cpp), reproduced below.

Then eddy trains the 100 steps in the same run folder (reusing its tokenizer and token files),
compiled (the default of `eddy lm train`) and eager; its per-step loss is RUN/history.h5
"train_loss", the mean over the micro-batches of each one's loss.

Run it in the bench environment (torch and transformers: scripts/install-bench-deps.sh) after
building eddy's Python module and CLI (it takes BUILD/python and BUILD/bin/eddy from --build):

    .venv-bench/bin/python bench/lm/torch_parity.py [--modes compiled eager] [--keep DIR]

About a minute on 2 cores; --keep DIR keeps the run folder and the exported weights in DIR.
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The example's corpus and rates (examples/lm/fortunes_gpt.yaml) with a small model and every part
# of a step exercised: warmup and cosine decay, clipping, decoupled weight decay on two parameter
# groups, and accumulation of 2 micro-batches.
PEAK, WARMUP, FLOOR = 1.5e-3, 10, 1.0e-4
BETA1, BETA2, EPS = 0.9, 0.95, 1e-8  # eps: eddy's AdamOptions default, as torch's
# The gradient norm of this run stays between about 0.3 and 1.2: a clip of 0.5 acts in about half
# the steps, so both branches of clipping are compared.
WEIGHT_DECAY, CLIP = 0.1, 0.5
BATCH, ACCUMULATION, SEED = 8, 2, 0
CONTEXT, HIDDEN_SIZE = 64, 64


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="eddy's build folder: BUILD/python (the module) and BUILD/bin/eddy (the CLI)")
    parser.add_argument("--modes", nargs="+", default=["compiled", "eager"], choices=["compiled", "eager"],
                        help="eddy's training step compiled (eddy::compile, the default of eddy lm train) or eager")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rtol", type=float, default=1e-4, help="largest relative loss difference allowed")
    parser.add_argument("--threads", type=int, default=1, help="threads for eddy and torch")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder)")
    arguments = parser.parse_args()
    if arguments.steps <= WARMUP:
        parser.error(f"--steps must exceed the warmup ({WARMUP})")
    return arguments


ARGS = parse_arguments()
# Thread counts before torch and eddy start their pools.
for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)
sys.path.insert(0, os.path.join(ARGS.build, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import eddy  # noqa: E402

torch.set_num_threads(ARGS.threads)
torch.set_num_interop_threads(1)
eddy.set_num_threads(ARGS.threads)


def config(run_dir, steps, schedule):
    """The config of both eddy runs, as a dict for eddy.lm.train."""
    return {
        "description": "eddy against PyTorch (bench/lm/torch_parity.py)",
        "data": {"files": "/usr/share/games/fortunes/*", "exclude": ["*.dat"], "separator": "%",
                 "validation_fraction": 0.05},
        "tokenizer": {"vocab_size": 1024},
        "model": {"type": "gpt2", "context": CONTEXT, "hidden_size": HIDDEN_SIZE, "layers": 2, "heads": 4,
                  "dropout": 0.0, "tie_embeddings": True},
        "training": {"steps": steps, "batch_size": BATCH, "accumulation": ACCUMULATION, "learning_rate": PEAK,
                     "schedule": schedule, "weight_decay": WEIGHT_DECAY, "beta1": BETA1, "beta2": BETA2,
                     "clip": CLIP, "evaluate_every": max(steps, 1), "evaluation_batches": 1,
                     "dtype": "float32", "seed": SEED},
        "output": {"dir": run_dir, "checkpoint_every": 0},
    }


def learning_rate(step, total):
    """eddy's CosineWithWarmupSchedule::learning_rate (src/eddy/optim/schedule.cpp), step from 0:
    a linear warmup that starts at peak / warmup (not 0, as transformers'
    get_cosine_schedule_with_warmup does) and reaches the peak at step warmup - 1, then half a
    cosine from the peak at step warmup to the floor at step total."""
    if step < WARMUP:
        return PEAK * (step + 1) / WARMUP
    if step >= total:
        return FLOOR
    q = (step - WARMUP) / (total - WARMUP)
    return FLOOR + (PEAK - FLOOR) * 0.5 * (1 + math.cos(math.pi * q))


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def train_torch(hf_dir, train_tokens, steps, context):
    """The eddy step in PyTorch. Returns each step's loss (mean over its micro-batches), each step's
    gradient norm before clipping, and the final weights (numpy, Hugging Face names)."""
    # The plain attention (softmax of the scaled scores), the formula eddy evaluates.
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    config = model.config
    assert type(model).__name__ == "GPT2LMHeadModel", type(model).__name__
    assert config.resid_pdrop == config.embd_pdrop == config.attn_pdrop == 0, "the export must have no dropout"
    assert model.lm_head.weight is model.transformer.wte.weight, "the head must be tied, as in eddy"
    model.train()
    parameters = list(model.parameters())  # a tied weight once, as eddy's parameters()
    # eddy lm train's two AdamW groups (solvers/lm/trainer.cpp): decay on dim >= 2 (embeddings and
    # projections), none on norms and biases.
    matrices = [p for p in parameters if p.dim() >= 2]
    vectors = [p for p in parameters if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": WEIGHT_DECAY},
                                   {"params": vectors, "weight_decay": 0.0}],
                                  lr=learning_rate(0, steps), betas=(BETA1, BETA2), eps=EPS)
    losses, norms = [], []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps)
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for micro in range(ACCUMULATION):
            tokens, targets = eddy.lm.draw_batch(train_tokens, BATCH, context, SEED, step * ACCUMULATION + micro)
            tokens = torch.from_numpy(np.asarray(tokens))
            targets = torch.from_numpy(np.asarray(targets))
            logits = model(input_ids=tokens).logits
            # Labels are not passed: transformers would shift them, and eddy's targets are already
            # the next tokens.
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            # As eddy: the gradients of loss / accumulation, summed over the micro-batches.
            (loss / ACCUMULATION).backward()
            step_loss += loss.item() / ACCUMULATION
        norms.append(float(torch.nn.utils.clip_grad_norm_(parameters, CLIP)))
        optimizer.step()
        losses.append(step_loss)
    weights = {name: value.detach().numpy().copy() for name, value in model.state_dict().items()}
    return np.array(losses), np.array(norms), weights


def weight_difference(hf_dir, torch_weights, hidden_size):
    """The largest difference between eddy's final weights (exported to hf_dir) and torch's, each
    relative to the largest magnitude in its tensor, and the tensor's name.

    The key bias (the middle third of c_attn.bias) is left out: adding a constant to every key
    leaves the softmax unchanged, so its gradient is zero up to rounding, and AdamW, which divides
    by the root of the gradient's square, moves it by rounding noise in both frameworks."""
    from safetensors.numpy import load_file
    eddy_weights = load_file(os.path.join(hf_dir, "model.safetensors"))
    assert eddy_weights, hf_dir
    worst, worst_name = 0.0, None
    for name, value in eddy_weights.items():
        reference = torch_weights[name]
        if name.endswith("attn.c_attn.bias"):
            keep = np.r_[0:hidden_size, 2 * hidden_size:3 * hidden_size]
            value, reference = value[keep], reference[keep]
        difference = float(np.max(np.abs(value - reference)) / np.max(np.abs(reference)))
        if difference >= worst:
            worst, worst_name = difference, name
    return worst, worst_name


def compare(name, eddy_losses, torch_losses, rtol):
    """Prints every 10th step and the worst; returns the largest relative difference."""
    relative = np.abs(eddy_losses - torch_losses) / np.abs(torch_losses)
    worst = int(np.argmax(relative))
    print(f"\n{name} against torch ({len(relative)} steps)")
    print(f"{'step':>6} {'eddy loss':>14} {'torch loss':>14} {'relative diff':>14}")
    for step in range(len(relative)):
        if step % 10 == 0 or step == len(relative) - 1 or step == worst:
            mark = "  <- largest" if step == worst else ""
            print(f"{step:>6} {eddy_losses[step]:>14.8f} {torch_losses[step]:>14.8f} {relative[step]:>14.3e}{mark}")
    verdict = "ok" if relative.max() <= rtol else "FAILED"
    print(f"{name}: largest relative difference {relative.max():.3e} at step {worst} (limit {rtol:g}): {verdict}")
    return float(relative.max())


def main():
    cli = os.path.join(ARGS.build, "bin", "eddy")
    work = ARGS.keep or tempfile.mkdtemp(prefix="eddy_torch_parity_")
    os.makedirs(work, exist_ok=True)
    run_dir, initial_dir = os.path.join(work, "run"), os.path.join(work, "initial_hf")
    print(f"eddy {getattr(eddy, '__version__', '?')} | torch {torch.__version__} | "
          f"transformers {transformers.__version__} | work folder {work}")
    largest = {}
    try:
        # The initial weights: 0 steps, so the checkpoint is the model as made from the seed.
        started = time.time()
        result = eddy.lm.train(config(run_dir, 0, {"type": "constant"}))
        assert result["finished"], result["message"]
        print(f"eddy: {result['parameters']} parameters; initial weights and token files in "
              f"{time.time() - started:.0f} s")
        subprocess.run([cli, "lm", "export", run_dir, "--format", "hf", "--output", initial_dir], check=True,
                       stdout=subprocess.DEVNULL)
        train_tokens = os.path.join(run_dir, "data", "train.tokens")
        tokens_before = file_bytes(train_tokens)

        started = time.time()
        torch_losses, torch_norms, torch_weights = train_torch(initial_dir, train_tokens, ARGS.steps, CONTEXT)
        # Clipping must act for the check to cover it.
        print(f"torch: {ARGS.steps} steps in {time.time() - started:.0f} s; gradient norm "
              f"{torch_norms.min():.3g} to {torch_norms.max():.3g}, clipped at {CLIP:g} in "
              f"{int(np.sum(torch_norms > CLIP))} of {ARGS.steps} steps")

        schedule = {"type": "cosine", "warmup": WARMUP, "floor": FLOOR}
        for mode in ARGS.modes:
            started = time.time()
            result = eddy.lm.train(config(run_dir, ARGS.steps, schedule), eager=(mode == "eager"))
            assert result["finished"], result["message"]
            # The same run folder: the tokenizer and token files must have been reused as they were.
            assert file_bytes(train_tokens) == tokens_before, "eddy rewrote train.tokens between runs"
            print(f"eddy {mode}: {ARGS.steps} steps in {time.time() - started:.0f} s")
            eddy_losses = np.asarray(eddy.read_hdf5(os.path.join(run_dir, "history.h5"), "train_loss").numpy(),
                                     dtype=np.float64)
            assert eddy_losses.shape == torch_losses.shape, (eddy_losses.shape, torch_losses.shape)
            largest[mode] = compare(f"eddy {mode}", eddy_losses, torch_losses, ARGS.rtol)
            # Not part of the check, but it says how close the two trajectories stay: the final
            # weights (the run's checkpoint, exported) against torch's.
            final_dir = os.path.join(work, f"final_hf_{mode}")
            subprocess.run([cli, "lm", "export", run_dir, "--format", "hf", "--output", final_dir], check=True,
                           stdout=subprocess.DEVNULL)
            difference, name = weight_difference(final_dir, torch_weights, HIDDEN_SIZE)
            print(f"eddy {mode}: final weights differ from torch's by at most {difference:.2e} of the "
                  f"tensor's largest entry ({name}; key biases left out)")
    finally:
        if not ARGS.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\nlargest relative differences: " + ", ".join(f"eddy {m} {v:.3e}" for m, v in largest.items()))
    return 0 if all(v <= ARGS.rtol for v in largest.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
