"""vLLM's HTTP surface, from an audit of vLLM's server tests (tests/entrypoints/serve, openai):
VLLM_API_KEY and the routes the key guards (vLLM main's AuthenticationMiddleware: all but the
liveness probes), CORS preflights, vLLM's error bodies (type the error's name, code the status),
the Content-Type check, GET /v1/models/{model}, /ping, /invocations, --root-path (vLLM's
test_root_path), X-Request-Id and the response ids it names, and --uds / --config refused by name.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import http.client
import json
import subprocess

import pytest

from serve_client import DITTO, MODEL, NAME, Server

KEY = "abc-123"


def call(server, method, path, body=None, headers=None):
    """(status, headers, parsed JSON or raw bytes) of one request with exactly these headers."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    try:
        payload = json.loads(payload)
    except ValueError:
        pass
    return resp.status, dict(resp.getheaders()), payload


JSON = {"Content-Type": "application/json"}
AUTH = {**JSON, "Authorization": "Bearer " + KEY}


@pytest.fixture(scope="module")
def keyed(request):
    """A server whose key comes from VLLM_API_KEY, under --root-path /llm, as vLLM's test_root_path."""
    import os
    os.environ["VLLM_API_KEY"] = KEY
    try:
        s = Server("--root-path", "/llm", "--enable-request-id-headers")
    finally:
        del os.environ["VLLM_API_KEY"]
    yield s
    s.close()


def test_vllm_api_key_from_the_environment_is_used_and_never_logged(keyed):
    status, _, body = call(keyed, "POST", "/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 1}, JSON)
    assert status == 401, body
    assert body["error"]["code"] == 401
    assert any("VLLM_API_KEY" in line for line in keyed.stderr), keyed.stderr[-5:]
    assert not any(KEY in line for line in keyed.stderr)


def test_every_route_but_the_liveness_probes_needs_the_key(keyed):
    for method, path in (("GET", "/health"), ("GET", "/ping"), ("POST", "/ping"), ("GET", "/load"),
                         ("GET", "/version"), ("GET", "/llm/health")):
        status, _, body = call(keyed, method, path, b"" if method == "POST" else None, JSON)
        assert status == 200, (path, body)
    for method, path in (("GET", "/metrics"), ("POST", "/tokenize"), ("POST", "/detokenize"),
                         ("GET", "/v1/models"), ("POST", "/invocations"), ("GET", "/llm/v1/models")):
        status, _, _ = call(keyed, method, path, {"prompt": "x"} if method == "POST" else None, JSON)
        assert status == 401, path
        status, _, body = call(keyed, method, path, {"prompt": "x"} if method == "POST" else None, AUTH)
        assert status != 401, (path, body)


def test_a_cors_preflight_needs_no_key_and_a_bare_options_does(keyed):
    status, headers, body = call(keyed, "OPTIONS", "/v1/chat/completions", None, {
        "Origin": "http://page.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 200, body
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert call(keyed, "OPTIONS", "/metrics", None, {})[0] == 401


def test_root_path_serves_every_route_under_the_prefix_and_without_it(keyed):
    for base in ("/v1", "/llm/v1"):
        status, _, body = call(keyed, "POST", base + "/chat/completions", {
            "model": NAME, "messages": [{"role": "user", "content": "tell me a common saying"}], "max_tokens": 2},
            AUTH)
        assert status == 200, body
    assert call(keyed, "GET", "/llmx/v1/models", None, AUTH)[0] == 404


def test_x_request_id_names_the_response_and_is_echoed(keyed):
    status, headers, body = call(keyed, "POST", "/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 1},
                                 {**AUTH, "X-Request-Id": "abc"})
    assert status == 200 and body["id"] == "cmpl-abc" and headers["X-Request-Id"] == "abc", (headers, body)
    status, headers, body = call(keyed, "POST", "/v1/chat/completions", {
        "model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "request_id": "from-body"},
        AUTH)
    assert status == 200 and body["id"] == "chatcmpl-from-body", body
    assert len(headers["X-Request-Id"]) == 32  # a fresh one, as vLLM's uuid4().hex


@pytest.fixture(scope="module")
def open_server():
    s = Server()
    yield s
    s.close()


def test_error_bodies_are_vllms(open_server):
    status, _, body = call(open_server, "POST", "/v1/completions", {"model": NAME, "prompt": "Hi", "top_p": 7}, JSON)
    assert status == 400 and body["error"]["type"] == "BadRequestError" and body["error"]["code"] == 400, body
    assert body["error"]["param"] == "top_p"
    status, _, body = call(open_server, "POST", "/v1/completions", {"model": "nope", "prompt": "Hi"}, JSON)
    assert status == 404, body
    assert body["error"] == {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                             "param": "model", "code": 404}
    assert MODEL not in json.dumps(body)


def test_a_body_that_is_not_json_by_its_content_type_is_refused(open_server):
    for content_type in ("application/x-www-form-urlencoded", "text/plain", None):
        headers = {"Content-Type": content_type} if content_type else {}
        status, _, body = call(open_server, "POST", "/v1/chat/completions", json.dumps(
            {"model": NAME, "messages": [{"role": "user", "content": "Hi"}]}).encode(), headers)
        assert status == 400, (content_type, body)
        assert "Unsupported Media Type: Only 'application/json' is allowed" in body["error"]["message"], body


def test_models_retrieve_and_invocations(open_server):
    status, _, card = call(open_server, "GET", "/v1/models/" + NAME)
    assert status == 200 and card["id"] == NAME and card["object"] == "model", card
    status, _, body = call(open_server, "GET", "/v1/models/other")
    assert status == 404 and body["error"]["type"] == "NotFoundError", body
    status, _, chat = call(open_server, "POST", "/invocations", {
        "model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "seed": 1}, JSON)
    assert status == 200 and chat["object"] == "chat.completion", chat
    status, _, direct = call(open_server, "POST", "/v1/chat/completions", {
        "model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "seed": 1}, JSON)
    assert direct["choices"][0]["message"] == chat["choices"][0]["message"]
    status, _, completion = call(open_server, "POST", "/invocations",
                                 {"model": NAME, "prompt": "Hi", "max_tokens": 2}, JSON)
    assert status == 200 and completion["object"] == "text_completion", completion
    status, _, body = call(open_server, "POST", "/invocations", {"model": NAME}, JSON)
    assert status == 400 and "Cannot find suitable handler" in body["error"]["message"], body


@pytest.mark.parametrize("args, named", [(["--uds", "/tmp/ditto.sock"], "--uds"),
                                         (["--config", "serve.yaml"], "--config")])
def test_flags_ditto_does_not_have_are_refused_by_name(args, named):
    proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "listening" not in proc.stdout
    assert named in proc.stderr and "refused" in proc.stderr, proc.stderr
