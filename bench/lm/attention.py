"""Causal attention, forward and backward, eddy against PyTorch in one run, at 1 and 2 threads.

Issue #22 asks for a fused attention primitive (blocked, online softmax, no T x T matrix kept)
where a benchmark shows it pays. This is that benchmark. It times one training use of attention,
o = attention(q, k, v) and the gradients of sum(o * o) with respect to q, k and v, for
q, k, v [batch, heads, T, head_dim] in float32 at several context lengths T:

* eddy fused: `eddy.nn.causal_attention`, eddy's attention as every model uses it, on the CPU
  the fused primitive (nn/attention.cpp, backends/cpu/attention.cpp: 64 x 64 tiles, the softmax
  online, forward and backward), eager;
* eddy composed: `eddy.nn.composed_causal_attention`, the same attention composed of primitives
  (two batched matrix products and a masked softmax), the T x T weights stored;
* torch SDPA: `torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)`, which on
  the CPU runs PyTorch's fused flash-attention kernels (blocked, online softmax, the T x T matrix
  never stored, forward and backward);
* torch composed: the same formula as eddy's in torch ops (matmul, masked softmax, matmul).

Best of --repeats after a warm-up, the sides interleaved per T. Each thread count runs in its own
process, since both libraries size their thread pools when they load.

    .venv-bench/bin/python bench/lm/attention.py [--threads 1 2] [--build build]
"""

import argparse
import math
import os
import subprocess
import sys
import time


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build", help="build tree whose python/ holds eddy")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=5)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


ARGS = parse_arguments()
if ARGS.child:
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads[0])


def best_seconds(step):
    step()
    best = math.inf
    for _ in range(ARGS.repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def measure(threads):
    sys.path.insert(0, os.path.join(ARGS.build, "python"))
    import eddy
    import torch

    torch.set_num_threads(threads)
    shape = [ARGS.batch, ARGS.heads, 0, ARGS.head_dim]

    def eddy_step(attention, q, k, v):
        o = attention(q, k, v)
        return eddy.gradients((o * o).sum(), [q, k, v])

    def torch_step(attention, q, k, v):
        o = attention(q, k, v)
        return torch.autograd.grad((o * o).sum(), [q, k, v])

    def sdpa(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def composed(q, k, v):
        t = q.shape[-2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        hidden = torch.ones(t, t, dtype=torch.bool).triu(1)
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1) @ v

    for length in ARGS.lengths:
        shape[2] = length
        inputs = [torch.randn(*shape) for _ in range(3)]
        mine = [eddy.from_numpy(x.numpy()).requires_grad_() for x in inputs]
        theirs = [x.clone().requires_grad_() for x in inputs]
        # The same attention in both: eddy's gradients against SDPA's, before timing.
        expected = torch_step(sdpa, *theirs)
        got = eddy_step(eddy.nn.causal_attention, *mine)
        error = max(float((torch.from_numpy(g.numpy()) - e).abs().max() / e.abs().max())
                    for g, e in zip(got, expected))
        assert error < 1e-4, f"T={length}: eddy's gradients differ from SDPA's by {error:.1e}"
        seconds = {
            "eddy fused": best_seconds(lambda: eddy_step(eddy.nn.causal_attention, *mine)),
            "eddy composed": best_seconds(lambda: eddy_step(eddy.nn.composed_causal_attention, *mine)),
            "torch SDPA": best_seconds(lambda: torch_step(sdpa, *theirs)),
            "torch composed": best_seconds(lambda: torch_step(composed, *theirs)),
        }
        kept = 4 * ARGS.batch * ARGS.heads * length * length / 2**20
        print(f"| {threads} | {length} | " + " | ".join(f"{seconds[k] * 1e3:.1f}" for k in seconds) +
              f" | {seconds['eddy composed'] / seconds['eddy fused']:.2f}"
              f" | {seconds['torch SDPA'] / seconds['eddy fused']:.2f}"
              f" | {seconds['torch composed'] / seconds['eddy fused']:.2f}"
              f" | {kept:.0f} |", flush=True)


def main():
    if ARGS.child:
        measure(ARGS.threads[0])
        return 0
    print(f"batch {ARGS.batch}, {ARGS.heads} heads, head_dim {ARGS.head_dim}, float32; "
          "ms for attention forward + backward (best of "
          f"{ARGS.repeats}); ratios > 1: eddy fused faster; MiB: one T x T float32 matrix of the batch")
    print("| threads | T | eddy fused | eddy composed | torch SDPA | torch composed | eddy composed / fused "
          "| SDPA / eddy fused | torch composed / eddy fused | T x T MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    status = 0
    for threads in ARGS.threads:
        command = [sys.executable, __file__, "--child", "--threads", str(threads), "--build", ARGS.build,
                   "--batch", str(ARGS.batch), "--heads", str(ARGS.heads), "--head-dim", str(ARGS.head_dim),
                   "--repeats", str(ARGS.repeats), "--lengths", *map(str, ARGS.lengths)]
        status |= subprocess.call(command)
    return status


if __name__ == "__main__":
    sys.exit(main())
