"""The trainer's model for examples/rl/grpo.py: a small float32 Llama forward in PyTorch that loads a
Hugging Face directory (``ditto export-hf`` of SmolLM2-135M-Instruct's GGUF) and gives each completion
token's log-probability, differentiably.

The forward is Hugging Face transformers' LlamaForCausalLM (modeling_llama.py) in float32: RMSNorm
(``x * rsqrt(mean(x²) + eps) * w``), rotary embeddings on the two halves of each head (``rotate_half``)
with ``rope_theta`` and, where the config has it, llama3 ``rope_scaling``; grouped-query attention with
a causal mask and scale 1/sqrt(head_dim); the SwiGLU MLP ``down(silu(gate(x)) * up(x))``; the LM head
tied to the embedding when ``tie_word_embeddings``. Its parameters carry Hugging Face's names
(``state_dict()`` keys are ``model.layers.0.self_attn.q_proj.weight`` ...), which is what the
weight-transfer API takes.

    policy = LlamaPolicy.from_pretrained("models/SmolLM2-135M-Instruct-hf")
    lp = policy.token_logprobs(torch.tensor(prompt_ids + completion_ids), len(prompt_ids))

Needs torch (Debian's python3-torch) and numpy; safetensors are read by ``read_safetensors`` below.
"""
import json
import math
import os
import struct
from typing import Dict, List, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM")


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Reads a safetensors file into float32 numpy arrays by name (F32, F16 and BF16 tensors; BF16
    widened exactly). Raises ValueError naming the file and tensor for another dtype or a header
    whose offsets leave the file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end <= len(data) - base:
            raise ValueError(f"{path}: tensor {name!r}: data_offsets {entry['data_offsets']} leave the file")
        raw = data[base + begin:base + end]
        dtype, shape = entry["dtype"], entry["shape"]
        if dtype == "F32":
            values = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name!r} is {dtype}; this reader takes F32, F16 and BF16")
        if values.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r}: {values.size} values for shape {shape}")
        out[name] = values.reshape(shape)
    return out


def load_state_dict(model_dir: str) -> Dict[str, np.ndarray]:
    """Every tensor of the directory's model.safetensors, or of the shards its index names."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    state = {}
    for name in files:
        state.update(read_safetensors(os.path.join(model_dir, name)))
    return state


def rope_inverse_frequencies(config: dict) -> torch.Tensor:
    """[head_dim / 2] float32: 1 / theta^(2i / head_dim), with llama3 rope_scaling applied as
    transformers' _compute_llama3_parameters does. ValueError naming another rope_scaling type."""
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    theta = float(config.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = config.get("rope_scaling")
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return inv_freq
    if kind != "llama3":
        raise ValueError(f"config.json: rope_scaling type {kind!r} is not implemented (none, default or llama3)")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))  # [size] f32
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., size] f32
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        hidden = config["hidden_size"]
        self.num_heads = config["num_attention_heads"]
        self.num_kv_heads = config.get("num_key_value_heads", self.num_heads)
        self.head_dim = config.get("head_dim") or hidden // self.num_heads
        bias = bool(config.get("attention_bias", False))
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # x [B, T, hidden]; cos, sin [T, head_dim]; mask [T, T] bool (True: may attend)
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, T, D]
        k = self.k_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)  # [B, Hkv, T, D]
        v = self.v_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(group, dim=1)  # query head h reads kv head h // group
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # [B, H, T, T]
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # [B, H, T, D]
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        hidden, inter = config["hidden_size"], config["intermediate_size"]
        bias = bool(config.get("mlp_bias", False))
        self.gate_proj = nn.Linear(hidden, inter, bias=bias)
        self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        eps = config.get("rms_norm_eps", 1e-6)
        self.input_layernorm = RMSNorm(config["hidden_size"], eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps)
        self.mlp = MLP(config)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, config: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config["num_hidden_layers"]))
        self.norm = RMSNorm(config["hidden_size"], config.get("rms_norm_eps", 1e-6))


