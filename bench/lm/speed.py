"""Language-model speed, eddy against PyTorch in one run, at 1 and 2 threads.

The model is the example's (examples/lm/fortunes_gpt.yaml): GPT-2 layout, 6 layers of width 320,
5 heads, context 128, a 4096-token vocabulary, 8.75 M parameters, batch 16 (2048 tokens a step).

* Training tokens/s. eddy: `eddy.lm.train` on the example config, the path `eddy lm train`
  takes, compiled (its default) and eager; the time of each step is the trainer's own
  (step_seconds: the micro-batch, clipping and AdamW, not evaluation). PyTorch: transformers'
  GPT2LMHeadModel from the same initial weights (exported by `eddy lm export`), with its default
  attention (scaled_dot_product_attention), cross-entropy, clip_grad_norm_ and AdamW on the same
  batches (eddy.lm.draw_batch), eager and with the model under torch.compile (inductor; the
  optimizer step stays eager, as in transformers' Trainer). Each side runs --train-steps steps,
  --rounds times, the sides interleaved; the first step of each eddy call (which compiles) and
  the first --torch-warmup steps of torch (which compile under torch.compile) are left out, and
  the median step of the rest is quoted. With --bfloat16, the same three again with the matrix
  products in bfloat16: eddy's `training.autocast: bfloat16` (compiled) against the PyTorch step
  under torch.autocast("cpu", dtype=torch.bfloat16), eager and compiled, in a table of its own.
* The step's float32 products alone (step_products), in eddy.matmul and torch.matmul: a lower
  bound on a training step whose products run as fast, and so the most eddy / torch eager
  could reach if nothing else in eddy's step took time.
* Decode tokens/s with the KV cache, greedy, a 16-token prompt from the validation text and 112
  new tokens (the context is 128): eddy's model.generate (what `eddy lm generate` runs) against
  transformers' model.generate and against a plain loop of the model's forward with its
  cache (no generate() machinery), on the same weights. Median of --decode-runs runs (default
  9), each side after one warm-up run.
* Quantised decode: the same model's weights in int8 and int4 (groups of 64), as `eddy lm
  quantize` writes them, against eddy's float32 decode, the three decoding in turn run by run
  (a shared machine's slow stretch then moves their ratios less); and the validation perplexity
  of each.

The weights for decoding and perplexity are a trained run's: --run (default runs/fortunes_gpt,
what `eddy lm train examples/lm/fortunes_gpt.yaml` writes). Without one the bench first trains
the example into --run, for --quality-steps steps (default the example's 600), and says so.

    .venv-bench/bin/python bench/lm/speed.py [--threads 1 2] [--run runs/fortunes_gpt]

Each thread count runs in its own process (thread pools are sized when torch and eddy load).
About 15 minutes on 2 cores with a trained run at hand, 35 without.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "lm", "fortunes_gpt.yaml")
PROMPT_TOKENS, NEW_TOKENS = 16, 112


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="eddy's build folder: BUILD/python (the module) and BUILD/bin/eddy (the CLI)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--run", default=os.path.join(ROOT, "runs", "fortunes_gpt"),
                        help="a trained run of the example for decoding and perplexity")
    parser.add_argument("--quality-steps", type=int, default=600,
                        help="steps to train the example for when --run has no checkpoint (the example's 600 "
                             "take about 20 minutes on 2 cores)")
    parser.add_argument("--train-steps", type=int, default=6, help="steps per training measurement")
    parser.add_argument("--torch-warmup", type=int, default=2, help="torch steps left out of each measurement")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions of the training sides")
    parser.add_argument("--decode-runs", type=int, default=9)
    parser.add_argument("--bfloat16", action="store_true",
                        help="also time training with bfloat16 products (autocast) on both sides")
    parser.add_argument("--work", help="work folder (default: a temporary one, removed at the end)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--perplexity", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


ARGS = parse_arguments()
if ARGS.child:
    # Before torch and eddy size their thread pools.
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads[0])
sys.path.insert(0, os.path.join(ARGS.build, "python"))

import numpy as np  # noqa: E402

import eddy  # noqa: E402


def example_config(run_dir, steps, short_evaluation=True):
    """The example config with its output in run_dir and `steps` steps; a constant schedule for
    runs too short for the example's warmup, and when short_evaluation one batch at the end."""
    import yaml  # transformers' dependency
    with open(EXAMPLE) as f:
        config = yaml.safe_load(f)
    config["output"] = {"dir": run_dir, "checkpoint_every": 0}
    training = config["training"]
    training["steps"] = steps
    if steps <= training["schedule"]["warmup"]:
        training["schedule"] = {"type": "constant"}
    if short_evaluation:
        training["evaluate_every"], training["evaluation_batches"] = max(steps, 1), 1
    return config


