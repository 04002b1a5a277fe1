"""vLLM's per-row request fields through `ditto serve` (issue 30): logit_bias, allowed_token_ids,
bad_words, truncate_prompt_tokens and return_token_ids each change the answer as vLLM's do, keep
the same-bits contract (a request's answer alone equals its answer among others), and
--logprobs-mode reports the distribution the sampler drew from.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import json
import math
import threading

import pytest

from serve_client import NAME, Server


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def complete(server, **fields):
    status, resp = server.post("/v1/completions", {"model": NAME, "prompt": "The capital of France is",
                                                   "max_tokens": 6, "temperature": 0, **fields})
    assert status == 200, resp
    return resp


def test_return_token_ids_are_the_prompt_and_output_ids(server):
    resp = complete(server, return_token_ids=True)
    choice = resp["choices"][0]
    status, tokenized = server.post("/tokenize", {"model": NAME, "prompt": "The capital of France is"})
    assert status == 200
    assert choice["prompt_token_ids"] == tokenized["tokens"]
    assert len(choice["token_ids"]) == resp["usage"]["completion_tokens"] == 6
    status, text = server.post("/detokenize", {"model": NAME, "tokens": choice["token_ids"]})
    assert status == 200 and text["prompt"] == choice["text"]
    status, chat = server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 4, "temperature": 0,
                                                        "return_token_ids": True,
                                                        "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 200, chat
    assert len(chat["prompt_token_ids"]) == chat["usage"]["prompt_tokens"]
    assert len(chat["choices"][0]["token_ids"]) == chat["usage"]["completion_tokens"]
    # Streamed: the chunks' ids concatenate to the whole response's.
    events = server.stream("/v1/completions", {"model": NAME, "prompt": "The capital of France is", "max_tokens": 6,
                                               "temperature": 0, "return_token_ids": True, "stream": True})
    streamed = [i for e in events if e != "[DONE]" for c in e["choices"] for i in c.get("token_ids", [])]
    assert streamed == choice["token_ids"]
    assert complete(server)["choices"][0]["token_ids"] is None  # only when asked (null, as vLLM)


def test_logit_bias_allowed_token_ids_and_bad_words_change_the_output(server):
    plain = complete(server, return_token_ids=True)["choices"][0]["token_ids"]
    forced = complete(server, return_token_ids=True, logit_bias={"1234": 100})["choices"][0]["token_ids"]
    assert forced == [1234] * 6, forced
    banned = complete(server, return_token_ids=True, logit_bias={str(plain[0]): -100})["choices"][0]["token_ids"]
    assert banned[0] != plain[0]
    allowed = [11, 13, 220, 1234]
    sampled = complete(server, return_token_ids=True, temperature=1.0, seed=3,
                       allowed_token_ids=allowed)["choices"][0]["token_ids"]
    assert set(sampled) <= set(allowed), sampled
    status, first = server.post("/detokenize", {"model": NAME, "tokens": plain[:1]})
    assert status == 200
    word = first["prompt"].strip()
    if word:  # a token with text: banning it as a word changes the first token
        avoided = complete(server, return_token_ids=True, bad_words=[word])["choices"][0]["token_ids"]
        assert avoided[0] != plain[0], (word, plain, avoided)
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "logit_bias": {"999999999": 1}})
    assert status == 400 and err["error"]["param"] == "logit_bias", err
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "allowed_token_ids": []})
    assert status == 400 and err["error"]["param"] == "allowed_token_ids", err
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "bad_words": ["  "]})
    assert status == 400 and err["error"]["param"] == "bad_words", err


def test_truncate_prompt_tokens_keeps_the_last_tokens(server):
    prompt = "one two three four five six seven eight nine ten eleven twelve"
    status, tokenized = server.post("/tokenize", {"model": NAME, "prompt": prompt})
    assert status == 200
    ids = tokenized["tokens"]
    cut = complete(server, prompt=prompt, truncate_prompt_tokens=5, logprobs=2, return_token_ids=True)
    assert cut["usage"]["prompt_tokens"] == 5
    assert cut["choices"][0]["prompt_token_ids"] == ids[-5:]
    last_five = complete(server, prompt=ids[-5:], logprobs=2)
    assert cut["choices"][0]["text"] == last_five["choices"][0]["text"]
    assert cut["choices"][0]["logprobs"] == last_five["choices"][0]["logprobs"]  # same bits (JSON floats)
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "truncate_prompt_tokens": 0})
    assert status == 400 and err["error"]["param"] == "truncate_prompt_tokens", err


def test_the_fields_keep_the_same_bits_among_other_requests(server):
    bodies = [
        {"logit_bias": {"1234": 5.5, "11": -3}, "temperature": 0.8, "seed": 1, "logprobs": 3},
        {"allowed_token_ids": list(range(200, 900)), "temperature": 1.0, "seed": 2, "logprobs": 1},
        {"bad_words": ["Paris", "the"], "temperature": 0.6, "top_k": 20, "seed": 3, "logprobs": 2},
        {"truncate_prompt_tokens": 3, "temperature": 0.9, "seed": 4, "logprobs": 1},
    ]
    alone = [complete(server, max_tokens=12, **b)["choices"][0] for b in bodies]
    results = [None] * (len(bodies) * 4)

    def run(k):
        results[k] = complete(server, max_tokens=12, **bodies[k % len(bodies)])["choices"][0]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, got in enumerate(results):
        want = alone[k % len(bodies)]
        assert (got["text"], got["logprobs"]) == (want["text"], want["logprobs"]), k


def test_logprobs_mode_processed_logprobs_reports_what_the_sampler_drew_from():
    body = {"model": NAME, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0.7,
            "top_k": 5, "seed": 9, "logprobs": 5}
    raw_server = Server()
    try:
        status, raw = raw_server.post("/v1/completions", body)
        assert status == 200, raw
    finally:
        raw_server.close()
    s = Server("--logprobs-mode", "processed_logprobs")
    try:
        status, processed = s.post("/v1/completions", body)
        assert status == 200, processed
    finally:
        s.close()
    # The mode changes what is reported, never what is drawn.
    assert processed["choices"][0]["text"] == raw["choices"][0]["text"]
    for top in processed["choices"][0]["logprobs"]["top_logprobs"]:
        # top_k 5: the five survivors hold all the probability after temperature.
        assert abs(sum(math.exp(v) for v in top.values()) - 1.0) < 1e-5, top
    for top in raw["choices"][0]["logprobs"]["top_logprobs"]:
        assert sum(math.exp(v) for v in top.values()) < 1.0 - 1e-6, top


def test_an_unknown_logprobs_mode_is_refused_by_name():
    import subprocess
    from serve_client import DITTO, MODEL
    proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", "--logprobs-mode", "softmax"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and "logprobs_mode" in proc.stderr and "processed_logprobs" in proc.stderr, proc.stderr


def test_use_beam_search_returns_n_beams_best_first_the_same_bits_under_load(server):
    """vLLM's use_beam_search: n is the beam width; each choice is a beam, best first; width 1 at
    temperature 0 is the greedy answer; the same request gives the same beams, alone or among
    others; a sampling field beam search cannot honour is refused by name."""
    body = {"prompt": "The capital of France is", "max_tokens": 5, "use_beam_search": True, "n": 3,
            "temperature": 0, "logprobs": 1, "seed": 1}
    first = complete(server, **body)
    assert [c["index"] for c in first["choices"]] == [0, 1, 2]
    assert len({tuple(c["logprobs"]["tokens"]) for c in first["choices"]}) == 3  # three different beams
    greedy = complete(server, max_tokens=5, ignore_eos=True, return_token_ids=True)
    width_one = complete(server, **{**body, "n": 1, "ignore_eos": True, "return_token_ids": True})
    assert width_one["choices"][0]["token_ids"] == greedy["choices"][0]["token_ids"]
    results = [None] * 6

    def run(k):
        results[k] = complete(server, **body) if k % 2 == 0 else complete(server, max_tokens=8, temperature=1.0)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(0, 6, 2):
        assert results[k]["choices"] == first["choices"], k
    events = server.stream("/v1/completions", {"model": NAME, **body, "prompt": "The capital of France is",
                                               "stream": True})
    streamed = {}
    for e in events:
        if e != "[DONE]":
            for c in e["choices"]:
                streamed[c["index"]] = streamed.get(c["index"], "") + c["text"]
    assert [streamed[i] for i in range(3)] == [c["text"] for c in first["choices"]]
    for field, value in (("top_p", 0.5), ("stop", ["x"]), ("logit_bias", {"5": 1})):
        status, err = server.post("/v1/completions", {"model": NAME, **body, field: value})
        assert status == 400 and err["error"]["param"] == field, err
    status, err = server.post("/v1/completions", {"model": NAME, **body, "n": 11})
    assert status == 400 and err["error"]["param"] == "n" and "beam width" in err["error"]["message"], err


def test_logprob_token_ids_report_those_tokens(server):
    """vLLM's logprob_token_ids: beside each sampled token, the logprobs of exactly these ids."""
    resp = complete(server, logprob_token_ids=[11, 220, 1234], logprobs=0, return_token_ids=True)
    lp = resp["choices"][0]["logprobs"]
    assert len(lp["top_logprobs"]) == 6
    status, names = server.post("/detokenize", {"model": NAME, "tokens": [11]})
    for top in lp["top_logprobs"]:
        assert len(top) >= 3  # the three ids (and the sampled token, when it is not one of them)
        assert all(v <= 0.0 for v in top.values())
    chat = server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 3, "temperature": 0,
                                                "messages": [{"role": "user", "content": "Hi"}],
                                                "logprobs": True, "logprob_token_ids": [11, 13]})[1]
    for entry in chat["choices"][0]["logprobs"]["content"]:
        assert len(entry["top_logprobs"]) == 2
    for bad in ({"logprob_token_ids": [-1], "logprobs": 0}, {"logprob_token_ids": [], "logprobs": 0},
                {"logprob_token_ids": [11]}):  # vLLM's rules: ids in the vocabulary, not empty, with logprobs
        status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", **bad})
        assert status == 400 and err["error"]["param"] == "logprob_token_ids", (bad, err)
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "logit_bias": {"bad1": 5, "bad2": 1}})
    assert status == 400 and "bad1" in err["error"]["message"] and "bad2" in err["error"]["message"], err


