"""eddy's safetensors files against the reference Python `safetensors` package, both ways."""

import json
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file


def eddy_dump(tool, path):
    result = subprocess.run([str(tool), "dump", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_file_written_by_eddy_loads_in_safetensors(tmp_path, safetensors_tool):
    path = tmp_path / "from_eddy.safetensors"
    subprocess.run([str(safetensors_tool), "write", str(path)], check=True)
    tensors = load_file(str(path))

    np.testing.assert_array_equal(tensors["layer.weight"], (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3))
    assert tensors["layer.weight"].dtype == np.float32
    np.testing.assert_array_equal(tensors["layer.bias"], np.array([0.125, -3.5], dtype=np.float64))
    assert tensors["step"].dtype == np.int64 and tensors["step"][0] == 1234567890123
    np.testing.assert_array_equal(tensors["ids"], np.array([[-2], [0], [7]], dtype=np.int32))
    np.testing.assert_array_equal(tensors["mask"], np.array([True, False]))
    # Complex tensors are stored as real [..., 2] pairs, listed in the metadata.
    np.testing.assert_array_equal(tensors["spectrum"], np.array([[1.0, 0.5], [-2.0, 3.0]]))

    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata()
    assert metadata["eddy.step"] == "17"
    assert metadata["eddy.complex"] == "spectrum"


def test_file_written_by_safetensors_loads_in_eddy(tmp_path, safetensors_tool):
    rng = np.random.default_rng(3)
    written = {
        "a.float32": rng.standard_normal((3, 4)).astype(np.float32),
        "a.float64": rng.standard_normal(5),
        "counts": np.array([1, -2, 3], dtype=np.int64),
        "small": np.array([[7, 8]], dtype=np.int32),
        "flags": np.array([False, True, True]),
        "scalar": np.array(2.5),
        "half": np.array([1.0, -2.5, 65504.0], dtype=np.float16),
    }
    path = tmp_path / "from_python.safetensors"
    save_file(written, str(path), metadata={"origin": "python"})
    dumped = eddy_dump(safetensors_tool, path)

    assert dumped["metadata"] == {"origin": "python"}
    expected_dtypes = {"a.float32": "float32", "a.float64": "float64", "counts": "int64",
                       "small": "int32", "flags": "bool", "scalar": "float64", "half": "float16"}
    for name, array in written.items():
        entry = dumped["tensors"][name]
        assert entry["dtype"] == expected_dtypes[name]
        assert entry["shape"] == list(array.shape)
        np.testing.assert_array_equal(np.array(entry["values"], dtype=np.float64),
                                      array.astype(np.float64).ravel())


def test_eddy_rejects_a_truncated_file_with_a_clear_error(tmp_path, safetensors_tool):
    path = tmp_path / "cut.safetensors"
    save_file({"x": np.arange(100, dtype=np.float64)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 16])
    result = subprocess.run([str(safetensors_tool), "dump", str(path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert str(path) in result.stderr and "truncated" in result.stderr


def test_eddy_names_unsupported_dtypes(tmp_path, safetensors_tool):
    path = tmp_path / "other.safetensors"
    save_file({"x": np.zeros(3, dtype=np.uint16)}, str(path))
    result = subprocess.run([str(safetensors_tool), "dump", str(path)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "unsupported dtype" in result.stderr