class LlamaPolicy(nn.Module):
    """A float32 Llama causal LM whose ``state_dict()`` uses Hugging Face's tensor names.

    ``config``: the parsed config.json (architectures LlamaForCausalLM or MistralForCausalLM without a
    sliding window). Build with ``from_pretrained``; ValueError names a config key it cannot honour.
    """

    def __init__(self, config: dict):
        super().__init__()
        arch = (config.get("architectures") or ["?"])[0]
        if arch not in ARCHITECTURES:
            raise ValueError(f"config.json: architectures {arch!r}: this policy runs {', '.join(ARCHITECTURES)}")
        if config.get("sliding_window"):
            raise ValueError("config.json: sliding_window is not implemented")
        self.config = config
        self.model = LlamaModel(config)
        self.tied = bool(config.get("tie_word_embeddings", False))
        if not self.tied:
            self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)
        self.register_buffer("inv_freq", rope_inverse_frequencies(config), persistent=False)

    @classmethod
    def from_pretrained(cls, model_dir: str) -> "LlamaPolicy":
        """Loads ``model_dir``'s config.json and safetensors (bf16/f16 widened exactly to float32).
        ValueError naming a tensor the checkpoint lacks or does not need, or a shape that differs."""
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        policy = cls(config)
        state = load_state_dict(model_dir)
        own = policy.state_dict()
        missing = sorted(set(own) - set(state))
        extra = sorted(set(state) - set(own))
        if missing or extra:
            raise ValueError(f"{model_dir}: tensors missing {missing[:5]}, unexpected {extra[:5]}")
        with torch.no_grad():
            for name, value in state.items():
                if tuple(own[name].shape) != value.shape:
                    raise ValueError(f"{model_dir}: tensor {name!r} has shape {list(value.shape)}, "
                                     f"the config implies {list(own[name].shape)}")
                own[name].copy_(torch.from_numpy(np.ascontiguousarray(value)))
        return policy

    def hf_state_dict(self) -> Dict[str, torch.Tensor]:
        """The parameters by Hugging Face name (the tied head is the embedding, listed once), float32."""
        return {name: p for name, p in self.named_parameters()}

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """input_ids [B, T] int64, positions 0..T-1 -> logits [B, T, vocab_size] float32. Rows may be
        right-padded: the causal mask keeps a padded tail from touching the tokens before it."""
        t = input_ids.shape[1]
        positions = torch.arange(t, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)  # [T, head_dim / 2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [T, head_dim]
        cos, sin = emb.cos(), emb.sin()
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        x = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        weight = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return x @ weight.t()

    def batch_token_logprobs(self, sequences: Sequence[Sequence[int]], prompt_lens: Sequence[int]) -> List[torch.Tensor]:
        """For each token-id sequence, the raw log-softmax logprob of each token after its prompt
        (``[len(seq) - prompt_len]`` float32, differentiable): one right-padded forward pass."""
        if len(sequences) != len(prompt_lens):
            raise ValueError("batch_token_logprobs: one prompt_len per sequence")
        longest = max(len(s) for s in sequences)
        ids = torch.zeros(len(sequences), longest, dtype=torch.int64)
        for i, s in enumerate(sequences):
            ids[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.int64)
        logprobs = torch.log_softmax(self.forward(ids), dim=-1)  # [B, T, vocab]
        out = []
        for i, (s, p) in enumerate(zip(sequences, prompt_lens)):
            if not 1 <= p <= len(s):
                raise ValueError(f"sequence {i}: prompt_len {p} must be in [1, {len(s)}]")
            targets = ids[i, p:len(s)]
            out.append(logprobs[i, p - 1:len(s) - 1].gather(-1, targets[:, None])[:, 0])
        return out

    def token_logprobs(self, input_ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
        """input_ids [T] int64 (prompt then completion) -> [T - prompt_len] float32: log p(token t | tokens
        before it) for t = prompt_len..T-1, the raw log-softmax of the logits (no temperature),
        differentiable with respect to the parameters."""
        return self.batch_token_logprobs([input_ids.tolist()], [prompt_len])[0]