def test_truncation_side_right_keeps_the_first_tokens(server):
    ids = list(range(1000, 1008))
    right = complete(server, prompt=ids, truncate_prompt_tokens=4, truncation_side="right", return_token_ids=True,
                     max_tokens=1)
    assert right["choices"][0]["prompt_token_ids"] == ids[:4]
    left = complete(server, prompt=ids, truncate_prompt_tokens=4, truncation_side="left", return_token_ids=True,
                    max_tokens=1)
    assert left["choices"][0]["prompt_token_ids"] == ids[-4:]
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": ids, "truncate_prompt_tokens": 4,
                                                  "truncation_side": "middle"})
    assert status == 400 and err["error"]["param"] == "truncation_side", err


def test_cache_salt_keeps_cached_prefixes_apart():
    """vLLM's cache_salt: a salted prompt shares prefix-cache blocks only with the same salt, and
    the answer's bits never depend on it."""
    s = Server("--enable-prompt-tokens-details")
    try:
        prompt = "The quick brown fox jumps over the lazy dog. " * 12

        def cached(**fields):
            resp = complete(s, prompt=prompt, max_tokens=3, logprobs=1, **fields)
            return resp["usage"]["prompt_tokens_details"]["cached_tokens"], resp["choices"][0]

        first, a = cached(cache_salt="salt-one")
        assert first == 0
        again, b = cached(cache_salt="salt-one")
        assert again > 0  # the same salt hits
        other, c = cached(cache_salt="salt-two")
        assert other == 0  # another salt does not
        plain, d = cached()
        assert plain == 0  # nor does an unsalted request
        assert a == b == c == d  # same text and logprob bits, hit or miss
        for bad in ("", 7):
            status, err = s.post("/v1/completions", {"model": NAME, "prompt": "x", "cache_salt": bad})
            assert status == 400 and err["error"]["param"] == "cache_salt", err
    finally:
        s.close()


