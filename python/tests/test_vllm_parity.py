"""Issue 30, point 6: the Python API behaves as vLLM's where a script can tell — the prefix cache
lives as long as the LLM (one engine per LLM) and reset_prefix_cache() drops it, the tokenizer has
transformers' special-token attributes, kv_cache_memory_bytes is vLLM's name for the KV cache size,
and negative seeds mean what they mean in vLLM."""
import struct

import pytest

from ditto import LLM, BeamSearchParams, SamplingParams

# A prompt of 3 whole 16-token blocks and 2 more tokens: a second run finds 48 tokens cached.
LONG = {"prompt_token_ids": list(range(2000, 2050))}


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def same_bits(a, b) -> None:
    """Two RequestOutputs with the same tokens, text and logprob bits (float32 values held as
    Python floats: their float64 bits are equal exactly when the float32 bits are)."""
    assert a.prompt_token_ids == b.prompt_token_ids
    assert len(a.outputs) == len(b.outputs)
    for x, y in zip(a.outputs, b.outputs):
        assert (x.token_ids, x.text, x.finish_reason) == (y.token_ids, y.text, y.finish_reason)
        assert bits(x.cumulative_logprob) == bits(y.cumulative_logprob)
        assert len(x.logprobs) == len(y.logprobs)
        for p, q in zip(x.logprobs, y.logprobs):
            assert list(p) == list(q)
            assert [bits(v.logprob) for v in p.values()] == [bits(v.logprob) for v in q.values()]


def test_prefix_cache_carries_across_generate_calls_and_reset_drops_it(model_dir):
    llm = LLM(model=model_dir, kv_cache_memory="64MiB")
    params = SamplingParams(temperature=0.8, seed=5, max_tokens=6, logprobs=3, n=2, ignore_eos=True)
    first = llm.generate(LONG, params, use_tqdm=False)[0]
    assert first.num_cached_tokens == 0
    second = llm.generate(LONG, params, use_tqdm=False)[0]  # another call: the LLM's engine kept the cache
    assert second.num_cached_tokens == 48
    same_bits(first, second)
    assert llm.reset_prefix_cache() is True
    third = llm.generate(LONG, params, use_tqdm=False)[0]
    assert third.num_cached_tokens == 0
    same_bits(first, third)
    # A chat shares the engine: the same cache.
    chat = [{"role": "user", "content": "Tell me about rivers, lakes and the sea, at length. " * 4}]
    a = llm.chat(chat, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)[0]
    b = llm.chat(chat, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)[0]
    assert a.num_cached_tokens == 0 and b.num_cached_tokens > 0 and a.outputs[0].token_ids == b.outputs[0].token_ids


def test_reset_prefix_cache_is_refused_while_a_generate_runs(model_dir):
    """vLLM's reset_prefix_cache returns False while requests run: here while a generate() on
    another thread holds the engine."""
    import threading
    import time
    llm = LLM(model=model_dir, kv_cache_memory="64MiB")
    params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    t = threading.Thread(target=lambda: llm.generate(LONG, params, use_tqdm=False))
    t.start()
    while not llm._lock.locked() and t.is_alive():
        time.sleep(0.0005)
    refused = llm.reset_prefix_cache()
    still_running = t.is_alive()
    t.join()
    assert still_running and refused is False
    assert llm.reset_prefix_cache() is True


