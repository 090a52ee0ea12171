"""Writes the binary and generated seeds of tests/fuzz/corpus/ (docs/fuzzing.md): NPY, CSV,
safetensors and HDF5 files, small and valid or nearly so. Run from the repository root with the
project's .venv (numpy, safetensors, h5py):

    .venv/bin/python tests/fuzz/make_seeds.py [EXPORT_DIR]

EXPORT_DIR, a folder written by `eddy export` of a tiny model, adds the export harness's seed.
The tokenizer seeds need the eddy package (PYTHONPATH=build/python). Hand-written seeds (YAML,
expressions, regressions) are not touched.
"""
import io
import json
import struct
import sys
from pathlib import Path

import h5py
import numpy as np
from safetensors.numpy import save

CORPUS = Path(__file__).resolve().parent / "corpus"


def put(harness, name, data):
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def npy_bytes(array):
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def npy_seeds():
    rng = np.random.default_rng(0)
    put("npy", "f64_2d", npy_bytes(rng.standard_normal((5, 3))))
    put("npy", "f32_1d", npy_bytes(rng.standard_normal(4).astype(np.float32)))
    put("npy", "i32_2d", npy_bytes(np.arange(6, dtype=np.int32).reshape(3, 2)))
    put("npy", "i64_1d", npy_bytes(np.arange(3, dtype=np.int64)))
    put("npy", "u8_2d", npy_bytes(np.arange(4, dtype=np.uint8).reshape(2, 2)))
    put("npy", "bool_1d", npy_bytes(np.array([True, False, True])))
    put("npy", "fortran_order", npy_bytes(np.asfortranarray(np.arange(6.0).reshape(2, 3))))
    put("npy", "big_endian", npy_bytes(np.arange(3, dtype=">f8")))
    put("npy", "zero_rows", npy_bytes(np.zeros((0, 2))))
    put("npy", "three_d", npy_bytes(np.zeros((2, 2, 2))))
    put("npy", "truncated", npy_bytes(np.arange(8.0).reshape(4, 2))[:-9])
    put("npy", "complex", npy_bytes(np.array([1 + 2j])))
    # Format version 2.0: a 4-byte header length.
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"
    header += b" " * (-(12 + len(header) + 1) % 64) + b"\n"
    put("npy", "version2", b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header
        + np.arange(4.0).tobytes())


def csv_seeds():
    put("csv", "header", "x,t,u\n0.0,0.5,1.0\n0.25,0.5,-2e-3\n1,1,inf\n")
    put("csv", "savetxt_header", "# x,t,u\n0.000000000000000000e+00 5.0e-01 1.0\n")
    put("csv", "spaces_empty_field", "x, t, u\n 1, ,3\n4,5,\n")
    put("csv", "crlf", "x,t,u\r\n1,2,3\r\n4,5,6\r\n")
    put("csv", "bad_number", "x,t,u\n1,2,abc\n")
    put("csv", "ragged", "x,t,u\n1,2\n1,2,3,4\n")
    put("csv", "no_rows", "x,t,u\n")
    put("csv", "duplicate_column", "x,x,u\n1,2,3\n")
    put("csv", "nan_hex", "x,t,u\nnan,-0x1p3,1e400\n")


def safetensors_seeds():
    rng = np.random.default_rng(1)
    put("safetensors", "f32_f64", save({"w": rng.standard_normal((2, 3)).astype(np.float32),
                                        "b": rng.standard_normal(3)}))
    put("safetensors", "ints_bool", save({"i": np.arange(4, dtype=np.int64), "j": np.arange(2, dtype=np.int32),
                                          "m": np.array([True, False])}))
    put("safetensors", "metadata_complex", save({"z": np.arange(4, dtype=np.float32).reshape(2, 2)},
                                                metadata={"eddy.complex": "z", "format": "pt"}))
    put("safetensors", "scalar_empty", save({"s": np.array(3.0), "e": np.zeros((0, 4), dtype=np.float32)}))
    put("safetensors", "f16_u8", save({"h": np.ones(3, dtype=np.float16), "u": np.ones(2, dtype=np.uint8)}))
    header = json.dumps({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}}).encode()
    put("safetensors", "truncated", struct.pack("<Q", len(header)) + header + b"\0" * 8)
    huge = json.dumps({"a": {"dtype": "F64", "shape": [2 ** 62, 4], "data_offsets": [0, 8]}}).encode()
    put("safetensors", "huge_shape", struct.pack("<Q", len(huge)) + huge + b"\0" * 8)


def h5_bytes(fill):
    out = io.BytesIO()
    with h5py.File(out, "w", libver="latest") as f:
        fill(f)
    return out.getvalue()