def test_vllm_fields_ditto_cannot_honour_are_refused_by_name(server):
    for field, value in [("priority", 1), ("max_repetition_pattern_size", 4), ("repetition_min_count", 2),
                         ("kv_transfer_params", {"do_remote_decode": True}), ("multi_modal_data", {"image": "x"}),
                         ("media_io_kwargs", {"video": {"num_frames": 4}}), ("packed_top_logprobs", True),
                         ("stream_interval", 3), ("watermarking", {"key": 1})]:
        status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", field: value})
        assert status == 400 and err["error"]["param"] == field, (field, err)
    # Their no-op values are accepted, as vLLM's defaults.
    for field, value in [("priority", 0), ("max_repetition_pattern_size", 0), ("kv_transfer_params", None),
                         ("stream_interval", 1), ("packed_top_logprobs", False)]:
        complete(server, **{field: value})


def test_seed_takes_vllm_range(server):
    """vLLM: seed is an int64; -1 is no seed; another negative s is the seed 2^64 + s."""
    neg = complete(server, seed=-5, temperature=1.0, logprobs=1)
    pos = complete(server, seed=2**63 - 1, temperature=1.0)  # the largest
    assert neg["seed"] == 2**64 - 5
    assert pos["seed"] == 2**63 - 1
    unseeded = complete(server, seed=-1, temperature=1.0)
    assert unseeded["seed"] is not None and unseeded["seed"] < 2**53  # drawn, as with no seed
    for bad in (2**63, -2**63 - 1, 1.5):
        status, err = server.post("/v1/completions", {"model": NAME, "prompt": "x", "seed": bad})
        assert status == 400 and err["error"]["param"] == "seed", (bad, err)


