"""Shared by the float64 reference's self-tests (test_reference_selftest.py,
test_reference_forward.py, test_reference_moe.py): tiny Qwen3 / Llama / Qwen3-MoE configs, a
writer of random test models, and an independent scalar (pure Python) forward pass.
"""

from __future__ import annotations

import math

import numpy as np

from model_writer import random_weights, write_model


# ------------------------------------------------------------------------------------
# tiny configs
# ------------------------------------------------------------------------------------

def qwen3_config(**over):
    c = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "vocab_size": 37, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
        "max_position_embeddings": 4096, "rope_scaling": None,
    }
    c.update(over)
    return c


def llama_config(**over):
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 41, "hidden_size": 16, "intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
        "hidden_act": "silu", "max_position_embeddings": 131072,
        # head_dim 8, theta 1e4 -> wavelengths 6.3, 63, 628, 6283: with old_ctx 1024 and
        # factors (1, 4) these fall in the high / high / medium / low regimes.
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    }
    c.update(over)
    return c


def qwen3_moe_config(**over):
    c = qwen3_config(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                     num_experts=6, num_experts_per_tok=2, moe_intermediate_size=12,
                     decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)
    c.update(over)
    return c


def make_model(tmp_path, config, dtype="BF16", seed=0, num_shards=1, std=0.3, **kw):
    d = str(tmp_path)
    weights = random_weights(config, seed=seed, std=std, random_norms=True, **kw)
    exact = write_model(d, config, weights, dtype=dtype, num_shards=num_shards)
    return d, exact


# ------------------------------------------------------------------------------------
# an independent scalar (pure Python) implementation of the same semantics
# ------------------------------------------------------------------------------------

def scalar_forward(config, W, ids):
    """Plain-Python loops, written separately from reference.py (shares no code)."""
    H = config["hidden_size"]
    nh = config["num_attention_heads"]
    nkv = config["num_key_value_heads"]
    d = config["head_dim"]
    eps = config["rms_norm_eps"]
    qwen3 = config["model_type"] in ("qwen3", "qwen3_moe")

    def mat(name):
        return W[name].tolist()

    def matvec(M, x, bias=None):
        out = []
        for r, row in enumerate(M):
            acc = math.fsum(a * b for a, b in zip(row, x))
            out.append(acc + (bias[r] if bias is not None else 0.0))
        return out

    def rms(x, w):
        ms = math.fsum(t * t for t in x) / len(x)
        r = 1.0 / math.sqrt(ms + eps)
        return [t * r * wi for t, wi in zip(x, w)]

    # inverse frequencies, llama3 rule written branch by branch
    inv = []
    for i in range(d // 2):
        f = 1.0 / (config["rope_theta"] ** (2 * i / d))
        rs = config.get("rope_scaling")
        if rs:
            wl = 2 * math.pi / f
            lo_wl = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
            hi_wl = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
            if wl < hi_wl:
                pass
            elif wl > lo_wl:
                f = f / rs["factor"]
            else:
                sm = (rs["original_max_position_embeddings"] / wl - rs["low_freq_factor"]) / (
                    rs["high_freq_factor"] - rs["low_freq_factor"])
                f = (1 - sm) * f / rs["factor"] + sm * f
        inv.append(f)

    def rope(vec, p):
        half = d // 2
        out = [0.0] * d
        for i in range(half):
            c, s = math.cos(p * inv[i]), math.sin(p * inv[i])
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    def getb(name):
        return W[name].tolist() if name in W else None

    def mlp(pre, x):
        gt = matvec(mat(pre + "gate_proj.weight"), x, getb(pre + "gate_proj.bias"))
        up = matvec(mat(pre + "up_proj.weight"), x, getb(pre + "up_proj.bias"))
        act = [a / (1 + math.exp(-a)) * b for a, b in zip(gt, up)]
        return matvec(mat(pre + "down_proj.weight"), act, getb(pre + "down_proj.bias"))

    def is_sparse(li):
        if config["model_type"] != "qwen3_moe":
            return False
        if li in (config.get("mlp_only_layers") or []):
            return False
        return config["num_experts"] > 0 and (li + 1) % config.get("decoder_sparse_step", 1) == 0

    def moe(pre, x):
        rl = matvec(mat(pre + "gate.weight"), x)
        m = max(rl)
        ex = [math.exp(v - m) for v in rl]
        z = math.fsum(ex)
        pr = [v / z for v in ex]
        # the k largest probabilities; an equal probability ranks the lower id first
        top = sorted(range(len(pr)), key=lambda e: (-pr[e], e))[:config["num_experts_per_tok"]]
        ws = {e: pr[e] for e in top}
        if config.get("norm_topk_prob", False):
            tot = math.fsum(ws.values())
            ws = {e: w / tot for e, w in ws.items()}
        acc = [0.0] * H
        for e in sorted(top):
            y = mlp(pre + f"experts.{e}.", x)
            acc = [a + ws[e] * b for a, b in zip(acc, y)]
        return acc

    emb = W["model.embed_tokens.weight"]
    hs = [emb[t].tolist() for t in ids]
    T = len(ids)
    for li in range(config["num_hidden_layers"]):
        p = f"model.layers.{li}."
        Wq, Wk, Wv, Wo = (mat(p + f"self_attn.{n}_proj.weight") for n in "qkvo")
        Ks, Vs, new = [], [], []
        xs = [rms(h, W[p + "input_layernorm.weight"].tolist()) for h in hs]
        Qs = []
        for t in range(T):
            q = matvec(Wq, xs[t], getb(p + "self_attn.q_proj.bias"))
            k = matvec(Wk, xs[t], getb(p + "self_attn.k_proj.bias"))
            v = matvec(Wv, xs[t], getb(p + "self_attn.v_proj.bias"))
            qh = [q[h * d:(h + 1) * d] for h in range(nh)]
            kh = [k[h * d:(h + 1) * d] for h in range(nkv)]
            vh = [v[h * d:(h + 1) * d] for h in range(nkv)]
            if qwen3:
                qh = [rms(x, W[p + "self_attn.q_norm.weight"].tolist()) for x in qh]
                kh = [rms(x, W[p + "self_attn.k_norm.weight"].tolist()) for x in kh]
            Qs.append([rope(x, t) for x in qh])
            Ks.append([rope(x, t) for x in kh])
            Vs.append(vh)
        for t in range(T):
            cat = []
            for h in range(nh):
                g = h // (nh // nkv)
                sc = [math.fsum(a * b for a, b in zip(Qs[t][h], Ks[s][g])) / math.sqrt(d)
                      for s in range(t + 1)]
                m = max(sc)
                e = [math.exp(x - m) for x in sc]
                z = math.fsum(e)
                cat += [math.fsum(e[s] / z * Vs[s][g][j] for s in range(t + 1)) for j in range(d)]
            o = matvec(Wo, cat, getb(p + "self_attn.o_proj.bias"))
            h1 = [a + b for a, b in zip(hs[t], o)]
            x2 = rms(h1, W[p + "post_attention_layernorm.weight"].tolist())
            if is_sparse(li):
                dn = moe(p + "mlp.", x2)
            else:
                dn = mlp(p + "mlp.", x2)
            new.append([a + b for a, b in zip(h1, dn)])
        hs = new
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    out = []
    for h in hs:
        lg = matvec(head.tolist(), rms(h, W["model.norm.weight"].tolist()))
        m = max(lg)
        lse = m + math.log(math.fsum(math.exp(x - m) for x in lg))
        out.append([x - lse for x in lg])
    return np.array(out)