def hdf5_seeds():
    put("hdf5", "f64_2d", h5_bytes(lambda f: f.create_dataset("points", data=np.arange(6.0).reshape(3, 2))))
    put("hdf5", "groups_types", h5_bytes(lambda f: (
        f.create_dataset("fields/u", data=np.arange(3, dtype=np.float32)),
        f.create_dataset("fields/i", data=np.arange(2, dtype=np.int64)),
        f.create_dataset("mask", data=np.array([1, 0], dtype=np.uint8)))))
    put("hdf5", "chunked_gzip", h5_bytes(lambda f: f.create_dataset(
        "x", data=np.arange(16.0).reshape(4, 4), chunks=(2, 2), compression="gzip")))
    put("hdf5", "scalar_empty_string", h5_bytes(lambda f: (
        f.create_dataset("s", data=2.5), f.create_dataset("e", shape=(0, 3), dtype="f8"),
        f.create_dataset("text", data="abc"))))
    put("hdf5", "int16_big_endian", h5_bytes(lambda f: (
        f.create_dataset("a", data=np.arange(3, dtype=np.int16)),
        f.create_dataset("b", data=np.arange(3, dtype=">f8")))))
    put("hdf5", "unwritten_large", h5_bytes(lambda f: f.create_dataset(
        "big", shape=(1 << 20, 1 << 20), dtype="f8", chunks=(16, 16))))


def operator_dataset_seeds():
    # Bytes as tests/fuzz/operator_dataset.cpp reads them: flags, samples, strides, axes, then
    # per dataset a kind byte (rank + 5 * dtype) and one byte per extent.
    def dataset(rank, dtype, *dims):
        return bytes([rank + 5 * dtype, *dims])
    f64 = 1
    fno_1d = bytes([0b1000, 0, 0, 0]) + dataset(2, f64, 4, 8) + dataset(2, f64, 4, 8) + bytes([255, 255, 255])
    put("operator_dataset", "fno_1d", fno_1d + bytes(range(1, 64)))
    fno_2d = (bytes([0b11010, 2, 0b0101, 1]) + dataset(4, f64, 3, 2, 4, 4) + dataset(4, 0, 3, 1, 4, 4)
              + dataset(4, f64, 2, 2, 4, 4) + dataset(4, 0, 2, 1, 4, 4) + bytes([255]))
    put("operator_dataset", "fno_2d_channels_test", fno_2d + bytes(range(7, 90)))
    deeponet = (bytes([0b111001, 0, 1, 0]) + dataset(2, f64, 5, 6) + dataset(2, f64, 5, 7)
                + dataset(2, f64, 2, 6) + dataset(2, f64, 2, 7) + dataset(1, f64, 7))
    put("operator_dataset", "deeponet_points", deeponet + bytes(range(3, 50)))
    put("operator_dataset", "mismatch_ints", bytes([0, 9, 3, 2]) + dataset(3, 2, 2, 3, 3) + dataset(2, 3, 3, 3)
        + bytes([255, 255, 255]) + bytes(range(200, 256)))


def checkpoint_seeds():
    """Checkpoints of the harness's model (Linear 2 -> 3, Linear 3 -> 1) as save_checkpoint
    writes them: model.* and optimizer.* tensors and the eddy.* metadata."""
    rng = np.random.default_rng(0)
    model = {"model.0.weight": rng.standard_normal((2, 3)).astype(np.float32),
             "model.0.bias": np.zeros(3, np.float32),
             "model.1.weight": rng.standard_normal((3, 1)).astype(np.float32),
             "model.1.bias": np.zeros(1, np.float32)}
    optimizer = {"optimizer.adam.step": np.array([4], np.int64),
                 "optimizer.history.loss": np.array([0.5, np.nan], np.float64)}
    metadata = {"eddy.step": "4", "eddy.config_hash": "0" * 16, "eddy.version": "0.1.0",
                "eddy.settings": '{"model.width": "3", "seed": "0"}'}
    put("checkpoint", "adam_run", save({**model, **optimizer}, metadata=metadata))
    put("checkpoint", "other_settings", save(model, metadata={**metadata, "eddy.settings": '{"seed": "1"}'}))
    put("checkpoint", "wrong_shape", save({**model, "model.0.weight": np.zeros((3, 2), np.float32)}, metadata=metadata))


def tokenizer_seeds():
    """Small tokenizer.json files trained by eddy (run with the eddy package importable)."""
    import eddy
    texts = ["the cat sat on the mat", "the dog sat on the log", "caf\u00e9 \u20ac 42"] * 3
    for name, special in (("plain", []), ("special", ["<|endoftext|>", "<pad>"])):
        folder = CORPUS / "tokenizer"
        folder.mkdir(parents=True, exist_ok=True)
        eddy.BpeTokenizer.train(texts, 280, special_tokens=special).save(folder / name)


def export_seeds(export_dir):
    separator = b"\n--eddy-fuzz-file--\n"
    folder = Path(export_dir)
    meta = json.dumps(json.loads((folder / "meta.json").read_text())).encode()
    graph = json.dumps(json.loads((folder / "graph.json").read_text()), separators=(",", ":")).encode()
    weights = (folder / "weights.safetensors").read_bytes()
    put("export", "mlp", meta + separator + graph + separator + weights)


if __name__ == "__main__":
    npy_seeds()
    csv_seeds()
    safetensors_seeds()
    hdf5_seeds()
    operator_dataset_seeds()
    checkpoint_seeds()
    tokenizer_seeds()
    if len(sys.argv) > 1:
        export_seeds(sys.argv[1])
