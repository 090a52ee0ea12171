"""Writes data/antiderivative.h5: the antiderivative operator G(u)(y) = integral_0^y u(s) ds, the
first example of DeepONet (Lu et al., Nature Machine Intelligence 2021; DeepXDE's
"antiderivative_aligned" set is built the same way), for examples/operator/antiderivative_deeponet.yaml.

    .venv/bin/python scripts/make_antiderivative_data.py

Inputs u are draws of a zero-mean Gaussian process on [0, 1] with the squared-exponential kernel
of length scale 0.2, sampled on a fine grid of 1,001 points; the antiderivative is the cumulative
trapezoid rule on that grid. Both are kept at 100 evenly spaced points (sensors = output points).
"""

import pathlib

import h5py
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
FINE, POINTS, LENGTH_SCALE, SEED = 1001, 100, 0.2, 0
SPLITS = {"train": 1000, "test": 200}

fine = np.linspace(0.0, 1.0, FINE)
kernel = np.exp(-0.5 * (fine[:, None] - fine[None, :]) ** 2 / LENGTH_SCALE**2)
factor = np.linalg.cholesky(kernel + 1e-10 * np.eye(FINE))
keep = np.round(np.linspace(0, FINE - 1, POINTS)).astype(int)
rng = np.random.default_rng(SEED)

with h5py.File(ROOT / "data" / "antiderivative.h5", "w") as out:
    for split, count in SPLITS.items():
        u = (factor @ rng.standard_normal((FINE, count))).T
        dx = fine[1] - fine[0]
        g = np.concatenate([np.zeros((count, 1)), np.cumsum(0.5 * dx * (u[:, 1:] + u[:, :-1]), axis=1)], axis=1)
        out[f"{split}/u"] = u[:, keep]
        out[f"{split}/G"] = g[:, keep]
    out["y"] = fine[keep]
    out.attrs["length_scale"] = LENGTH_SCALE
    out.attrs["seed"] = SEED
