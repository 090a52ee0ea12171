"""What every implementation of the side-by-side benchmarks shares: the workloads, the one input
file they all load, and the timing protocol.

Each workload is run by `run.py` in a fresh process per (implementation, workload, threads), so
peak RSS is that of one workload. The process prints one JSON line (see `report`).
"""

import argparse
import json
import math
import resource
import statistics
import sys
import time

import numpy as np

WORKLOADS = ("burgers", "laplacian-fwd", "laplacian-grad", "kovasznay", "fno")

ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
BURGERS_NU = 0.01 / math.pi
KOVASZNAY_RE = 40.0
FNO = dict(batch=16, grid=64, width=32, modes=12, layers=4, projection=128)

# Layer widths of the MLPs: inputs, hidden layers, outputs.
MLPS = {
    "burgers": [2] + [20] * 8 + [1],
    "laplacian": [3] + [64] * 4 + [1],
    "kovasznay": [2] + [50] * 4 + [3],
}

# What each workload reports as its two check values, compared across implementations before
# anything is timed.
CHECKS = {
    "burgers": ("loss at step 1", "loss at step 2 (after one Adam step)"),
    "laplacian-fwd": ("mean(lap u ^2) + mean(u^2)", "mean(lap u)"),
    "laplacian-grad": ("mean(lap u ^2) + mean(u^2)", "squared norm of the weight gradient"),
    "kovasznay": ("loss at step 1", "loss at step 2 (after one Adam step)"),
    "fno": ("loss at step 1", "loss at step 2 (after one Adam step)"),
}


def burgers_step_flops():
    """Floating-point operations of the matrix products in the least a Burgers step must compute.

    Taylor mode carries the value and three coefficients (u_x, u_t, u_xx) through the network in
    one pass: each hidden and output layer multiplies four [N, in] matrices by its weight. The
    input layer's coefficients are rows of the weight itself (the input's own derivatives are
    unit vectors), so only its value is a product. The boundary points need the value alone.
    The backward pass costs each product twice more (weight gradient, input gradient), except
    the input gradient of the first layer, which nothing needs. Elementwise work is not counted,
    so the limit this gives is a lower bound on the step's time.
    """
    widths = MLPS["burgers"]
    interior, boundary = 10000, 200
    layers = list(zip(widths[:-1], widths[1:]))
    forward = 2 * interior * layers[0][0] * layers[0][1]
    forward += sum(4 * 2 * interior * a * b for a, b in layers[1:])
    forward += sum(2 * boundary * a * b for a, b in layers)
    first_input_gradient = 2 * (interior + boundary) * layers[0][0] * layers[0][1]
    return 3 * forward - first_input_gradient


# GEMM FLOPs per training step, for the workloads whose count is written out above.
STEP_FLOPS = {"burgers": burgers_step_flops}


def kovasznay_lambda():
    nu = 1.0 / KOVASZNAY_RE
    return 1.0 / (2.0 * nu) - math.sqrt(1.0 / (4.0 * nu * nu) + 4.0 * math.pi ** 2)


