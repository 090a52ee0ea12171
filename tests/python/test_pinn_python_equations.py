"""PINN problems defined from Python: a dict instead of a YAML file, and equations written as
Python functions of (x, u, parameters) that differentiate through eddy.gradients."""

import math
import pathlib
import re

import pytest

import eddy

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"


def burgers_problem(output_dir, equation="burgers"):
    return {
        "dtype": "float64",
        "geometry": {"space": {"type": "interval", "min": -1, "max": 1}, "time": {"min": 0, "max": 0.99}},
        "fields": ["u"],
        "parameters": {"nu": 0.0031830988618379067},
        "conditions": {
            "pde": {"type": "interior", "equation": equation, "points": 300},
            "initial": {"type": "initial", "field": "u", "value": "-sin(pi*x)", "points": 50},
            "walls": {"type": "dirichlet", "on": "x == -1 || x == 1", "field": "u", "value": 0, "points": 50},
        },
        "model": {"width": 10, "depth": 2},
        "training": {"adam": {"steps": 20, "learning_rate": 3e-3}},
        "validation": {"reference": {"file": str(DATA / "burgers1d.h5"), "coordinates": {"x": "x", "t": "t"},
                                     "layout": ["t", "x"], "fields": {"u": "u"}}},
        "output": {"dir": str(output_dir), "vtk": False, "grid": [16, 8]},
    }


def burgers(x, u, p):
    du = eddy.gradients(u, x, eddy.ones_like(u), create_graph=True)  # columns: u_x, u_t
    u_x, u_t = du[:, 0:1], du[:, 1:2]
    u_xx = eddy.gradients(u_x, x, eddy.ones_like(u_x), create_graph=True)[:, 0:1]
    return u_t + u * u_x - p["nu"] * u_xx


def test_python_equation_trains_exactly_like_the_same_equation_as_text(tmp_path):
    with_function = eddy.solve(burgers_problem(tmp_path / "function"), equations={"burgers": burgers})
    as_text = burgers_problem(tmp_path / "text")
    as_text["equations"] = {"burgers": "u_t + u*u_x - nu*u_xx"}
    with_text = eddy.solve(as_text)
    assert with_function["finished"] and with_text["finished"]
    assert with_function["loss"] == pytest.approx(with_text["loss"], rel=1e-9)
    assert with_function["metrics"]["u"]["relative_l2"] == pytest.approx(with_text["metrics"]["u"]["relative_l2"],
                                                                        rel=1e-9)


def test_python_equation_errors_name_the_condition(tmp_path):
    problem = burgers_problem(tmp_path / "bad")
    with pytest.raises(eddy.Error, match="conditions.pde: the supplied equation returned shape"):
        eddy.solve(problem, equations={"burgers": lambda x, u, p: eddy.sum(u)})
    with pytest.raises(ZeroDivisionError):
        eddy.solve(problem, equations={"burgers": lambda x, u, p: 1 / 0})
    both = burgers_problem(tmp_path / "both")
    both["equations"] = {"burgers": "u_t"}
    with pytest.raises(eddy.Error, match="also supplied as a function"):
        eddy.solve(both, equations={"burgers": burgers})
    boundary = burgers_problem(tmp_path / "boundary")
    boundary["conditions"]["walls"] = {"type": "boundary", "on": "x == -1 || x == 1", "equation": "burgers",
                                       "points": 10}
    with pytest.raises(eddy.Error, match="interior, initial and points conditions only"):
        eddy.solve(boundary, equations={"burgers": burgers})
    # An equation name that is neither text nor a function is an expression error, as in YAML.
    with pytest.raises(eddy.Error, match="python-dict"):
        eddy.solve(burgers_problem(tmp_path / "missing"))
    # A function no condition names was left out of training without a word.
    with pytest.raises(eddy.Error, match="the equation 'nosuch' is supplied as a function, but no condition's "
                                         "`equation` names it"):
        eddy.solve(burgers_problem(tmp_path / "unused"), equations={"burgers": burgers, "nosuch": burgers})


def test_the_compiled_step_calls_the_equation_when_tracing_and_matches_the_eager_step(tmp_path):
    calls = []

    def counted(x, u, p):
        calls.append(1)
        return burgers(x, u, p)

    compiled = eddy.solve(burgers_problem(tmp_path / "compiled"), equations={"burgers": counted})
    traced_calls = len(calls)
    eager = eddy.solve(burgers_problem(tmp_path / "eager"), equations={"burgers": counted}, eager=True)
    assert compiled["finished"] and eager["finished"]
    assert traced_calls == 2  # the trace, then the final loss (evaluated eagerly)
    assert len(calls) - traced_calls == 21  # each of the 20 Adam steps, then the final loss
    assert compiled["loss"] == pytest.approx(eager["loss"], rel=1e-9)


def test_an_equation_that_reads_values_on_the_host_runs_eagerly_and_says_why(tmp_path, capfd):
    def checked(x, u, p):
        assert math.isfinite(eddy.sum(u).item())
        return burgers(x, u, p)

    fallback = eddy.solve(burgers_problem(tmp_path / "fallback"), equations={"burgers": checked}, progress=True)
    progress = capfd.readouterr().err
    assert re.search(r"training step runs eagerly: .*compile: the traced function reads the elements", progress)
    eager = eddy.solve(burgers_problem(tmp_path / "eager"), equations={"burgers": burgers}, eager=True)
    assert fallback["loss"] == eager["loss"]


def test_a_run_trained_with_a_python_equation_evaluates_and_exports(tmp_path):
    # evaluate_run, `eddy eval` and `eddy export` read the run's config.yaml, whose equation names
    # the function: "unknown symbol 'burgers'" stopped all three.
    result = eddy.solve(burgers_problem(tmp_path / "run"), equations={"burgers": burgers})
    metrics = eddy.evaluate_run(str(tmp_path / "run"))
    assert metrics["u"]["relative_l2"] == pytest.approx(result["metrics"]["u"]["relative_l2"], rel=1e-9)


def test_solving_inside_no_grad_or_autocast_trains_as_outside(tmp_path):
    # Inside no_grad no Adam step had a gradient, and the run still said it had finished; an
    # ambient autocast changed the results without the run folder recording it.
    problem = burgers_problem(tmp_path / "plain")
    problem["dtype"] = "float32"
    plain = eddy.solve(problem, equations={"burgers": burgers})
    problem["output"]["dir"] = str(tmp_path / "no_grad")
    with eddy.no_grad():
        quiet = eddy.solve(problem, equations={"burgers": burgers})
    problem["output"]["dir"] = str(tmp_path / "autocast")
    with eddy.autocast("bfloat16"):
        cast = eddy.solve(problem, equations={"burgers": burgers})
    assert quiet["loss"] == plain["loss"] and cast["loss"] == plain["loss"]


def test_override_strings_are_taken_as_strings(tmp_path):
    # "run #2" was cut at the YAML comment, so the run went to the folder of run 1.
    problem = burgers_problem(tmp_path / "unused")
    problem["training"]["adam"]["steps"] = 1
    result = eddy.solve(problem, {"output.dir": str(tmp_path / "run #2"), "description": "trial #2: a: b"},
                        equations={"burgers": burgers})
    assert result["output_dir"] == str(tmp_path / "run #2")
    assert (tmp_path / "run #2" / "solution.h5").exists()
    assert "trial #2: a: b" in (tmp_path / "run #2" / "config.yaml").read_text()