def test_echo_with_max_tokens_0_returns_the_prompt_alone(server):
    prompt = "The capital of France is"
    resp = complete(server, prompt=prompt, echo=True, max_tokens=0, logprobs=1)
    choice = resp["choices"][0]
    assert choice["text"] == prompt
    status, tokenized = server.post("/tokenize", {"model": NAME, "prompt": prompt})
    assert len(choice["logprobs"]["tokens"]) == len(tokenized["tokens"])
    assert resp["usage"]["completion_tokens"] == 1  # vLLM samples one token and counts it
    events = server.stream("/v1/completions", {"model": NAME, "prompt": prompt, "echo": True, "max_tokens": 0,
                                               "stream": True})
    assert "".join(c["text"] for e in events if e != "[DONE]" for c in e["choices"]) == prompt
    status, err = server.post("/v1/completions", {"model": NAME, "prompt": prompt, "max_tokens": 0})
    assert status == 400 and err["error"]["param"] == "max_tokens", err


def test_vllm_extra_fields_are_null_when_not_asked_for(server):
    choice = complete(server)["choices"][0]
    assert choice["prompt_logprobs"] is None and choice["prompt_token_ids"] is None and choice["token_ids"] is None
    status, chat = server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 2,
                                                        "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 200
    assert chat["prompt_logprobs"] is None and chat["prompt_token_ids"] is None
    assert chat["choices"][0]["token_ids"] is None


def test_a_stream_finishes_on_its_last_token_chunk(server):
    """vLLM puts finish_reason on the chunk that carries the last token (no empty trailing chunk)."""
    for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
                       ("/v1/completions", {"prompt": "The capital of France is"})]:
        events = server.stream(path, {"model": NAME, "max_tokens": 5, "temperature": 0, "ignore_eos": True,
                                      "stream": True, "stream_options": {"include_usage": True,
                                                                        "continuous_usage_stats": True}, **body})
        chunks = [e for e in events if e != "[DONE]" and e["choices"]]
        finished = [c for c in chunks if c["choices"][0]["finish_reason"] is not None]
        assert len(finished) == 1 and finished[0] is chunks[-1], path
        last = finished[0]["choices"][0]
        assert (last["delta"].get("content") if "delta" in last else last["text"]), path  # it carries text
        assert [c["usage"]["completion_tokens"] for c in chunks][-1] == 5, path


def test_custom_roles_and_text_like_parts_as_vllm(server):
    def chat(messages):
        return server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 2, "temperature": 0,
                                                    "messages": messages})

    status, custom = chat([{"role": "my-custom-role", "content": "Hi"}, {"role": "user", "content": "Hi"}])
    assert status == 200, custom
    status, err = chat([{"role": "", "content": "Hi"}])
    assert status == 400 and err["error"]["param"] == "messages", err
    plain = chat([{"role": "user", "content": "Hello there"}])[1]["choices"][0]["message"]
    for part in ({"type": "input_text", "text": "Hello there"}, {"type": "output_text", "text": "Hello there"},
                 {"type": "refusal", "refusal": "Hello there"}):
        status, resp = chat([{"role": "user", "content": [part]}])
        assert status == 200 and resp["choices"][0]["message"] == plain, (part, resp)


