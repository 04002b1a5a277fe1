"""The Python API against vLLM's names and defaults, and its errors: each names the field, prompt
or path at fault."""
import inspect
import json
import re
import subprocess

import pytest

import ditto
from ditto import LLM, CompletionOutput, Logprob, RequestOutput, SamplingParams
from conftest import ditto_command

# vLLM's names (vllm/entrypoints/llm.py, vllm/sampling_params.py, vllm/outputs.py) and defaults.
VLLM_LLM_ARGS = {"model": inspect.Parameter.empty, "tokenizer": None, "dtype": "auto", "seed": 0,
                 "tensor_parallel_size": 1, "max_model_len": None, "enable_prefix_caching": True,
                 "block_size": 16, "max_num_seqs": 256, "max_num_batched_tokens": 2048, "max_logprobs": 20,
                 "quantization": None, "skip_tokenizer_init": False,
                 "kv_cache_memory_bytes": None}
VLLM_SAMPLING_DEFAULTS = {"n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
                          "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": None, "stop": [],
                          "stop_token_ids": [], "ignore_eos": False, "max_tokens": 16, "min_tokens": 0,
                          "logprobs": None, "prompt_logprobs": None, "detokenize": True,
                          "skip_special_tokens": True, "spaces_between_special_tokens": True,
                          "include_stop_str_in_output": False}
VLLM_REQUEST_OUTPUT = ["request_id", "prompt", "prompt_token_ids", "prompt_logprobs", "outputs", "finished"]
VLLM_COMPLETION_OUTPUT = ["index", "text", "token_ids", "cumulative_logprob", "logprobs", "finish_reason",
                          "stop_reason"]
VLLM_LOGPROB = ["logprob", "rank", "decoded_token"]


def test_names_and_defaults_are_vllms():
    init = inspect.signature(LLM.__init__).parameters
    for name, default in VLLM_LLM_ARGS.items():
        assert name in init, name
        assert init[name].default == default, (name, init[name].default)
    gen = inspect.signature(LLM.generate).parameters
    assert list(gen)[1:4] == ["prompts", "sampling_params", "use_tqdm"] and gen["use_tqdm"].default is True
    chat = inspect.signature(LLM.chat).parameters
    for name in ["messages", "sampling_params", "use_tqdm", "chat_template_kwargs", "add_generation_prompt",
                 "continue_final_message", "tools"]:
        assert name in chat, name
    p = SamplingParams()
    for name, default in VLLM_SAMPLING_DEFAULTS.items():
        assert getattr(p, name) == default, name
    fields = {f.name for f in __import__("dataclasses").fields(RequestOutput)}
    assert set(VLLM_REQUEST_OUTPUT) <= fields
    assert set(VLLM_COMPLETION_OUTPUT) <= {f.name for f in __import__("dataclasses").fields(CompletionOutput)}
    assert set(VLLM_LOGPROB) <= {f.name for f in __import__("dataclasses").fields(Logprob)}
    assert ditto.__version__


@pytest.mark.parametrize("kwargs, field", [
    ({"n": 0}, "n"), ({"temperature": -1.0}, "temperature"), ({"top_p": 1.5}, "top_p"), ({"top_p": 0}, "top_p"),
    ({"top_k": -2}, "top_k"), ({"min_p": 2.0}, "min_p"), ({"max_tokens": 0}, "max_tokens"),
    ({"min_tokens": 5, "max_tokens": 2}, "min_tokens"), ({"presence_penalty": 3.0}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"), ({"repetition_penalty": 0.0}, "repetition_penalty"),
    ({"logprobs": -1}, "logprobs"), ({"prompt_logprobs": -3}, "prompt_logprobs"), ({"stop": [""]}, "stop"),
    ({"temperature": "hot"}, "temperature"), ({"seed": -2**63 - 1}, "seed"), ({"n": 1.5}, "n"),
    ({"stop": 5}, "stop"), ({"best_of": 3}, "best_of"), ({"logit_bias": {1: float("inf")}}, "logit_bias"),
    ({"logit_bias": {"x": 1.0}}, "logit_bias"), ({"bad_words": "x"}, "bad_words"), ({"bad_words": [""]}, "bad_words"),
    ({"allowed_token_ids": [-1]}, "allowed_token_ids"), ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"truncate_prompt_tokens": 0}, "truncate_prompt_tokens"), ({"ignore_eos": "yes"}, "ignore_eos"),
])
def test_bad_sampling_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


