"""PyTorch eager on the cases bench/gpu/eager_ops.cpp times with eddy, on the same GPU; prints the
same lines (case name, median seconds of one call)."""

import statistics
import time

import torch

gpu = torch.device("cuda")


def median_seconds(call, repeats):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name, seconds):
    print(f"{name} {seconds:.6e}", flush=True)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False  # eddy multiplies float32 in float32
    for dtype, n, name in ((torch.float32, 8192, "gemm_f32_8192"), (torch.float64, 4096, "gemm_f64_4096")):
        a = torch.randn(n, n, dtype=dtype, device=gpu)
        b = torch.randn(n, n, dtype=dtype, device=gpu)
        report(name, median_seconds(lambda: a @ b, 10))
    big = torch.randn(1 << 24, device=gpu)
    report("tanh_f32_16M", median_seconds(lambda: torch.tanh(big), 20))
    report("sum_f32_16M", median_seconds(lambda: big.sum(), 20))
    rows = torch.randn(1 << 14, 1024, device=gpu)
    report("sum_rows_f32_16Kx1K", median_seconds(lambda: rows.sum(1), 20))
    widths = [2, 64, 64, 64, 64, 1]
    weights = [torch.randn(widths[i], widths[i + 1], device=gpu, requires_grad=True) for i in range(len(widths) - 1)]
    x = torch.randn(10000, 2, device=gpu)

    def mlp_step():
        h = x
        for w in weights[:-1]:
            h = torch.tanh(h @ w)
        loss = ((h @ weights[-1]) ** 2).mean()
        torch.autograd.grad(loss, weights)

    report("mlp_step_f32_10000x64x4", median_seconds(mlp_step, 20))


if __name__ == "__main__":
    main()