def prepare(work):
    """Once for all thread counts: the tokenizer, the token files and the initial weights (a run of
    0 steps; eddy's initial weights depend only on the model section and the seed), exported as a
    Hugging Face folder; and the trained run for decoding, exported likewise."""
    run_dir = os.path.join(work, "run")
    result = eddy.lm.train(example_config(run_dir, 0))
    assert result["finished"], result["message"]
    eddy.lm.export(run_dir, os.path.join(work, "initial_hf"))
    trained = ARGS.run
    if not os.path.exists(os.path.join(trained, "checkpoint.safetensors")):
        print(f"no trained run at {trained}: training the example there for {ARGS.quality_steps} steps", flush=True)
        started = time.time()
        result = eddy.lm.train(example_config(trained, ARGS.quality_steps, short_evaluation=False))
        assert result["finished"], result["message"]
        print(f"trained in {time.time() - started:.0f} s: {result['message']}", flush=True)
    eddy.lm.export(trained, os.path.join(work, "trained_hf"))
    return {"run": run_dir, "trained": trained, "steps": eddy.lm.load(trained).step}


# ---------------------------------------------------------------------------------------------
# The child: one thread count.

def eddy_training(run_dir, eager, autocast="none"):
    config = example_config(run_dir, ARGS.train_steps)
    config["training"]["autocast"] = autocast
    result = eddy.lm.train(config, eager=eager)
    assert result["finished"], result["message"]
    return result["step_seconds"][1:], result["tokens_per_step"]


class TorchTraining:
    """The eddy lm train step in PyTorch: AdamW with decay on the matrices only, clipping at the
    example's 1.0, the example's batches."""

    def __init__(self, torch, hf_dir, train_tokens, compiled, bfloat16=False):
        from transformers import AutoModelForCausalLM
        self.torch, self.train_tokens, self.bfloat16 = torch, train_tokens, bfloat16
        self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
        self.model.train()
        parameters = list(self.model.parameters())
        self.parameters = parameters
        self.optimizer = torch.optim.AdamW(
            [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": 0.1},
             {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}],
            lr=1.5e-3, betas=(0.9, 0.95))
        self.forward = torch.compile(self.model) if compiled else self.model
        self.stream = 0

    def step(self):
        torch = self.torch
        tokens, targets = eddy.lm.draw_batch(self.train_tokens, 16, 128, 0, self.stream)
        self.stream += 1
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bfloat16):
            logits = self.forward(input_ids=torch.from_numpy(np.asarray(tokens))).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     torch.from_numpy(np.asarray(targets)).reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.parameters, 1.0)
        self.optimizer.step()
        return time.perf_counter() - started

    def measure(self, warmup):
        times = [self.step() for _ in range(ARGS.train_steps)]
        return times[warmup:]


# The matrix products of one training step of the example, as (rows, inner, columns, transposed
# operand): per layer the four linear layers' forward products, their inputs' gradients dY W^T and
# their weights' gradients X^T dY; then the tied output head's three. Attention's products (about
# 3% of the step's multiply-adds, in the fused attention kernel) are left out, so the time of these
# is a lower bound on a step of any framework whose products run at the same speed.
TOKENS, WIDTH, VOCABULARY, LAYERS = 16 * 128, 320, 4096, 6
LINEAR_LAYERS = ((WIDTH, 3 * WIDTH), (WIDTH, WIDTH), (WIDTH, 4 * WIDTH), (4 * WIDTH, WIDTH))


