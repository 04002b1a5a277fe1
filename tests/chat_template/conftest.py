"""Fixtures for the chat-template parity suite: the ditto binary and the jinja2 oracle."""
import json
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
ORACLE = HERE / "render_jinja2.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


@pytest.fixture(scope="session")
def ditto_bin():
    path = pathlib.Path(os.environ.get("DITTO_BIN", REPO / "build" / "tools" / "ditto"))
    if not path.exists():
        pytest.skip(f"ditto binary not built at {path} (run `make test`, or set DITTO_BIN)")
    return str(path)


@pytest.fixture(scope="session")
def jinja2_available():
    proc = subprocess.run([PYTHON, "-c", "import jinja2, sys; sys.exit(jinja2.__version__ < '3.1')"],
                          capture_output=True)
    if proc.returncode != 0:
        pytest.skip("Python jinja2 >= 3.1 (the oracle) is not installed: apt-get install python3-jinja2")


def render(command, model, input_path):
    """Runs `command --model M --input F`; returns (returncode, prompts or None, stderr, stdout)."""
    proc = subprocess.run([*command, "--model", str(model), "--input", str(input_path)],
                          capture_output=True, text=True, timeout=600)
    prompts = None
    if proc.returncode == 0:
        prompts = [json.loads(line)["prompt"] for line in proc.stdout.split("\n") if line.strip()]
    return proc.returncode, prompts, proc.stderr, proc.stdout


def ditto_render(ditto_bin, model, input_path):
    return render([ditto_bin, "render-chat"], model, input_path)


def oracle_render(model, input_path):
    return render([PYTHON, str(ORACLE)], model, input_path)
