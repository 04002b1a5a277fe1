"""Shared fixtures for the CLI end-to-end tests: the ditto binary and small model directories."""
import json
import os
import pathlib
import pty
import select
import struct
import subprocess
import time

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ditto_bin():
    path = pathlib.Path(os.environ.get("DITTO_BIN", REPO / "build" / "tools" / "ditto"))
    if not path.exists():
        pytest.skip(f"ditto binary not built at {path} (run `make test`, or set DITTO_BIN)")
    return str(path)


def run_ditto(ditto_bin, *args, check=True, input_text=None, env=None):
    """Runs ditto (stdin: input_text, environment: env or ours); returns the CompletedProcess
    (text mode)."""
    proc = subprocess.run([ditto_bin, *map(str, args)], capture_output=True, text=True, timeout=900,
                          input=input_text, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"ditto {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_on_terminal(ditto_bin, args, seconds):
    """Runs ditto with stderr on a pseudo-terminal (stdout a pipe) for at most `seconds`; returns
    (what the terminal got, stdout, whether it was still running when stopped)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([ditto_bin, *map(str, args)], stdout=subprocess.PIPE, stderr=terminal,
                            stdin=subprocess.DEVNULL)
    os.close(terminal)
    got = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([controller], [], [], 0.2)[0]:
            try:
                got += os.read(controller, 65536)
            except OSError:
                break
    try:  # the terminal closed (the process is exiting), or the time is up
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        running = False
    except subprocess.TimeoutExpired:
        running = True
        proc.kill()
    out, _ = proc.communicate()
    while select.select([controller], [], [], 0)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    os.close(controller)
    return got.decode(errors="replace"), out.decode(), running


TINY_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 320,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
    "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "bfloat16",
}


def tiny_tensors(config):
    """HF tensor names and shapes of a dense Qwen3 config (written independently of ditto's list)."""
    h, i, d = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    shapes = {"model.embed_tokens.weight": (config["vocab_size"], h), "model.norm.weight": (h,)}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "self_attn.q_proj.weight": (nh * d, h), p + "self_attn.k_proj.weight": (nkv * d, h),
            p + "self_attn.v_proj.weight": (nkv * d, h), p + "self_attn.o_proj.weight": (h, nh * d),
            p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
    return shapes


def write_safetensors(path, arrays, header_edit=None):
    """Writes bf16 tensors {name: float32 array}; header_edit(header_dict) may corrupt the header."""
    header, blobs, offset = {}, [], 0
    for name in sorted(arrays):
        bits = (np.ascontiguousarray(arrays[name], dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
        blob = bits.tobytes()
        header[name] = {"dtype": "BF16", "shape": list(arrays[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if header_edit:
        header_edit(header)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def write_tiny_model(directory, config=None, header_edit=None, drop=()):
    config = dict(config or TINY_CONFIG)
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)
    arrays = {}
    for name, shape in tiny_tensors(config).items():
        if name in drop:
            continue
        arrays[name] = np.ones(shape) if name.endswith("norm.weight") else rng.normal(0, 0.1, shape)
    write_safetensors(directory / "model.safetensors", arrays, header_edit)
    return directory


@pytest.fixture
def tiny_model(tmp_path):
    return write_tiny_model(tmp_path / "tiny")
