"""Every snippet in the README runs as printed, from a fresh shell after the README's setup (the
package installed, so `ditto` is on PATH): each fenced block is taken from README.md and run —
sh with bash (-e: every command must succeed), python with this environment's Python, cpp by
tests/install/ (it builds the README's program as printed). Blocks marked
`<!-- readme-test: skip (why) -->` are the two make commands themselves; `setup` is the install
this environment already is; `text` blocks are synopses, not commands. Snippets that name
Qwen/Qwen3-8B find a generated 2-layer Qwen3-8B in a temporary Hugging Face cache; the client
snippets talk to the server `make run` starts, started here the way the Makefile does."""
import json
import re
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, ditto_command, env_with_hf_home

FENCE = re.compile(r"(?:<!-- readme-test: (?P<mark>\w+) \((?P<why>[^)]+)\) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                   re.S | re.M)
DEMO_MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"  # make run's; scripts/install-deps.sh fetches it
TEST_MODEL = "models/demo-qwen3-0.6b"  # the CLI examples'
README_HAIKU = "In the depths of the blue, a lone vessel sails, a reflection of the unending beauty of the sea."
MAKE_RUN_SERVE = ["serve", DEMO_MODEL, "--served-model-name", "SmolLM2-135M-Instruct", "--port", "8000"]


def readme_blocks():
    text = (REPO / "README.md").read_text()
    return [(text[:m.start()].count("\n") + 1, m["lang"], m["mark"], m["why"], m["body"]) for m in FENCE.finditer(text)]


def test_the_makefile_is_what_this_test_does_for_make_run():
    makefile = (REPO / "Makefile").read_text()
    assert "make-test-model --preset qwen3-0.6b --num-hidden-layers 4 --seed 0 --out $(TEST_MODEL)" in makefile
    assert "serve $(DEMO_MODEL) --served-model-name $(DEMO_MODEL_NAME) --port $(PORT)" in makefile
    assert "DEMO_MODEL ?= " + DEMO_MODEL in makefile and "PORT ?= 8000" in makefile
    assert "DEMO_MODEL_NAME ?= SmolLM2-135M-Instruct" in makefile and "TEST_MODEL ?= " + TEST_MODEL in makefile
    assert (REPO / DEMO_MODEL).is_file(), f"{DEMO_MODEL} is missing: scripts/install-deps.sh fetches it"


def start_make_run_server(cwd, env):
    subprocess.run([ditto_command(), "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "4",
                    "--seed", "0", "--out", TEST_MODEL], cwd=cwd, env=env, check=True, capture_output=True, timeout=600)
    (cwd / DEMO_MODEL).symlink_to(REPO / DEMO_MODEL)  # the repository's models/, as make run finds it
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.fail("port 8000 is in use; the README's client snippets need make run's port")
    server = subprocess.Popen([ditto_command(), *MAKE_RUN_SERVE], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        assert server.poll() is None, server.stderr.read()
        try:
            with socket.create_connection(("127.0.0.1", 8000), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    pytest.fail("ditto serve did not listen within 300 s")


def test_every_readme_snippet_runs_as_printed(tmp_path, qwen3_8b_hf_home):
    blocks = readme_blocks()
    assert len(blocks) >= 6
    env = env_with_hf_home(qwen3_8b_hf_home)
    work = tmp_path / "shell"
    work.mkdir()
    server = start_make_run_server(work, env)
    ran = []
    try:
        for line, lang, mark, why, body in blocks:
            where = f"README.md:{line}"
            if mark is not None:
                assert mark in ("skip", "setup") and why.strip(), where
                continue
            assert lang in ("sh", "python", "cpp", "text"), f"{where}: a ```{lang} block: give it a language this test runs"
            if lang == "text":
                continue
            if lang == "cpp":
                assert "int main" in body, f"{where}: the C++ snippet must be a whole program (tests/install runs it)"
                continue
            command = ["bash", "-euo", "pipefail", "-c", body] if lang == "sh" else [sys.executable, "-c", body]
            proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
            assert proc.returncode == 0, f"{where} ({lang}) failed ({proc.returncode}):\n{body}\n{proc.stderr[-3000:]}"
            ran.append((where, proc.stdout))
    finally:
        server.terminate()
        server.wait(timeout=60)
        subprocess.run(["rm", "-f", "/tmp/demo-qwen3-0.6b.gguf", "/tmp/demo-qwen3-0.6b-q8_0.gguf"])
    assert len(ran) >= 3, ran
    for where, stdout in ran:
        assert stdout.strip(), f"{where} printed nothing"
    # The exchange the README quotes is the one make run's server gives (greedy: the same every time).
    chats = [stdout for _, stdout in ran if stdout.lstrip().startswith("{") and '"chat.completion"' in stdout]
    assert chats, "the README's curl chat example did not run"
    assert json.loads(chats[0])["choices"][0]["message"]["content"] == README_HAIKU
