"""eddy.solve, eddy.train, eddy.generate and the HDF5 readers on tiny versions of the examples."""

import pathlib

import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file

import eddy

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = ROOT / "data"


def test_solve_burgers_briefly(tmp_path):
    run = tmp_path / "burgers"
    result = eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), {
        "training.adam.steps": 5,
        "training.lbfgs.iterations": 0,
        "conditions.pde.points": 200,
        "output.grid": [16, 8],
        "output.dir": str(run),
        "validation.reference.file": str(DATA / "burgers1d.h5"),
    })
    assert result["finished"] and result["steps"] == 5
    assert "finished 5 steps" in result["message"]
    assert np.isfinite(result["loss"]) and result["loss"] > 0
    assert result["output_dir"] == str(run)
    assert result["learned"] == {}
    u = result["metrics"]["u"]
    assert np.isfinite(u["relative_l2"]) and np.isfinite(u["max_error"])

    solution = run / "solution.h5"
    names = eddy.list_hdf5(str(solution))
    assert {"fields/u", "coordinates/x", "coordinates/t", "history/loss"} <= set(names)
    field = eddy.read_hdf5(str(solution), "fields/u")
    assert isinstance(field, eddy.Tensor) and field.shape == (16, 8)
    with h5py.File(solution, "r") as f:
        np.testing.assert_array_equal(np.asarray(field), f["fields/u"][:])
        np.testing.assert_allclose(np.asarray(eddy.read_hdf5(str(solution), "coordinates/x")), np.linspace(-1, 1, 16))
    assert any(name.startswith("model.") for name in load_file(str(run / "checkpoint.safetensors")))
    # evaluate_run recomputes the metrics from the saved run.
    metrics = eddy.evaluate_run(str(run))
    assert metrics["u"]["relative_l2"] == pytest.approx(u["relative_l2"], rel=1e-6)


def test_solve_overrides_as_strings_and_resume(tmp_path):
    run = tmp_path / "burgers"
    overrides = ["training.adam.steps=3", "training.lbfgs.iterations=0", "conditions.pde.points=100",
                 "output.grid=[8, 4]", f"output.dir={run}", "validation.every=0",
                 f"validation.reference.file={DATA / 'burgers1d.h5'}"]
    first = eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), overrides)
    assert first["steps"] == 3
    # Resuming a finished run with the same config reproduces its result from the checkpoint.
    again = eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), overrides, resume=True)
    assert again["finished"] and again["steps"] == 3 and again["loss"] == first["loss"]
    # More steps is a training setting, which a resumed run may change: it goes on to step 6.
    longer = eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), overrides + ["training.adam.steps=6"], resume=True)
    assert longer["finished"] and longer["steps"] == 6
    # Another model is refused, naming the key.
    with pytest.raises(eddy.Error, match="model.width is 20 in the run that wrote"):
        eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), overrides + ["training.adam.steps=6", "model.width=8"],
                   resume=True)


@pytest.mark.parametrize("example,data,extra", [
    ("antiderivative_deeponet", "antiderivative.h5", {"data.train.samples": 8, "model.width": 8, "model.latent": 4}),
    ("burgers_fno1d", "burgers_operator16.h5", {"data.train.samples": 4, "model.width": 4, "model.layers": 1,
                                                 "model.projection_width": 4}),
    ("darcy16", "darcy16.h5", {"data.train.samples": 4, "training.batch_size": 2, "model.width": 4, "model.layers": 1,
                               "model.projection_width": 4, "model.modes": [2, 3]}),
])
def test_train_operator_examples_for_one_epoch(tmp_path, example, data, extra):
    run = tmp_path / example
    result = eddy.train(str(EXAMPLES / "operator" / f"{example}.yaml"),
                        {"training.epochs": 1, "output.dir": str(run), "data.file": str(DATA / data), **extra})
    assert result["finished"] and result["epochs"] == 1
    assert np.isfinite(result["train_loss"])
    assert result["test_relative_l2"] and all(np.isfinite(v) for v in result["test_relative_l2"].values())
    assert result["output_dir"] == str(run)
    assert (run / "checkpoint.safetensors").exists() and (run / "predictions.h5").exists()
    assert eddy.list_hdf5(str(run / "predictions.h5"))


