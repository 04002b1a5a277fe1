"""Writes the dense twin of a Qwen3-MoE model directory, the control for its decode speed.

    /usr/bin/python3 bench/moe_dense_control.py MOE_DIR OUT_DIR

The twin reads exactly the bytes one batch-1 decode step of the MoE model reads, in fewer and
larger matrices: every layer becomes a dense MLP (mlp_only_layers = all) of intermediate_size =
num_experts_per_tok x moe_intermediate_size, i.e. the k active experts' gate/up/down matrices
as one matrix each (3 GEMVs per layer instead of a router and 2k). Attention, norms, embeddings
and lm_head are the MoE model's own bytes; the MLP weights are seeded normal(0, 0.02) bf16
(their values do not matter for speed). `ditto bench` on both, back to back, then separates what
the MoE's routing and many small expert GEMVs cost from what streaming those bytes costs.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    src, out = sys.argv[1], sys.argv[2]
    config = json.load(open(os.path.join(src, "config.json")))
    layers = config["num_hidden_layers"]
    hidden = config["hidden_size"]
    inter = config["num_experts_per_tok"] * config["moe_intermediate_size"]

    index = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    kept = []  # (name, dtype, shape, file, begin, end)
    for name in files:
        header, data_start = read_header(os.path.join(src, name))
        for tensor, info in header.items():
            if ".mlp." in tensor:
                continue
            b, e = info["data_offsets"]
            kept.append((tensor, info["dtype"], info["shape"], name, data_start + b, data_start + e))
    rng = np.random.default_rng(0)
    dense = []
    for li in range(layers):
        p = f"model.layers.{li}.mlp."
        dense += [(p + "gate_proj.weight", [inter, hidden]), (p + "up_proj.weight", [inter, hidden]),
                  (p + "down_proj.weight", [hidden, inter])]

    header, offset = {}, 0
    for tensor, dtype, shape, _, b, e in kept:
        header[tensor] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + e - b]}
        offset += e - b
    for tensor, shape in dense:
        n = shape[0] * shape[1] * 2
        header[tensor] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for tensor, _, _, name, b, e in kept:
            with open(os.path.join(src, name), "rb") as s:
                s.seek(b)
                left = e - b
                while left:
                    chunk = s.read(min(left, 64 << 20))
                    f.write(chunk)
                    left -= len(chunk)
        for tensor, shape in dense:
            for r0 in range(0, shape[0], 1024):
                rows = min(1024, shape[0] - r0)
                x = (rng.standard_normal((rows, shape[1]), dtype=np.float32) * 0.02)
                f.write((x.view(np.uint32) >> 16).astype("<u2").tobytes())
    config["mlp_only_layers"] = list(range(layers))
    config["intermediate_size"] = inter
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    print(f"wrote {out}: {layers} dense layers of intermediate_size {inter}")


if __name__ == "__main__":
    main()
