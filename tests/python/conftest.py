"""Shared fixtures: where the C++ test tools are (ctest passes their paths in the environment)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool(variable: str, default: str) -> pathlib.Path:
    path = pathlib.Path(os.environ.get(variable, ROOT / "build" / "tests" / default))
    if not path.exists():
        pytest.fail(f"{path} does not exist: build the project first (make build), or set {variable}")
    return path


@pytest.fixture(scope="session")
def safetensors_tool() -> pathlib.Path:
    return _tool("EDDY_SAFETENSORS_TOOL", "safetensors_tool")


@pytest.fixture(scope="session")
def tokenizer_tool() -> pathlib.Path:
    return _tool("EDDY_TOKENIZER_TOOL", "tokenizer_tool")


@pytest.fixture(scope="session")
def lm_tool() -> pathlib.Path:
    return _tool("EDDY_LM_TOOL", "lm_tool")


@pytest.fixture(scope="session")
def eddy_cli() -> pathlib.Path:
    return _tool("EDDY_CLI", "../bin/eddy")