def test_generate_from_a_dict_writes_over_its_own_dataset_again(tmp_path):
    # A dict's config is stored in flow style, which the check for "a dataset of eddy generate"
    # did not read: running the same cell twice was refused without --overwrite.
    config = {"solver": "burgers", "resolution": 16, "samples": 2, "nu": 0.1,
              "time": {"dt": 1e-3, "final": 0.01}, "output": {"path": str(tmp_path / "py.h5"), "vtk": False}}
    first = np.asarray(eddy.read_hdf5(eddy.generate(config), "u"))
    np.testing.assert_array_equal(np.asarray(eddy.read_hdf5(eddy.generate(config), "u")), first)


def test_generate_darcy_data_and_read_it_back(tmp_path):
    path = tmp_path / "darcy" / "darcy.h5"
    written = eddy.generate(str(EXAMPLES / "operator" / "darcy_data.yaml"),
                            {"samples": 2, "resolution": 16, "output.path": str(path), "output.vtk": False})
    assert written == str(path) and path.exists()
    assert {"a", "u"} <= set(eddy.list_hdf5(written))
    a = eddy.read_hdf5(written, "a")
    u = eddy.read_hdf5(written, "u")
    assert a.shape == (2, 16, 16) and u.shape == (2, 16, 16)
    # The coefficient takes its two values; u vanishes on the boundary and is positive inside.
    assert set(np.unique(np.asarray(a))) <= {3.0, 12.0}
    u = np.asarray(u)
    assert np.abs(u[:, 0, :]).max() < 1e-6 and np.abs(u[:, :, -1]).max() < 1e-6
    assert u[:, 8, 8].min() > 0
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["u"][:], u)


def test_h5py_bools_read_as_bool_and_other_enumerations_are_refused(tmp_path):
    # h5py stores NumPy bools as a 1-byte enum (FALSE = 0, TRUE = 1), which eddy used to refuse as
    # "not numeric".
    path = tmp_path / "masks.h5"
    mask = np.array([[True, False, True], [False, False, True]])
    with h5py.File(path, "w") as f:
        f["mask"] = mask
        f.create_dataset("colour", data=np.array([0, 2, 1], dtype=np.int8),
                         dtype=h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2}, basetype="i1"))
    read = eddy.read_hdf5(str(path), "mask")
    assert read.dtype == eddy.bool_
    np.testing.assert_array_equal(np.asarray(read), mask)
    with pytest.raises(eddy.Error, match=r"dataset 'colour' is an enumeration other than h5py's bool"):
        eddy.read_hdf5(str(path), "colour")


def test_a_file_whose_object_header_is_damaged_is_refused_rather_than_listed_in_part(tmp_path):
    # libhdf5's visit stops at the damaged header; eddy used to return the datasets before it.
    path = tmp_path / "damaged.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(4.0)
        f["g/b"] = np.arange(3.0)
        f["g/c"] = np.arange(2.0)
    with h5py.File(path, "r") as f:
        header = h5py.h5o.get_info(f["g/c"].id).addr
    data = bytearray(path.read_bytes())
    data[header:header + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with pytest.raises(eddy.Error, match=r"damaged.h5: cannot list its datasets, the file is damaged \(after 'g/b'\)"):
        eddy.list_hdf5(str(path))


# ---- configuration errors carry eddy's message ----


def test_unknown_override_key_suggests_the_nearest():
    with pytest.raises(eddy.Error, match=r"unknown key 'stepz' in training.adam \(did you mean 'steps'\?\)"):
        eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), {"training.adam.stepz": 5})


def test_bad_override_value_names_the_key():
    with pytest.raises(eddy.Error, match="model.width: expected an integer, got 'wide'"):
        eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"), {"model.width": "wide"})


