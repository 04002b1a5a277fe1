"""examples/rl (the GRPO loop, its torch policy and weight sync) under the Python that has torch:
Debian's /usr/bin/python3 with python3-torch (scripts/install-deps.sh), which this virtual
environment lacks. The package installed here is put on that Python's path alone (a folder holding
a link to it, so the venv's other packages — its numpy — stay out), and examples/rl/test_rl_example.py
runs there: policy vs ditto logprob parity, differentiability, and grpo.py's short form (2 steps)."""
import os
import pathlib
import subprocess

import pytest

from conftest import REPO, ditto_command

SYSTEM_PYTHON = "/usr/bin/python3"


def test_rl_example_under_the_system_python(tmp_path):
    if subprocess.run([SYSTEM_PYTHON, "-c", "import torch, pytest"], capture_output=True).returncode != 0:
        pytest.skip(f"{SYSTEM_PYTHON} cannot import torch and pytest (apt install python3-torch python3-pytest)")
    import ditto
    shim = tmp_path / "site"
    shim.mkdir()
    (shim / "ditto").symlink_to(pathlib.Path(ditto.__file__).parent)
    env = dict(os.environ, PYTHONPATH=str(shim), DITTO_BIN=ditto_command())
    proc = subprocess.run([SYSTEM_PYTHON, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           str(REPO / "examples" / "rl" / "test_rl_example.py")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout and "skipped" not in proc.stdout
