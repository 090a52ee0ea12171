"""The README's Python example runs exactly as written and computes what its comments say."""

import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_section_example():
    text = README.read_text()
    section = text.split("## Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the README's Python section should hold one example"
    return blocks[0]


def test_readme_python_example_runs_and_is_right():
    example = python_section_example()
    assert len(example.strip().splitlines()) == 5
    namespace = {}
    exec(compile(example, str(README), "exec"), namespace)
    x = np.linspace(0.0, 3.0, 4)
    np.testing.assert_allclose(np.asarray(namespace["g"]), np.sin(x) + x * np.cos(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(namespace["h"], 2 * np.cos(x) - x * np.sin(x), rtol=1e-12, atol=1e-12)