def test_chat_documents_reach_the_template_and_thinking_budget_minus_one_is_none(tmp_path):
    """vLLM passes `documents` to the chat template (a template that does not read them is
    unchanged), and thinking_token_budget -1 means no budget."""
    s = Server("--trust-request-chat-template")
    try:
        template = "{% for d in documents %}[{{ d.title }}: {{ d.text }}]{% endfor %}{{ messages[-1].content }}"
        body = {"model": NAME, "max_tokens": 1, "temperature": 0, "return_token_ids": True,
                "messages": [{"role": "user", "content": "Question?"}]}
        status, with_docs = s.post("/v1/chat/completions", {**body, "chat_template": template,
                                                            "documents": [{"title": "A", "text": "alpha"},
                                                                          {"title": "B", "text": "beta"}]})
        assert status == 200, with_docs
        status, text = s.post("/detokenize", {"model": NAME, "tokens": with_docs["prompt_token_ids"]})
        assert text["prompt"] == "[A: alpha][B: beta]Question?"
        status, plain = s.post("/v1/chat/completions", body)
        status, ignored = s.post("/v1/chat/completions", {**body, "documents": [{"title": "A", "text": "alpha"}]})
        assert status == 200 and ignored["prompt_token_ids"] == plain["prompt_token_ids"]
        status, err = s.post("/v1/chat/completions", {**body, "documents": "alpha"})
        assert status == 400 and err["error"]["param"] == "documents", err
        status, none = s.post("/v1/chat/completions", {**body, "thinking_token_budget": -1})
        assert status == 200 and none["choices"][0]["token_ids"] == plain["choices"][0]["token_ids"]
        status, err = s.post("/v1/chat/completions", {**body, "thinking_token_budget": 10})
        assert status == 400 and err["error"]["param"] == "thinking_token_budget", err
    finally:
        s.close()


def test_an_empty_model_name_is_the_served_model_and_chat_token_input_is_refused(server):
    status, resp = server.post("/v1/chat/completions", {"model": "", "max_tokens": 2,
                                                        "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 200 and resp["model"] == NAME, resp
    status, err = server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 2, "prompt_token_ids": [1, 2],
                                                       "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 400 and err["error"]["param"] == "prompt_token_ids", err
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    status, err = server.post("/v1/chat/completions", {"model": NAME, "max_tokens": 2, "tools": tools,
                                                       "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 400 and err["error"]["param"] == "tool_choice" and "--enable-auto-tool-choice" in \
        err["error"]["message"], err


def test_a_template_that_loops_over_content_parts_gets_the_parts():
    """vLLM's chat-template content format: "auto" gives a template that loops over a message's
    content the parts as sent (their extra fields too); "string" joins them."""
    template = ("{% for m in messages %}{% for p in m.content %}[{{ p.source_lang_code }}->{{ p.target_lang_code }}]"
                "{{ p.text }}{% endfor %}{% endfor %}")
    messages = [{"role": "user", "content": [{"type": "text", "text": "The fox", "source_lang_code": "en",
                                              "target_lang_code": "es"}]}]
    for flags, want in ((("--chat-template-content-format", "auto"), "[en->es]The fox"),
                        (("--chat-template-content-format", "openai"), "[en->es]The fox")):
        s = Server("--trust-request-chat-template", *flags)
        try:
            status, r = s.post("/v1/chat/completions", {"model": NAME, "max_tokens": 1, "return_token_ids": True,
                                                        "chat_template": template, "messages": messages})
            assert status == 200, r
            text = s.post("/detokenize", {"model": NAME, "tokens": r["prompt_token_ids"]})[1]["prompt"]
            assert text == want, (flags, text)
            # A plain string content becomes one text part.
            status, r = s.post("/v1/chat/completions", {"model": NAME, "max_tokens": 1, "return_token_ids": True,
                                                        "chat_template": template,
                                                        "messages": [{"role": "user", "content": "Hi"}]})
            assert s.post("/detokenize", {"model": NAME, "tokens": r["prompt_token_ids"]})[1]["prompt"] == "[->]Hi"
        finally:
            s.close()
