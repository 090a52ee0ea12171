"""Writes data/burgers_observations.h5: 2,000 noisy observations of Burgers' reference solution,
for the inverse problem in examples/pinn/burgers_inverse.yaml (recover nu from data).

    .venv/bin/python scripts/make_burgers_observations.py

Points are drawn without replacement from the reference grid of data/burgers1d.h5 with a fixed
seed; the noise is Gaussian with a standard deviation of 1% of the solution's standard deviation.
"""

import pathlib

import h5py
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
COUNT, NOISE, SEED = 2000, 0.01, 0

with h5py.File(ROOT / "data" / "burgers1d.h5", "r") as reference:
    x, t, u = reference["x"][:].ravel(), reference["t"][:].ravel(), reference["u"][:]  # u[t, x]

rng = np.random.default_rng(SEED)
flat = rng.choice(u.size, size=COUNT, replace=False)
ti, xi = np.unravel_index(flat, u.shape)
values = u[ti, xi] + NOISE * u.std() * rng.standard_normal(COUNT)

with h5py.File(ROOT / "data" / "burgers_observations.h5", "w") as out:
    out["points"] = np.stack([x[xi], t[ti]], axis=1)  # columns x, t
    out["u"] = values
    out.attrs["noise_relative_to_std"] = NOISE
    out.attrs["seed"] = SEED
    out.attrs["source"] = "data/burgers1d.h5 (Raissi et al. 2019)"