def step_products():
    products = []
    for inner, outer in LINEAR_LAYERS * LAYERS:
        products += [(TOKENS, inner, outer, None), (TOKENS, outer, inner, "right"), (inner, TOKENS, outer, "left")]
    # The head is the token embedding [VOCABULARY, WIDTH]: x E^T, dY E and x^T dY.
    return products + [(TOKENS, WIDTH, VOCABULARY, "right"), (TOKENS, VOCABULARY, WIDTH, None),
                       (WIDTH, TOKENS, VOCABULARY, "left")]


def products_alone_seconds(matmul, make, transpose, repeats=5):
    """The median time of one step's products (step_products), each timed back to back once the
    operands exist; `make(rows, columns)` gives a random float32 matrix of the framework."""
    operands = []
    for rows, inner, columns, transposed in step_products():
        left = transpose(make(inner, rows)) if transposed == "left" else make(rows, inner)
        right = transpose(make(columns, inner)) if transposed == "right" else make(inner, columns)
        operands.append((left, right))
    times = []
    for _ in range(repeats + 1):  # the first warms the allocator and the GEMMs' JIT
        started = time.perf_counter()
        for left, right in operands:
            matmul(left, right)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def decode_eddy(models, prompt):
    """Tokens/s and tokens of each of `models` (name -> model): a warm-up run each (the allocator
    and the first call, as torch's), then --decode-runs rounds in each of which every model decodes
    once, so that a slow stretch of a shared machine falls on all of them alike; medians."""
    times = {name: [] for name in models}
    tokens = {}
    for model in models.values():
        model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0)
    for _ in range(ARGS.decode_runs):
        for name, model in models.items():
            started = time.perf_counter()
            tokens[name] = list(model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0))
            times[name].append(time.perf_counter() - started)
    for name, generated in tokens.items():
        assert len(generated) == NEW_TOKENS, (name, len(generated))
    return {name: NEW_TOKENS / statistics.median(seconds) for name, seconds in times.items()}, tokens


def decode_torch(torch, model, prompt, use_generate):
    ids = torch.tensor([prompt])

    def loop():
        generated, cache, step_input = [], None, ids
        for _ in range(NEW_TOKENS):
            out = model(input_ids=step_input, cache=cache, use_cache=True)
            cache = out.cache
            step_input = out.logits[:, -1].argmax(-1, keepdim=True)
            generated.append(int(step_input))
        return generated

    def generate():
        out = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
        return out[0, len(prompt):].tolist()

    run = generate if use_generate else loop
    times, tokens = [], None
    with torch.inference_mode():
        run()  # allocator and first-call warmup
        for _ in range(ARGS.decode_runs):
            started = time.perf_counter()
            tokens = run()
            times.append(time.perf_counter() - started)
    assert len(tokens) == NEW_TOKENS, len(tokens)
    return NEW_TOKENS / statistics.median(times), tokens