def test_config_error_names_file_line_and_column(tmp_path):
    # The reference file, which the copy's folder lacks, is named absolutely.
    text = (EXAMPLES / "pinn" / "burgers.yaml").read_text().replace("model: {", "modle: {").replace(
        "../../data/burgers1d.h5", str(EXAMPLES.parent / "data" / "burgers1d.h5"))
    line = text.splitlines().index(next(l for l in text.splitlines() if l.startswith("modle:"))) + 1
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(eddy.Error) as error:
        eddy.solve(str(path))
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:1:")
    assert "did you mean 'model'?" in message
    assert isinstance(error.value, ValueError)


def test_missing_files_raise():
    with pytest.raises(eddy.Error, match="missing.yaml"):
        eddy.train("missing.yaml")
    with pytest.raises(eddy.Error, match="missing.yaml"):
        eddy.generate("missing.yaml")
    with pytest.raises(eddy.Error, match="no dataset 'nope'"):
        eddy.read_hdf5(str(DATA / "darcy16.h5"), "nope")


def test_an_output_folder_under_a_file_is_an_os_error(tmp_path):
    # pybind11 raised a bare RuntimeError for file system errors.
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError, match="output.dir .*: cannot make the run folder"):
        eddy.solve(str(EXAMPLES / "pinn" / "burgers.yaml"),
                   {"output.dir": str(tmp_path / "afile" / "run"), "training.adam.steps": 1,
                    "training.lbfgs.iterations": 0})


def test_a_dict_config_takes_numpy_scalars_and_names_what_it_cannot_take(tmp_path):
    import numpy as np
    config = {"geometry": {"space": {"type": "interval", "min": 0, "max": 1}}, "fields": ["u"],
              "conditions": {"pde": {"type": "interior", "equation": "u_xx + 1", "points": np.int64(16)}},
              "training": {"adam": {"steps": np.int64(2), "learning_rate": np.float32(0.01)},
                           "lbfgs": {"iterations": 0}},
              "output": {"dir": str(tmp_path / "run"), "vtk": False}}
    assert eddy.solve(config)["steps"] == 2
    config["training"]["adam"]["steps"] = object()
    with pytest.raises(TypeError, match="a config value must be a str, number, bool, None, list or dict"):
        eddy.solve(config)
    # A notebook's pathlib.Path and NumPy array (output.grid) were refused, naming no key; so was a
    # key that is not a str.
    config["training"]["adam"]["steps"] = 2
    result = eddy.solve(config, {"output.dir": tmp_path / "path", "output.grid": np.array([8]),
                                 "conditions.pde.points": eddy.tensor(16)})
    assert result["output_dir"] == str(tmp_path / "path") and result["steps"] == 2
    with pytest.raises(TypeError, match="override 'training.adam.steps': a config value must be"):
        eddy.solve(config, {"training.adam.steps": object()})
    with pytest.raises(TypeError, match="an override's key must be a str"):
        eddy.solve(config, {5: 3})


@pytest.mark.parametrize("function, example, message", [
    ("solve", "operator/darcy16.yaml", "eddy.solve: {file} is a neural-operator run (its `data` names a `train` split), "
                                       "not a PINN problem; run it with `eddy.train`"),
    ("train", "pinn/burgers.yaml", "eddy.train: {file} is a PINN problem (it has `geometry`), not a neural-operator "
                                   "run; run it with `eddy.solve`"),
    ("generate", "lm/fortunes_gpt.yaml", "eddy.generate: {file} is a language-model run (it has a `tokenizer` or "
                                         "its `data` names text `files`), not a dataset to generate; run it with "
                                         "`eddy.lm.train`"),
], ids=["solve", "train", "generate"])
def test_a_file_of_another_kind_names_the_function_that_reads_it(function, example, message):
    # Each was read as its own kind and failed on a missing key (`geometry`, `data.train`, `solver`).
    file = str(EXAMPLES / example)
    with pytest.raises(eddy.Error) as error:
        getattr(eddy, function)(file)
    assert str(error.value) == message.format(file=file)
