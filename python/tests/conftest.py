"""Fixtures for the Python package's tests: run inside the virtual environment `make test`
installs the package into (`import ditto` and the `ditto` command come from there)."""
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def ditto_command() -> str:
    """The `ditto` command the package installed (on PATH in its virtual environment)."""
    path = shutil.which("ditto")
    if path is None:
        raise AssertionError("`ditto` is not on PATH: install the package (pip install .) into this environment")
    return path


def make_model(out: pathlib.Path, preset: str = "qwen3-0.6b", layers: int = 2, seed: int = 0) -> pathlib.Path:
    subprocess.run([ditto_command(), "make-test-model", "--preset", preset, "--num-hidden-layers", str(layers),
                    "--seed", str(seed), "--out", str(out)], check=True, capture_output=True, text=True, timeout=900)
    return out


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """A 2-layer qwen3-0.6b: the real configuration cut to 2 layers, seeded random weights and the
    real Qwen3 tokenizer and chat template."""
    return str(make_model(tmp_path_factory.mktemp("models") / "qwen3-0.6b-2l"))


@pytest.fixture(scope="session")
def llm(model_dir):
    import ditto
    return ditto.LLM(model=model_dir, kv_cache_memory="512MiB")


@pytest.fixture(autouse=True)
def _no_batch_invariant_env(monkeypatch):
    for name in ("VLLM_BATCH_INVARIANT", "DITTO_BATCH_INVARIANT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def qwen3_8b_hf_home(tmp_path_factory) -> pathlib.Path:
    """A Hugging Face cache (HF_HOME) holding a generated Qwen3-8B-configured model, 2 layers,
    under the id Qwen/Qwen3-8B (refs/main names its snapshot), as the examples and the README's
    snippets name it."""
    home = tmp_path_factory.mktemp("hf")
    repo = home / "hub" / "models--Qwen--Qwen3-8B"
    revision = "0" * 40
    make_model(repo / "snapshots" / revision, preset="qwen3-8b", layers=2)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return home


def env_with_hf_home(hf_home: pathlib.Path) -> dict:
    env = dict(os.environ, HF_HOME=str(hf_home))
    env.pop("HF_HUB_CACHE", None)
    return env