def child(work):
    import torch
    from transformers import AutoModelForCausalLM
    threads = ARGS.threads[0]
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    eddy.set_num_threads(threads)
    with open(os.path.join(work, "prepared.json")) as f:
        prepared = json.load(f)
    out = {"threads": threads, "train": {}, "decode": {}, "perplexity": {}}

    train_tokens = os.path.join(prepared["run"], "data", "train.tokens")
    initial_hf = os.path.join(work, "initial_hf")
    sides = {"eddy compiled": lambda: eddy_training(prepared["run"], eager=False)[0],
             "eddy eager": lambda: eddy_training(prepared["run"], eager=True)[0]}
    torch_runs = []  # kept alive until the training measurements end
    for suffix in ("", " bf16") if ARGS.bfloat16 else ("",):
        eager = TorchTraining(torch, initial_hf, train_tokens, compiled=False, bfloat16=bool(suffix))
        compiled = TorchTraining(torch, initial_hf, train_tokens, compiled=True, bfloat16=bool(suffix))
        started = time.time()
        compiled.step()  # compiles forward and backward
        print(f"[{threads} threads] torch.compile{suffix}: first step {time.time() - started:.0f} s", flush=True)
        sides["torch eager" + suffix] = lambda run=eager: run.measure(ARGS.torch_warmup)
        sides["torch.compile" + suffix] = lambda run=compiled: run.measure(ARGS.torch_warmup)
        torch_runs += [eager, compiled]
    if ARGS.bfloat16:
        sides["eddy compiled bf16"] = lambda: eddy_training(prepared["run"], eager=False, autocast="bfloat16")[0]
    tokens_per_step = 16 * 128
    samples = {name: [] for name in sides}
    for round_index in range(ARGS.rounds):
        for name, measure in sides.items():
            samples[name] += measure()
            print(f"[{threads} threads] round {round_index + 1}: {name} "
                  f"{tokens_per_step / statistics.median(samples[name]):.0f} tok/s", flush=True)
    out["train"] = {name: tokens_per_step / statistics.median(times) for name, times in samples.items()}
    generator = np.random.default_rng(0)
    random_matrix = lambda rows, columns: generator.standard_normal((rows, columns), dtype=np.float32)  # noqa: E731
    out["products alone"] = {
        "eddy": products_alone_seconds(eddy.matmul, lambda r, c: eddy.tensor(random_matrix(r, c)), eddy.transpose),
        "torch": products_alone_seconds(torch.matmul, lambda r, c: torch.from_numpy(random_matrix(r, c)),
                                        lambda m: m.t())}
    del sides, torch_runs

    prompt = [int(t) for t in np.asarray(eddy.lm.draw_batch(
        os.path.join(prepared["run"], "data", "validation.tokens"), 1, PROMPT_TOKENS, 0, 0)[0])[0]]
    trained = eddy.lm.load(prepared["trained"])
    quantized = {}
    for bits in (8, 4):
        quantized[bits] = eddy.lm.load(prepared["trained"])
        quantized[bits].quantize(bits, os.path.join(work, f"int{bits}-{threads}.safetensors"))
    rates, eddy_tokens = decode_eddy({"eddy float32": trained.model, "eddy int8": quantized[8].model,
                                      "eddy int4": quantized[4].model}, prompt)
    out["decode"].update(rates)
    hf_model = AutoModelForCausalLM.from_pretrained(os.path.join(work, "trained_hf"), dtype=torch.float32)
    hf_model.eval()
    for name, use_generate in (("torch model.generate", True), ("torch forward loop", False)):
        out["decode"][name], torch_tokens = decode_torch(torch, hf_model, prompt, use_generate)
        out.setdefault("same_tokens", {})[name] = torch_tokens == eddy_tokens["eddy float32"]
    if ARGS.perplexity:
        for bits, run in quantized.items():
            out["perplexity"][f"int{bits}"] = run.validation_perplexity(prepared["trained"])
        out["perplexity"]["float32"] = trained.validation_perplexity(prepared["trained"])
    with open(os.path.join(work, f"result-{threads}.json"), "w") as f:
        json.dump(out, f)


# ---------------------------------------------------------------------------------------------
# The parent: prepare, one child per thread count, the table.