def make_inputs(dtype="float32"):
    """Every weight and point of every workload, in `dtype` (float32 or float64), from one seeded
    generator. The implementations compute in the dtype of the file they are given."""
    rng = np.random.default_rng(20261129)
    real = np.dtype(dtype).type
    out = {}

    def mlp(prefix, widths):
        for l, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            out[f"{prefix}.w{l}"] = (rng.standard_normal((a, b)) * math.sqrt(2.0 / (a + b))).astype(real)
            out[f"{prefix}.b{l}"] = (0.1 * rng.standard_normal(b)).astype(real)

    for name, widths in MLPS.items():
        mlp(name, widths)

    # Burgers on x in [-1, 1], t in [0, 1]: u(x, 0) = -sin(pi x), u(+-1, t) = 0.
    n = 10000
    out["burgers.x"] = rng.uniform(-1, 1, (n, 1)).astype(real)
    out["burgers.t"] = rng.uniform(0, 1, (n, 1)).astype(real)
    x0 = rng.uniform(-1, 1, (100, 1))
    xb = np.where(rng.uniform(size=(100, 1)) < 0.5, -1.0, 1.0)
    out["burgers.bx"] = np.concatenate([x0, xb]).astype(real)
    out["burgers.bt"] = np.concatenate([np.zeros((100, 1)), rng.uniform(0, 1, (100, 1))]).astype(real)
    out["burgers.bu"] = np.concatenate([-np.sin(np.pi * x0), np.zeros((100, 1))]).astype(real)

    out["laplacian.x"] = rng.uniform(-1, 1, (n, 1)).astype(real)
    out["laplacian.y"] = rng.uniform(-1, 1, (n, 1)).astype(real)
    out["laplacian.z"] = rng.uniform(-1, 1, (n, 1)).astype(real)

    # Kovasznay flow on [-0.5, 1] x [-0.5, 1.5]; the exact (u, v) on the boundary.
    out["kovasznay.x"] = rng.uniform(-0.5, 1.0, (n, 1)).astype(real)
    out["kovasznay.y"] = rng.uniform(-0.5, 1.5, (n, 1)).astype(real)
    s = rng.uniform(size=(100, 1))
    bx = np.concatenate([np.full_like(s, -0.5), np.full_like(s, 1.0), -0.5 + 1.5 * s, -0.5 + 1.5 * s])
    by = np.concatenate([-0.5 + 2.0 * s, -0.5 + 2.0 * s, np.full_like(s, -0.5), np.full_like(s, 1.5)])
    lam = kovasznay_lambda()
    out["kovasznay.bx"] = bx.astype(real)
    out["kovasznay.by"] = by.astype(real)
    out["kovasznay.bu"] = (1 - np.exp(lam * bx) * np.cos(2 * np.pi * by)).astype(real)
    out["kovasznay.bv"] = (lam / (2 * np.pi) * np.exp(lam * bx) * np.sin(2 * np.pi * by)).astype(real)

    # FNO-2D with eddy's nn::Fno layout (grid coordinates appended, so 3 lifted channels); the
    # spectral weights are [in, out, 2 modes (positive, then negative frequencies), modes, 2].
    c = FNO
    w, m, g, p = c["width"], c["modes"], c["grid"], c["projection"]

    def pointwise(name, i, o):
        out[f"fno.{name}.weight"] = rng.uniform(-1, 1, (o, i)).astype(real) * real(math.sqrt(6.0 / (i + o)))
        out[f"fno.{name}.bias"] = (0.1 * rng.standard_normal((o, 1))).astype(real)

    pointwise("lift", 3, w)
    for l in range(c["layers"]):
        out[f"fno.spectral{l}.weight"] = (rng.standard_normal((w, w, 2 * m, m, 2)) * math.sqrt(1.0 / (2 * w))).astype(real)
        pointwise(f"skip{l}", w, w)
    pointwise("project_hidden", w, p)
    pointwise("project_out", p, 1)
    grid = np.linspace(0, 2 * np.pi, g, endpoint=False)
    phase = rng.uniform(0, 2 * np.pi, (c["batch"], 1, 1, 1))
    a = np.sin(grid[None, None, :, None] + phase) * np.cos(2 * grid[None, None, None, :])
    out["fno.a"] = (a + 0.1 * rng.standard_normal(a.shape)).astype(real)
    out["fno.y"] = (np.cos(a) * 0.5).astype(real)
    return out


def load_inputs(path):
    from safetensors.numpy import load_file
    return load_file(path)


def dtype_of(inputs):
    """The floating-point dtype of a workload file's arrays ("float32" or "float64")."""
    return str(next(iter(inputs.values())).dtype)


def mlp_params(inputs, prefix):
    """[(W, b), ...] as NumPy arrays, W of shape [in, out] (the layer is x @ W + b)."""
    layers = len(MLPS[prefix]) - 1
    return [(inputs[f"{prefix}.w{l}"], inputs[f"{prefix}.b{l}"]) for l in range(layers)]


def arguments(extra=None, devices=("cpu",)):
    """The implementations' shared arguments; `devices` are those the implementation runs on."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=devices, default="cpu")
    parser.add_argument("--data", required=True)
    parser.add_argument("--workload", required=True, choices=WORKLOADS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=3.0, help="seconds of timed steps (at least 5 steps)")
    parser.add_argument("--expect", type=float, nargs=2, help="the reference's two check values")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--check-only", action="store_true", help="print the check values and stop")
    if extra:
        extra(parser)
    return parser.parse_args()


def verify(impl, args, checks):
    """Stops before any timing when the check values differ from the reference's."""
    if args.check_only:
        report(impl, args, checks, 0.0, 0)
        sys.exit(0)
    if args.expect is None:
        return
    for name, got, want in zip(CHECKS[args.workload], checks, args.expect):
        if not abs(got - want) <= args.rtol * abs(want):
            sys.exit(f"{impl} {args.workload}: {name} is {got:.9g}, the reference has {want:.9g} "
                     f"(relative difference {abs(got - want) / abs(want):.2e} > {args.rtol:g})")


def time_steps(step, min_time, warmup=2, min_steps=5):
    """Median seconds per call of `step` (which must block until its result is ready)."""
    for _ in range(warmup):
        step()
    times = []
    start = time.perf_counter()
    while len(times) < min_steps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if len(times) >= 1000:
            break
    return statistics.median(times), len(times)


def report(impl, args, checks, median_s, steps, note="", rusage_of=resource.RUSAGE_SELF):
    """Prints the result line; peak RSS is this process's, or its largest child's with RUSAGE_CHILDREN."""
    rss_kib = resource.getrusage(rusage_of).ru_maxrss
    print(json.dumps(dict(impl=impl, workload=args.workload, threads=args.threads, checks=[float(c) for c in checks],
                          median_s=median_s, steps=steps, peak_rss_mib=rss_kib / 1024.0, note=note)))
    sys.stdout.flush()
