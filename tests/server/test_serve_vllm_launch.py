"""A vLLM launch line starts `ditto serve` unchanged (issue 30): --model, several
--served-model-name names, --chat-template, --enable-prefix-caching, and vLLM's GPU-only flags
(accepted, one warning line each); a flag that would change the results and that ditto does not
have is refused at start, naming it.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import json
import subprocess

from serve_client import DITTO, MODEL, NAME, Server

GPU_ONLY = ["--gpu-memory-utilization", "0.9", "--enforce-eager", "--trust-remote-code", "--swap-space", "4",
            "--disable-log-stats", "--seed", "0"]
SAME_AS_DITTO = ["--dtype", "auto", "--kv-cache-dtype", "auto", "--pipeline-parallel-size", "1",
                 "--logprobs-mode", "raw_logprobs", "--enable-prefix-caching",
                 "--structured-outputs-config", '{"backend": "guidance"}', "--guided-decoding-backend", "auto"]


def test_a_vllm_launch_line_starts_and_its_names_answer():
    s = Server("--served-model-name", NAME, "second-name", *GPU_ONLY, *SAME_AS_DITTO, "--tokenizer", MODEL)
    try:
        status, models = s.request("GET", "/v1/models")
        assert status == 200
        assert [m["id"] for m in json.loads(models)["data"]] == [NAME, "second-name"]
        body = {"prompt": "Hello", "max_tokens": 3, "temperature": 0, "seed": 1}
        status, first = s.post("/v1/completions", {"model": NAME, **body})
        assert status == 200, first
        status, second = s.post("/v1/completions", {"model": "second-name", **body})
        assert status == 200, second
        assert second["model"] == NAME  # responses carry the first name, as vLLM's
        assert second["choices"][0]["text"] == first["choices"][0]["text"]
        status, missing = s.post("/v1/completions", {"model": "third", **body})
        # vLLM's words, and not the model's path on the server.
        assert status == 404 and missing["error"]["message"] == "The model `third` does not exist.", missing
    finally:
        s.close()
    warnings = [l for l in s.stderr if ": warning: " in l]
    for flag in ("--gpu-memory-utilization 0.9", "--enforce-eager", "--trust-remote-code", "--swap-space 4",
                 "--disable-log-stats", "--seed 0"):
        assert sum(f"warning: {flag} is vLLM's and does nothing here" in l for l in warnings) == 1, (flag, warnings)
    assert len(warnings) == 6, warnings  # flags that ask for what ditto does anyway say nothing


def test_the_model_as_a_flag_and_no_prefix_caching():
    proc = subprocess.Popen([DITTO, "serve", "--model", MODEL, "--port", "0", "--threads", "2",
                             "--no-enable-prefix-caching"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on http://0.0.0.0:" in line, line + proc.stderr.read()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_flags_that_would_change_results_are_refused_by_name(tmp_path):
    other = tmp_path / "other-tokenizer"
    other.mkdir()
    for args, named in ((["--quantization", "fp8"], "--quantization fp8"),
                        (["--dtype", "float16"], "--dtype float16"),
                        (["--enable-lora"], "--enable-lora"),
                        (["--pipeline-parallel-size", "2"], "--pipeline-parallel-size 2"),
                        (["--guided-decoding-backend", "xgrammar"], "--guided-decoding-backend xgrammar"),
                        (["--structured-outputs-config", '{"backend": "xgrammar"}'],
                         '--structured-outputs-config {"backend": "xgrammar"}'),
                        (["--tokenizer", str(other)], "--tokenizer " + str(other))):
        proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", *args], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode != 0, (args, proc.stdout)
        assert "listening" not in proc.stdout
        assert named in proc.stderr and "refused" in proc.stderr, (args, proc.stderr)


def test_a_chat_template_from_the_command_line_renders_the_chat(tmp_path):
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                        "{% if add_generation_prompt %}[assistant] {% endif %}")
    messages = [{"role": "user", "content": "Hi there"}]
    for given in (str(template), template.read_text()):  # a file, or the template itself
        s = Server("--chat-template", given)
        try:
            status, chat = s.post("/tokenize", {"model": NAME, "messages": messages})
            assert status == 200, chat
            status, text = s.post("/tokenize", {"model": NAME, "prompt": "[user] Hi there\n[assistant] ",
                                                "add_special_tokens": False})
            assert status == 200, text
            assert chat["tokens"] == text["tokens"]
        finally:
            s.close()
    proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", "--chat-template", str(tmp_path / "nope.jinja")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "nope.jinja" in proc.stderr and "chat_template" in proc.stderr, proc.stderr


def test_tool_choice_none_keeps_the_tools_unless_vllms_flag_excludes_them():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    base = {"model": NAME, "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 1,
            "temperature": 0}

    def prompt_tokens(server, **extra):
        status, resp = server.post("/v1/chat/completions", {**base, **extra})
        assert status == 200, resp
        return resp["usage"]["prompt_tokens"]

    auto = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")  # tools alone mean "auto"
    for flags, none_keeps_tools in ((auto, True), ((*auto, "--exclude-tools-when-tool-choice-none"), False)):
        s = Server(*flags)
        try:
            without = prompt_tokens(s)
            with_tools = prompt_tokens(s, tools=tools)
            none = prompt_tokens(s, tools=tools, tool_choice="none")
            assert with_tools > without
            assert none == (with_tools if none_keeps_tools else without), (flags, without, with_tools, none)
        finally:
            s.close()


def test_prompt_tokens_details_count_the_prefix_cache_hits_when_asked():
    prompt = "The quick brown fox jumps over the lazy dog. " * 8  # several KV blocks
    body = {"model": NAME, "prompt": prompt, "max_tokens": 2, "temperature": 0}
    s = Server("--enable-prompt-tokens-details")
    try:
        status, cold = s.post("/v1/completions", body)
        assert status == 200, cold
        status, warm = s.post("/v1/completions", body)
        assert status == 200, warm
        assert cold["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}, cold["usage"]
        cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert 0 < cached < warm["usage"]["prompt_tokens"], warm["usage"]
        assert warm["choices"] == cold["choices"]  # the same bits, cache or not
        events = s.stream("/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
        assert events[-2]["usage"]["prompt_tokens_details"] == {"cached_tokens": cached}, events[-2]
    finally:
        s.close()
    plain = Server()
    try:
        status, resp = plain.post("/v1/completions", body)
        assert status == 200 and "prompt_tokens_details" not in resp["usage"], resp["usage"]  # off, as in vLLM
    finally:
        plain.close()


def test_return_tokens_as_token_ids_and_force_include_usage_flags():
    body = {"model": NAME, "prompt": "Hello", "max_tokens": 3, "temperature": 0, "logprobs": 1}
    s = Server("--return-tokens-as-token-ids", "--enable-force-include-usage")
    try:
        status, resp = s.post("/v1/completions", body)
        assert status == 200, resp
        tokens = resp["choices"][0]["logprobs"]["tokens"]
        assert len(tokens) == 3 and all(t.startswith("token_id:") for t in tokens), tokens
        events = s.stream("/v1/completions", {**body, "stream": True})  # no stream_options
        assert events[-1] == "[DONE]"
        assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 3, events[-2]
    finally:
        s.close()


def test_start_up_says_what_the_engine_holds_and_warns_of_a_small_kv_cache():
    import time
    for flags, warned in (((), False), (("--kv-cache-memory", "1MiB"), True)):
        s = Server(*flags)
        try:
            time.sleep(0.5)  # stderr is read by a thread
            lines = list(s.stderr)
        finally:
            s.close()
        engine = [l for l in lines if l.startswith("ditto serve: engine: ")]
        assert len(engine) == 1 and " threads, " in engine[0] and " kernels, context " in engine[0], lines
        assert "KV cache " in engine[0] and " tokens (" in engine[0], engine
        warning = [l for l in lines if "less than one full-length request" in l]
        assert bool(warning) == warned, (flags, lines)


def test_log_format_json_makes_every_server_line_json():
    """--log-format json: the start-up facts, warnings, access lines and the stop are JSON objects
    (they used to be plain text beside JSON access lines)."""
    import time
    s = Server("--log-format", "json", "--enforce-eager")
    try:
        status, _ = s.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2})
        assert status == 200
    finally:
        s.close()
    time.sleep(0.5)
    lines = [l for l in s.stderr if l.strip()]
    parsed = [json.loads(l) for l in lines]  # every line, or this raises naming it
    events = [p.get("message", "") for p in parsed]
    assert any(m.startswith("engine: ") for m in events), events
    assert any("--enforce-eager is vLLM's" in m for m in events), events
    assert any(p.get("path") == "/v1/completions" and p.get("status") == 200 for p in parsed), parsed
    assert events[-1] == "stopped" or any(m == "stopped" for m in events), events


def test_load_and_tokenizer_info_routes():
    """vLLM's GET /load counts the generation requests in flight; GET /tokenizer_info is there only
    with --enable-tokenizer-info-endpoint (404 otherwise, as vLLM)."""
    import http.client
    s = Server("--enable-tokenizer-info-endpoint", "--enable-server-load-tracking")
    try:
        status, load = s.request("GET", "/load")
        assert status == 200 and json.loads(load) == {"server_load": 0}
        conn = http.client.HTTPConnection(s.host, s.port, timeout=120)
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"model": NAME, "prompt": "Count", "max_tokens": 64, "stream": True, "ignore_eos": True}).encode(),
            headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.read(16)  # the first event is on its way: the response is open
        status, load = s.request("GET", "/load")
        assert status == 200 and json.loads(load)["server_load"] == 1
        resp.read()
        conn.close()
        import time
        deadline = time.time() + 10  # the response is closed just after its last byte is sent
        while json.loads(s.request("GET", "/load")[1])["server_load"] != 0 and time.time() < deadline:
            time.sleep(0.05)
        assert json.loads(s.request("GET", "/load")[1])["server_load"] == 0
        status, info = s.request("GET", "/tokenizer_info")
        assert status == 200, info
        info = json.loads(info)
        assert "chat_template" in info and info["tokenizer_class"]
    finally:
        s.close()
    plain = Server()
    try:
        assert plain.request("GET", "/tokenizer_info")[0] == 404
    finally:
        plain.close()