def print_table(columns, rows):
    """A Markdown table: the header, its rule, and a line per row of formatted cells."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def table(results, prepared):
    import torch
    import transformers
    print(f"\neddy against torch {torch.__version__} (transformers {transformers.__version__}); example model "
          f"(8.75 M parameters), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print("\nTraining, tokens/s (median step; batch 16 x context 128)\n")
    print_table(["threads", "eddy compiled", "eddy eager", "torch eager", "torch.compile", "eddy / torch eager",
                 "eddy / torch.compile"],
                [[str(r["threads"]), f"{t['eddy compiled']:.0f}", f"{t['eddy eager']:.0f}", f"{t['torch eager']:.0f}",
                  f"{t['torch.compile']:.0f}", f"{t['eddy compiled'] / t['torch eager']:.2f}",
                  f"{t['eddy compiled'] / t['torch.compile']:.2f}"] for r in results for t in [r["train"]]])
    print("\nThe float32 products of one step alone (step_products: the linear layers' and the head's, forward "
          "and backward, in eddy.matmul and torch.matmul), against the steps; the last column is the most eddy / "
          "torch eager could reach if nothing but its products took time\n")
    print_table(["threads", "eddy products, ms", "torch products, ms", "eddy step, ms", "torch eager step, ms",
                 "1.5x torch eager, ms", "torch eager step / eddy products"],
                [[str(r["threads"]), f"{1e3 * p['eddy']:.0f}", f"{1e3 * p['torch']:.0f}",
                  f"{1e3 * tokens / t['eddy compiled']:.0f}", f"{1e3 * tokens / t['torch eager']:.0f}",
                  f"{1e3 * tokens / t['torch eager'] / 1.5:.0f}", f"{tokens / t['torch eager'] / p['eddy']:.2f}"]
                 for r in results for t, p, tokens in [(r["train"], r["products alone"], TOKENS)]])
    if "eddy compiled bf16" in results[0]["train"]:
        print("\nTraining with bfloat16 products (eddy: training.autocast; torch: torch.autocast on the CPU), "
              "tokens/s\n")
        print_table(["threads", "eddy compiled", "torch eager", "torch.compile", "eddy / torch eager",
                     "eddy / torch.compile", "eddy bf16 / eddy float32"],
                    [[str(r["threads"]), f"{bf16:.0f}", f"{t['torch eager bf16']:.0f}",
                      f"{t['torch.compile bf16']:.0f}", f"{bf16 / t['torch eager bf16']:.2f}",
                      f"{bf16 / t['torch.compile bf16']:.2f}",
                      f"{bf16 / t['eddy compiled']:.2f}"]
                     for r in results for t in [r["train"]] for bf16 in [t["eddy compiled bf16"]]])
    print(f"\nDecode with the KV cache, tokens/s (greedy, {PROMPT_TOKENS}-token prompt, {NEW_TOKENS} new tokens; "
          f"weights of {prepared['trained']} at step {prepared['steps']})\n")
    print_table(["threads", "eddy float32", "torch model.generate", "torch forward loop", "eddy / generate",
                 "eddy / loop", "eddy int8", "int8 / float32", "eddy int4", "int4 / float32", "same tokens as torch"],
                [[str(r["threads"]), f"{f32:.0f}", f"{d['torch model.generate']:.0f}",
                  f"{d['torch forward loop']:.0f}", f"{f32 / d['torch model.generate']:.2f}",
                  f"{f32 / d['torch forward loop']:.2f}", f"{d['eddy int8']:.0f}", f"{d['eddy int8'] / f32:.2f}",
                  f"{d['eddy int4']:.0f}", f"{d['eddy int4'] / f32:.2f}",
                  "yes" if all(r["same_tokens"].values()) else "NO"]
                 for r in results for d in [r["decode"]] for f32 in [d["eddy float32"]]])
    p = results[0]["perplexity"]
    print(f"\nValidation perplexity: float32 {p['float32']:.3f}, int8 {p['int8']:.3f} "
          f"({100 * (p['int8'] / p['float32'] - 1):+.2f}%), int4 {p['int4']:.3f} "
          f"({100 * (p['int4'] / p['float32'] - 1):+.2f}%)")


def main():
    work = ARGS.work or tempfile.mkdtemp(prefix="eddy_lm_speed_")
    os.makedirs(work, exist_ok=True)
    if ARGS.child:
        child(work)
        return 0
    try:
        started = time.time()
        prepared = prepare(work)
        with open(os.path.join(work, "prepared.json"), "w") as f:
            json.dump(prepared, f)
        print(f"prepared in {time.time() - started:.0f} s (work folder {work})", flush=True)
        results = []
        for threads in ARGS.threads:
            command = [sys.executable, os.path.abspath(__file__), "--child", "--work", work, "--build", ARGS.build,
                       "--threads", str(threads), "--train-steps", str(ARGS.train_steps),
                       "--torch-warmup", str(ARGS.torch_warmup), "--rounds", str(ARGS.rounds),
                       "--decode-runs", str(ARGS.decode_runs)] + (["--perplexity"] if not results else []) + \
                (["--bfloat16"] if ARGS.bfloat16 else [])
            subprocess.run(command, check=True)
            with open(os.path.join(work, f"result-{threads}.json")) as f:
                results.append(json.load(f))
        table(results, prepared)
    finally:
        if not ARGS.work:
            import shutil
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