def test_sampling_params_shapes():
    assert SamplingParams(stop="###").stop == ["###"]
    p = SamplingParams(temperature=0.7, max_tokens=100, seed=42)
    q = p.clone()
    q.stop.append("x")
    assert p.stop == [] and q.max_tokens == 100


def test_gpu_only_arguments_warn_once_each_and_unknown_ones_are_type_errors(model_dir, capsys):
    llm = LLM(model=model_dir, gpu_memory_utilization=0.9, enforce_eager=True, swap_space=4,
              kv_cache_memory="64MiB")
    err = capsys.readouterr().err
    for name in ("gpu_memory_utilization", "enforce_eager", "swap_space"):
        assert sum(name in line for line in err.splitlines()) == 1, err
    assert llm.generate("Hi", SamplingParams(max_tokens=1), use_tqdm=False)[0].outputs[0].token_ids
    with pytest.raises(TypeError, match="no_such_argument"):
        LLM(model=model_dir, no_such_argument=1)


def test_bad_engine_arguments(model_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nowhere")):
        LLM(model=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="dtype"):
        LLM(model=model_dir, dtype="float16")
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        LLM(model=model_dir, tensor_parallel_size=2)
    with pytest.raises(ValueError, match="max_model_len"):
        LLM(model=model_dir, max_model_len=10**9)
    with pytest.raises(ValueError, match="kv_cache_memory"):
        LLM(model=model_dir, kv_cache_memory="lots")
    with pytest.raises(ValueError, match="max_num_seqs"):
        LLM(model=model_dir, max_num_seqs=0)
    with pytest.raises(ValueError, match="long_prefill_token_threshold"):
        LLM(model=model_dir, long_prefill_token_threshold=-1)


def test_bad_prompts_name_the_prompt(llm):
    p = SamplingParams(max_tokens=2)
    with pytest.raises(ValueError, match="prompt 1"):
        llm.generate(["fine", 42], p, use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0.*vocabulary"):
        llm.generate({"prompt_token_ids": [1, 10**7]}, p, use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0.*empty"):
        llm.generate({"prompt_token_ids": []}, p, use_tqdm=False)
    with pytest.raises(ValueError, match="same"):
        llm.generate(["a", "b"], [p], use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0.*context length"):
        llm.generate({"prompt_token_ids": [5] * 50000}, p, use_tqdm=False)
    with pytest.raises(ValueError, match="messages"):
        llm.chat([{"content": "no role"}], p, use_tqdm=False)
    with pytest.raises(ValueError, match="logprobs"):
        llm.generate("x", SamplingParams(logprobs=21), use_tqdm=False)  # max_logprobs 20


def test_outputs_have_vllms_shapes(llm):
    params = SamplingParams(temperature=0.8, seed=7, max_tokens=5, n=2, logprobs=2, prompt_logprobs=1,
                            ignore_eos=True)
    [out] = llm.generate("The capital of France is", params, use_tqdm=False)
    assert isinstance(out, RequestOutput) and out.finished and out.prompt == "The capital of France is"
    assert out.prompt_token_ids == llm.get_tokenizer().encode("The capital of France is")
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(out.prompt_token_ids)
    for pos, entry in zip(out.prompt_token_ids[1:], out.prompt_logprobs[1:]):
        assert pos in entry and len(entry) <= 2
    assert [c.index for c in out.outputs] == [0, 1]
    for c in out.outputs:
        assert len(c.token_ids) == 5 and c.finish_reason == "length" and c.stop_reason is None
        assert len(c.logprobs) == 5
        total = 0.0
        for token, entry in zip(c.token_ids, c.logprobs):
            assert token in entry and 1 <= len(entry) <= 3
            lp = entry[token]
            assert isinstance(lp, Logprob) and lp.rank >= 1 and lp.decoded_token == llm.get_tokenizer().decode([token])
            total += lp.logprob
        assert c.cumulative_logprob == pytest.approx(total, rel=1e-6)
    assert out.seed == 7
    [plain] = llm.generate("x", SamplingParams(max_tokens=2), use_tqdm=False)
    assert plain.outputs[0].logprobs is None and plain.outputs[0].cumulative_logprob is None
    assert plain.prompt_logprobs is None


def test_token_prompts_and_text_prompts_agree(llm):
    tok = llm.get_tokenizer()
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    by_text = llm.generate(["Hello there"], params, use_tqdm=False)[0]
    by_ids = llm.generate([{"prompt_token_ids": tok.encode("Hello there")}], params, use_tqdm=False)[0]
    assert by_ids.prompt is None and by_ids.outputs[0].token_ids == by_text.outputs[0].token_ids
    assert by_text.outputs[0].text == tok.decode(by_text.outputs[0].token_ids, skip_special_tokens=True)


def test_stop_strings_and_reasons(llm):
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    text = llm.generate("Once upon", params, use_tqdm=False)[0].outputs[0].text
    stop = text[4:7]
    out = llm.generate("Once upon", SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, stop=stop),
                       use_tqdm=False)[0].outputs[0]
    assert out.text == text[:text.find(stop)] and out.finish_reason == "stop" and out.stop_reason == stop


def test_chat_and_tokenizer(llm):
    tok = llm.get_tokenizer()
    messages = [{"role": "user", "content": "Hi!"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert text.startswith("<|im_start|>user\nHi!<|im_end|>") and "<think>\n\n</think>" in text
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False)
    assert ids == tok.encode(text, add_special_tokens=False)
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    [chat] = llm.chat(messages, params, use_tqdm=False, chat_template_kwargs={"enable_thinking": False})
    assert chat.prompt == text and chat.prompt_token_ids == ids
    [same] = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    assert same.outputs[0].token_ids == chat.outputs[0].token_ids
    two = llm.chat([messages, messages + [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "?"}]],
                   params, use_tqdm=False)
    assert len(two) == 2 and two[0].outputs[0].token_ids == llm.chat(messages, params, use_tqdm=False)[0].outputs[0].token_ids


def test_python_and_cli_give_the_same_bits(llm, model_dir):
    """The package's `ditto` command and LLM.generate run the same engine: same tokens, same text."""
    prompts = ["The future of AI is", "Machine learning enables"]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True), use_tqdm=False)
    args = [ditto_command(), "generate", "--model", model_dir, "--max-tokens", "8", "--ignore-eos", "--json"]
    for p in prompts:
        args += ["--prompt", p]
    lines = subprocess.run(args, check=True, capture_output=True, text=True, timeout=600).stdout.splitlines()
    for out, line in zip(outs, lines):
        cli = json.loads(line)
        assert cli["token_ids"] == out.outputs[0].token_ids and cli["text"] == out.outputs[0].text


def test_use_tqdm_prints_vllms_bar(llm, capsys):
    llm.generate(["a", "b", "c"], SamplingParams(max_tokens=3), use_tqdm=True)
    err = capsys.readouterr().err
    assert "Processed prompts" in err and "3/3" in err and "toks/s" in err, err


def test_one_llm_from_two_threads_serializes_its_calls(llm):
    import threading
    params = SamplingParams(max_tokens=24, seed=3, ignore_eos=True)
    ref = [o.outputs[0].token_ids for o in llm.generate(["one", "two", "three"], params, use_tqdm=False)]
    results, errors = [], []

    def work():
        try:
            for _ in range(3):
                results.append([o.outputs[0].token_ids
                                for o in llm.generate(["one", "two", "three"], params, use_tqdm=False)])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 6 and all(r == ref for r in results)


def test_max_tokens_none_takes_what_the_context_and_the_cache_leave(model_dir):
    small = LLM(model=model_dir, kv_cache_memory="256KiB")  # 32 tokens of KV cache, a 40960-token context
    out = small.generate("hi", SamplingParams(max_tokens=None, ignore_eos=True), use_tqdm=False)[0]
    assert len(out.prompt_token_ids) + len(out.outputs[0].token_ids) == 32 and out.outputs[0].finish_reason == "length"
    ctx = LLM(model=model_dir, kv_cache_memory="64MiB", max_model_len=20)
    out = ctx.generate("hi", SamplingParams(max_tokens=None, ignore_eos=True), use_tqdm=False)[0]
    assert len(out.prompt_token_ids) + len(out.outputs[0].token_ids) == 20


def test_stop_strings_wait_for_min_tokens(llm):
    text = llm.generate("Hello world", SamplingParams(max_tokens=20, temperature=0, ignore_eos=True),
                        use_tqdm=False)[0].outputs[0]
    stop = text.text[1:4]
    out = llm.generate("Hello world", SamplingParams(max_tokens=20, temperature=0, ignore_eos=True, stop=[stop],
                                                     min_tokens=10), use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) >= 10 and out.token_ids[:10] == text.token_ids[:10]


def test_vllm_values_and_python_types_are_taken(llm, model_dir):
    import pathlib
    import numpy as np
    assert SamplingParams(seed=-1).seed is None and SamplingParams(logprobs=True).logprobs == 1
    assert SamplingParams(stop=("a", "b")).stop == ["a", "b"]
    SamplingParams(logit_bias={}, bad_words=[], allowed_token_ids=None)
    with pytest.raises(ValueError, match="seed"):
        SamplingParams(seed=2**64)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=2**63)
    with pytest.raises(ValueError, match="stop_token_ids"):
        SamplingParams(stop_token_ids=5)
    with pytest.raises(ValueError, match="stop_token_ids"):
        SamplingParams(stop_token_ids=[2**40])
    with pytest.raises(ValueError, match="logprobs=-1"):
        SamplingParams(logprobs=-1)
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    ids = llm.get_tokenizer().encode("Hello")
    a = llm.generate({"prompt_token_ids": np.array(ids)}, params, use_tqdm=False)[0].outputs[0].token_ids
    b = llm.generate({"prompt_token_ids": [np.int64(t) for t in ids]}, params, use_tqdm=False)[0].outputs[0].token_ids
    assert a == b == llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)[0].outputs[0].token_ids
    with pytest.raises(ValueError, match="prompt 0.*out of vocabulary"):
        llm.generate({"prompt_token_ids": [1, 2**40]}, params, use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0.*Unicode"):
        llm.generate("a\ud800b", params, use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0.*multi_modal_data"):
        llm.generate({"prompt": "hi", "multi_modal_data": {"image": None}}, params, use_tqdm=False)
    with pytest.raises(ValueError, match="sampling_params.*dict"):
        llm.generate(["a"], {"max_tokens": 3}, use_tqdm=False)
    with pytest.raises(ValueError, match="max_logprobs"):
        LLM(model=model_dir, max_logprobs=None)
    LLM(model=pathlib.Path(model_dir), tokenizer=model_dir + "/", seed=None, kv_cache_memory="16MiB")


def test_tokenizer_has_the_common_transformers_methods(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("Hello world")
    assert tok("Hello world")["input_ids"] == ids and tok(["a", "b"])["input_ids"] == [tok.encode("a"), tok.encode("b")]
    assert tok.decode(ids[0]) == tok.decode([ids[0]]) and tok.batch_decode([ids, ids]) == [tok.decode(ids)] * 2
    assert tok.convert_tokens_to_ids(tok.convert_ids_to_tokens(ids)) == ids
    assert tok.eos_token == "<|im_end|>" and tok.convert_tokens_to_ids(tok.eos_token) == tok.eos_token_id
    assert tok.pad_token == "<|endoftext|>" and tok.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    assert tok.tokenize("Hello world") == tok.convert_ids_to_tokens(ids) and tok.name_or_path
    vocab = tok.get_vocab()
    assert vocab["<|im_end|>"] == tok.eos_token_id and all(vocab[t] == i for t, i in zip(tok.tokenize("Hello"), ids))
    assert "<|im_start|>" in tok.chat_template


def test_default_sampling_params_come_from_generation_config(llm, model_dir, capsys):
    d = llm.get_default_sampling_params()  # the generator writes Qwen3's generation_config.json
    assert (d.temperature, d.top_p, d.top_k, d.max_tokens) == (0.6, 0.95, 20, 16)
    assert LLM(model=model_dir, generation_config="vllm", kv_cache_memory="16MiB").get_default_sampling_params() \
        == SamplingParams()
    o = LLM(model=model_dir, override_generation_config={"temperature": 0.0, "max_new_tokens": 3},
            kv_cache_memory="16MiB")
    assert (o.get_default_sampling_params().temperature, o.get_default_sampling_params().max_tokens) == (0.0, 3)
    out = o.generate("Hello", use_tqdm=False)[0].outputs[0]  # greedy, 3 tokens: the defaults apply
    greedy = o.generate("Hello", SamplingParams(temperature=0.0, max_tokens=3), use_tqdm=False)[0].outputs[0]
    assert out.token_ids == greedy.token_ids
    with pytest.raises(ValueError, match="temperature"):
        LLM(model=model_dir, override_generation_config={"temperature": -1}, kv_cache_memory="16MiB")
    LLM(model=model_dir, served_model_name="x", task="generate", kv_cache_memory="16MiB")
    assert "served_model_name" in capsys.readouterr().err
    with pytest.raises(ValueError, match="hf_overrides"):
        LLM(model=model_dir, hf_overrides={"num_hidden_layers": 1})
    assert llm.reset_prefix_cache() is True


def test_num_cached_tokens_counts_the_prefix_cache_hits(model_dir):
    """vLLM's RequestOutput.num_cached_tokens: with one sequence at a time the second copy of a prompt
    finds the first one's whole blocks in the prefix cache (16-token blocks, never the last token);
    its text is the same either way."""
    one_at_a_time = LLM(model=model_dir, kv_cache_memory="256MiB", max_num_seqs=1)
    ids = list(range(1000, 1050))  # 50 tokens: 3 whole blocks before the last token
    outs = one_at_a_time.generate([{"prompt_token_ids": ids}] * 2,
                                  SamplingParams(max_tokens=3, temperature=0), use_tqdm=False)
    assert [o.num_cached_tokens for o in outs] == [0, 48]
    assert outs[0].outputs[0].token_ids == outs[1].outputs[0].token_ids


def test_vllms_per_row_fields_change_the_output(llm):
    """logit_bias, allowed_token_ids, bad_words and truncate_prompt_tokens (issue 30), each as vLLM's."""
    greedy = dict(temperature=0, max_tokens=5, ignore_eos=True)
    plain = llm.generate("The sea is", SamplingParams(**greedy), use_tqdm=False)[0].outputs[0].token_ids
    forced = llm.generate("The sea is", SamplingParams(**greedy, logit_bias={77: 100.0}), use_tqdm=False)
    assert forced[0].outputs[0].token_ids == [77] * 5
    allowed = [11, 13, 220, 77]
    sampled = llm.generate("The sea is", SamplingParams(temperature=1.0, seed=4, max_tokens=8, ignore_eos=True,
                                                        allowed_token_ids=allowed), use_tqdm=False)
    assert set(sampled[0].outputs[0].token_ids) <= set(allowed)
    word = llm.get_tokenizer().decode(plain[:1]).strip()
    if word:
        avoided = llm.generate("The sea is", SamplingParams(**greedy, bad_words=[word]), use_tqdm=False)
        assert avoided[0].outputs[0].token_ids[0] != plain[0], (word, plain)
    ids = llm.get_tokenizer().encode("one two three four five six seven eight")
    cut = llm.generate("one two three four five six seven eight",
                       SamplingParams(**greedy, truncate_prompt_tokens=3, logprobs=1), use_tqdm=False)[0]
    assert cut.prompt_token_ids == ids[-3:]
    tail = llm.generate({"prompt_token_ids": ids[-3:]}, SamplingParams(**greedy, logprobs=1), use_tqdm=False)[0]
    assert cut.outputs[0].token_ids == tail.outputs[0].token_ids
    assert cut.outputs[0].cumulative_logprob == tail.outputs[0].cumulative_logprob


def test_logprobs_mode_processed_reports_the_distribution_sampled_from(model_dir):
    import math
    params = SamplingParams(temperature=0.7, top_k=4, seed=3, max_tokens=4, ignore_eos=True, logprobs=4)
    raw = LLM(model=model_dir, kv_cache_memory="64MiB").generate("Hello", params, use_tqdm=False)[0].outputs[0]
    llm = LLM(model=model_dir, kv_cache_memory="64MiB", logprobs_mode="processed_logprobs")
    processed = llm.generate("Hello", params, use_tqdm=False)[0].outputs[0]
    assert processed.token_ids == raw.token_ids  # the mode changes what is reported, not what is drawn
    for step in processed.logprobs:
        assert abs(sum(math.exp(lp.logprob) for lp in step.values()) - 1.0) < 1e-5  # top_k 4: all the mass
    for step in raw.logprobs:
        assert sum(math.exp(lp.logprob) for lp in step.values()) < 1.0 - 1e-6
    with pytest.raises(ValueError, match="logprobs_mode"):
        LLM(model=model_dir, kv_cache_memory="64MiB", logprobs_mode="softmax")


def test_beam_search_has_vllms_shapes_and_is_greedy_at_width_one(llm):
    from ditto import BeamSearchParams, BeamSearchOutput
    from ditto.sampling_params import BeamSearchParams as FromSamplingParams
    assert FromSamplingParams is BeamSearchParams
    prompts = [{"prompt": "The sea is"}, {"prompt_token_ids": [785, 3974, 13876]}]
    one = llm.beam_search(prompts, BeamSearchParams(beam_width=1, max_tokens=5, ignore_eos=True))
    greedy = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=5, ignore_eos=True), use_tqdm=False)
    for o, g in zip(one, greedy):
        assert isinstance(o, BeamSearchOutput) and len(o.sequences) == 1
        s = o.sequences[0]
        assert s.tokens == g.prompt_token_ids + g.outputs[0].token_ids
        assert len(s.logprobs) == 5 and all(isinstance(d, dict) for d in s.logprobs)
        assert s.text == llm.get_tokenizer().decode(s.tokens, skip_special_tokens=False)
    wide = llm.beam_search(prompts, BeamSearchParams(beam_width=3, max_tokens=4))
    alone = [llm.beam_search([p], BeamSearchParams(beam_width=3, max_tokens=4))[0] for p in prompts]
    for w, a in zip(wide, alone):
        assert len(w.sequences) == 3
        assert [(s.tokens, s.cum_logprob) for s in w.sequences] == [(s.tokens, s.cum_logprob) for s in a.sequences]
    with pytest.raises(ValueError, match="beam_width"):
        llm.beam_search(prompts, BeamSearchParams(beam_width=11, max_tokens=2))


def test_system_fingerprint_is_openais_format_and_the_weights(llm, model_dir):
    """LLM.system_fingerprint ("fp_" + 16 hex digits) is a function of the weights: a second LLM on
    the same model has the same one (what `ditto serve` puts in every response)."""
    assert re.fullmatch(r"fp_[0-9a-f]{16}", llm.system_fingerprint), llm.system_fingerprint
    assert LLM(model=model_dir, kv_cache_memory="64MiB").system_fingerprint == llm.system_fingerprint
