"""The two programs people copy from the batch-invariance docs, as files in examples/, with only
the import changed: run against a generated Qwen3-8B-configured model (2 layers, seeded random
weights, the real tokenizer) placed in a temporary Hugging Face cache under the id Qwen/Qwen3-8B.
Same text every time: run twice, inside a larger shuffled batch, and against `ditto serve` alone
and under load from other clients."""
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, ditto_command, env_with_hf_home

EXAMPLES = REPO / "examples"
PORT = 8000  # the client example's base_url, as written


@pytest.fixture(scope="module")
def hf_home(qwen3_8b_hf_home) -> pathlib.Path:
    return qwen3_8b_hf_home


def run_example(name: str, hf_home: pathlib.Path) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=900,
                          env=env_with_hf_home(hf_home))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def generated_texts(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("Generated: ")]


def test_offline_example_gives_the_same_text_every_time(hf_home, monkeypatch):
    first = run_example("offline_inference.py", hf_home)
    assert len(generated_texts(first)) == 3 and "Prompt: 'The future of AI is'" in first
    assert run_example("offline_inference.py", hf_home) == first
    # Its prompts inside a larger shuffled batch of other requests: the same text.
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    from ditto import LLM, SamplingParams
    prompts = ["The future of AI is", "Machine learning enables", "Deep learning models can"]
    batch = [(p, SamplingParams(temperature=0.7, max_tokens=100, seed=42)) for p in prompts]
    batch += [(f"Unrelated request {k} about {w}", SamplingParams(temperature=1.0, max_tokens=40, seed=k))
              for k, w in enumerate(["tea", "trains", "snow", "jazz", "ants", "glass"] * 3)]
    random.Random(1).shuffle(batch)
    llm = LLM(model="Qwen/Qwen3-8B", kv_cache_memory="1GiB")
    outs = llm.generate([p for p, _ in batch], [s for _, s in batch], use_tqdm=False)
    texts = {p: o.outputs[0].text for (p, _), o in zip(batch, outs)}
    assert [f"Generated: {texts[p]!r}" for p in prompts] == generated_texts(first)


def wait_for_server(proc: subprocess.Popen, port: int) -> None:
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ditto serve exited ({proc.returncode}): {proc.stderr.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("ditto serve did not start listening within 300 s")


def test_openai_client_example_alone_and_under_load(hf_home):
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.fail(f"port {PORT} is in use; the client example's base_url needs it free")
    env = dict(env_with_hf_home(hf_home), VLLM_BATCH_INVARIANT="1")
    server = subprocess.Popen([ditto_command(), "serve", "Qwen/Qwen3-8B", "--port", str(PORT),
                               "--kv-cache-memory", "1GiB"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for_server(server, PORT)
        alone = run_example("openai_completion_client.py", hf_home)
        assert alone.strip()
        assert run_example("openai_completion_client.py", hf_home) == alone
        from openai import OpenAI
        client = OpenAI(api_key="EMPTY", base_url=f"http://localhost:{PORT}/v1")
        stop = threading.Event()
        errors = []

        def load(k: int) -> None:
            while not stop.is_set():
                try:
                    response = client.completions.create(model="Qwen/Qwen3-8B", prompt=f"Load {k}: a story",
                                                         max_tokens=24, temperature=1.0, stream=k % 2 == 0)
                    if k % 2 == 0:
                        for _ in response:  # a stream is read to its end
                            pass
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    return

        threads = [threading.Thread(target=load, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        try:
            under_load = run_example("openai_completion_client.py", hf_home)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors, errors
        assert under_load == alone
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_rl_example_finds_no_logprob_that_differs(hf_home):
    out = subprocess.run([sys.executable, str(EXAMPLES / "rl_logprobs.py"), "Qwen/Qwen3-8B"], capture_output=True,
                         text=True, timeout=900, env=env_with_hf_home(hf_home))
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.fullmatch(r"(\d+) sampled tokens re-scored, 0 logprobs differ", out.stdout.strip())
    assert m and int(m.group(1)) >= 100, out.stdout
