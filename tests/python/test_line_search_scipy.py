"""eddy's strong-Wolfe line search (the one L-BFGS uses) beside SciPy's two.

The six one-dimensional functions of Moré and Thuente, "Line search algorithms with guaranteed
sufficient decrease", ACM TOMS 20(3), 1994, each from their first trials 1e-3, 1e-1, 1e1 and 1e3,
with their c2 and c1 = 1e-4 (SciPy refuses their c1 = c2). The peers are scipy.optimize.line_search
(Nocedal and Wright's algorithms 3.5 and 3.6, as eddy's) and SciPy's port of MINPACK-2's dcsrch,
Moré and Thuente's own algorithm. tests/optim/test_line_search.cpp runs the same functions in C++.
"""

import math

import numpy as np
import pytest
from scipy.optimize import line_search
from scipy.optimize._linesearch import scalar_search_wolfe1

import eddy


def _yanai(b1, b2):
    g1, g2 = math.sqrt(1 + b1 * b1) - b1, math.sqrt(1 + b2 * b2) - b2
    return (lambda t: g1 * math.sqrt((1 - t) ** 2 + b2 * b2) + g2 * math.sqrt(t * t + b1 * b1),
            lambda t: g1 * (t - 1) / math.sqrt((1 - t) ** 2 + b2 * b2) + g2 * t / math.sqrt(t * t + b1 * b1))


def _wiggly(beta=0.01, l=39):
    def base(t):
        if t <= 1 - beta:
            return 1 - t
        if t >= 1 + beta:
            return t - 1
        return (t - 1) ** 2 / (2 * beta) + beta / 2

    def base_slope(t):
        if t <= 1 - beta:
            return -1.0
        if t >= 1 + beta:
            return 1.0
        return (t - 1) / beta

    return (lambda t: base(t) + 2 * (1 - beta) / (l * math.pi) * math.sin(l * math.pi * t / 2),
            lambda t: base_slope(t) + (1 - beta) * math.cos(l * math.pi * t / 2))


# name: (phi, phi', c2)
FUNCTIONS = {
    "1": (lambda t: -t / (t * t + 2), lambda t: (t * t - 2) / (t * t + 2) ** 2, 0.1),
    "2": (lambda t: (t + 0.004) ** 5 - 2 * (t + 0.004) ** 4, lambda t: 5 * (t + 0.004) ** 4 - 8 * (t + 0.004) ** 3, 0.1),
    "3": (*_wiggly(), 0.1),
    "4": (*_yanai(1e-3, 1e-3), 1e-3),
    "5": (*_yanai(1e-2, 1e-3), 1e-3),
    "6": (*_yanai(1e-3, 1e-2), 1e-3),
}
FIRST_TRIALS = (1e-3, 1e-1, 1e1, 1e3)
CASES = [(name, t0) for name in FUNCTIONS for t0 in FIRST_TRIALS]
C1 = 1e-4


def _is_wolfe(name, t):
    phi, slope, c2 = FUNCTIONS[name]
    return phi(t) <= phi(0) + C1 * t * slope(0) and abs(slope(t)) <= c2 * abs(slope(0))


def _eddy(name, t0):
    phi, slope, c2 = FUNCTIONS[name]
    calls = []

    def point(t):
        calls.append(t)
        return phi(t), slope(t)

    result = eddy.optim.strong_wolfe(point, t0, C1, c2, 50)
    assert result["evaluations"] == len(calls) - 1  # phi(0) is the start, not a trial
    return result


def _scipy_nocedal_wright(name, t0):
    """(t or None, trials): the search direction t0 makes SciPy's first trial (step 1) t = t0."""
    phi, slope, c2 = FUNCTIONS[name]
    alpha, trials, *_ = line_search(lambda x: phi(x[0]), lambda x: np.array([slope(x[0])]), np.array([0.0]),
                                    np.array([t0]), c1=C1, c2=c2, maxiter=50)
    return (None if alpha is None else alpha * t0), trials


def _scipy_more_thuente(name, t0):
    phi, slope, c2 = FUNCTIONS[name]
    trials = []
    alpha, _, _ = scalar_search_wolfe1(lambda s: trials.append(s) or phi(s * t0), lambda s: t0 * slope(s * t0),
                                       phi0=phi(0), derphi0=t0 * slope(0), c1=C1, c2=c2, amax=1e10, amin=1e-12)
    return (None if alpha is None else alpha * t0), len(trials)


@pytest.mark.parametrize("name,t0", CASES)
def test_every_search_ends_at_a_strong_wolfe_point(name, t0):
    result = _eddy(name, t0)
    assert result["status"] == "wolfe"
    assert _is_wolfe(name, result["t"]), result


@pytest.mark.filterwarnings("ignore:The line search algorithm did not converge")
def test_solves_every_case_scipy_solves_in_fewer_trials():
    solved_by_scipy = 0
    eddy_trials = scipy_trials = 0
    for name, t0 in CASES:
        t, trials = _scipy_nocedal_wright(name, t0)
        if t is None:
            continue
        assert _is_wolfe(name, t), (name, t0, t)
        solved_by_scipy += 1
        scipy_trials += trials
        eddy_trials += _eddy(name, t0)["evaluations"]
    # Measured with SciPy 1.17: it fails 5 of the 24 and takes 181 trials on the rest, eddy 121.
    assert solved_by_scipy >= 12
    assert eddy_trials <= scipy_trials


def test_takes_about_as_many_trials_as_more_and_thuentes_own_search():
    eddy_trials = more_thuente_trials = 0
    for name, t0 in CASES:
        t, trials = _scipy_more_thuente(name, t0)
        assert t is not None and _is_wolfe(name, t), (name, t0, t)
        more_thuente_trials += trials
        eddy_trials += _eddy(name, t0)["evaluations"]
    # Measured: 168 for eddy, 178 for dcsrch over the 24 searches.
    assert eddy_trials <= 1.1 * more_thuente_trials


def test_bad_arguments_are_named():
    phi, slope, _ = FUNCTIONS["1"]
    with pytest.raises(eddy.Error, match="first trial step must be positive, got -1"):
        eddy.optim.strong_wolfe(lambda t: (phi(t), slope(t)), -1.0)
    with pytest.raises(eddy.Error, match="c1 and c2 must lie in"):
        eddy.optim.strong_wolfe(lambda t: (phi(t), slope(t)), 1.0, c1=0.0)
    with pytest.raises(eddy.Error, match="must be finite and descend"):
        eddy.optim.strong_wolfe(lambda t: (-phi(t), -slope(t)), 1.0)
