"""VLLM_BATCH_INVARIANT / DITTO_BATCH_INVARIANT: 1 or unset is what ditto always does (silent);
0 gets one line saying there is no non-invariant mode, from the package and from `ditto serve`."""
import os
import subprocess
import sys

import pytest

from conftest import ditto_command

LINE = "has no non-invariant mode"


def import_stderr(**env_vars) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_BATCH_INVARIANT", "DITTO_BATCH_INVARIANT")}
    env.update(env_vars)
    proc = subprocess.run([sys.executable, "-c", "import ditto; ditto.batch_invariant_mode(); import ditto"],
                          env=env, capture_output=True, text=True, check=True, timeout=60)
    return proc.stderr


@pytest.mark.parametrize("name", ["VLLM_BATCH_INVARIANT", "DITTO_BATCH_INVARIANT"])
def test_the_package_reads_the_switch(name):
    assert import_stderr() == ""
    assert import_stderr(**{name: "1"}) == ""
    err = import_stderr(**{name: "0"})
    assert err.count(LINE) == 1 and name in err, err  # once per process, however often it is read


def test_ditto_serve_reads_the_switch(tmp_path):
    env = dict(os.environ, VLLM_BATCH_INVARIANT="0")
    proc = subprocess.run([ditto_command(), "serve", str(tmp_path / "no-model")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1  # no model there: it stops, after saying what it makes of the switch
    assert proc.stderr.count(LINE) == 1 and "VLLM_BATCH_INVARIANT" in proc.stderr, proc.stderr
    env["VLLM_BATCH_INVARIANT"] = "1"
    proc = subprocess.run([ditto_command(), "serve", str(tmp_path / "no-model")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert LINE not in proc.stderr, proc.stderr