def test_tokenizer_special_tokens_are_transformers(llm):
    """The Qwen3 tokenizer's values as transformers 4.x gives them (special_tokens_map,
    all_special_tokens in its order, ids through the vocabulary)."""
    tok = llm.get_tokenizer()
    extra = ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
             "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
             "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
    assert tok.special_tokens_map == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                                      "additional_special_tokens": extra}
    assert tok.all_special_tokens == ["<|im_end|>", "<|endoftext|>"] + [t for t in extra if t != "<|im_end|>"]
    assert tok.all_special_ids == [tok.convert_tokens_to_ids(t) for t in tok.all_special_tokens]
    assert tok.all_special_ids[:2] == [151645, 151643]
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 151645)
    assert (tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", 151643)
    assert (tok.bos_token, tok.bos_token_id) == (None, None)  # Qwen3 has none
    assert (tok.unk_token, tok.unk_token_id) == (None, None)
    assert tok.sep_token is None and tok.cls_token is None and tok.mask_token is None
    assert tok.additional_special_tokens == extra
    assert tok.additional_special_tokens_ids == [tok.convert_tokens_to_ids(t) for t in extra]


def test_kv_cache_memory_bytes_is_vllms_name_for_the_kv_cache_size(model_dir):
    a = LLM(model=model_dir, kv_cache_memory_bytes=16 << 20)
    assert a._engine.args.kv_cache_memory == 16 << 20
    b = LLM(model=model_dir, kv_cache_memory="16MiB", kv_cache_memory_bytes=16 << 20)  # both, agreeing
    assert b._engine.args.kv_cache_memory == 16 << 20
    assert LLM(model=model_dir)._engine.args.kv_cache_memory == 2 << 30  # neither: the default
    with pytest.raises(ValueError, match="kv_cache_memory_bytes.*same knob"):
        LLM(model=model_dir, kv_cache_memory="32MiB", kv_cache_memory_bytes=16 << 20)
    with pytest.raises(ValueError, match="kv_cache_memory_bytes must be an integer"):
        LLM(model=model_dir, kv_cache_memory_bytes="16MiB")
    with pytest.raises(ValueError, match="kv_cache_memory"):
        LLM(model=model_dir, kv_cache_memory_bytes=1)  # holds no block


def test_negative_seeds_as_vllm(llm, model_dir):
    """vLLM: seed=-1 is no seed; another negative seed s seeds torch's generator, which reads it as
    the unsigned 2^64 + s (two's complement); below -2^63 torch refuses it. LLM(seed=-1) is refused:
    vLLM's engine seeds numpy with it, which takes [0, 2^32 - 1]."""
    p = dict(temperature=1.0, max_tokens=8, ignore_eos=True)
    neg = llm.generate("Once upon a time", SamplingParams(**p, seed=-5), use_tqdm=False)[0]
    pos = llm.generate("Once upon a time", SamplingParams(**p, seed=2**64 - 5), use_tqdm=False)[0]
    other = llm.generate("Once upon a time", SamplingParams(**p, seed=5), use_tqdm=False)[0]
    assert neg.seed == 2**64 - 5 and SamplingParams(seed=-5).seed == -5  # the user's value is kept
    assert neg.outputs[0].token_ids == pos.outputs[0].token_ids
    assert neg.outputs[0].token_ids != other.outputs[0].token_ids
    assert SamplingParams(seed=-2**63).seed == -2**63
    with pytest.raises(ValueError, match="seed"):
        SamplingParams(seed=-2**63 - 1)
    unseeded = SamplingParams(**p, seed=-1)
    assert unseeded.seed is None
    assert llm.generate("Once upon a time", unseeded, use_tqdm=False)[0].seed not in (None, 2**64 - 1)
    for bad in (-1, -7):
        with pytest.raises(ValueError, match="seed"):
            LLM(model=model_dir, seed=bad, kv_cache_memory="16MiB")


def test_cache_salt_in_a_prompt_dict_keeps_cached_prefixes_apart(model_dir):
    """vLLM's prompt-level cache_salt: a salted prompt shares prefix-cache blocks only with the same
    salt; the bits of the answer never depend on it."""
    llm = LLM(model=model_dir, kv_cache_memory="64MiB")
    params = SamplingParams(temperature=0.8, seed=5, max_tokens=6, logprobs=3)
    first = llm.generate({**LONG, "cache_salt": "alice"}, params, use_tqdm=False)[0]
    again = llm.generate({**LONG, "cache_salt": "alice"}, params, use_tqdm=False)[0]
    other = llm.generate({**LONG, "cache_salt": "bob"}, params, use_tqdm=False)[0]
    plain = llm.generate(LONG, params, use_tqdm=False)[0]
    assert (first.num_cached_tokens, again.num_cached_tokens, other.num_cached_tokens,
            plain.num_cached_tokens) == (0, 48, 0, 0)
    same_bits(first, again)
    same_bits(first, other)
    same_bits(first, plain)
    for bad in ("", 5):
        with pytest.raises(ValueError, match="cache_salt"):
            llm.generate({**LONG, "cache_salt": bad}, params, use_tqdm=False)
    with pytest.raises(ValueError, match="cache_salt"):
        llm.beam_search([{"prompt": "Hi", "cache_salt": "alice"}], BeamSearchParams(beam_width=2, max_tokens=2))
