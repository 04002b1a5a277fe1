"""/metrics as vLLM's own tests read it (issue 30): vLLM's series beside ditto's, counted per
request (tests/entrypoints/serve/instrumentator/test_metrics.py), the instrumentator's
http_requests_total by handler and status class (test_http_status_metrics.py), request failures by
stage and client disconnects (middleware/test_request_failure_metrics.py,
test_client_disconnect_middleware.py), and the endpoint's name[] filter, OpenMetrics negotiation,
methods and encoding (test_metrics_filter.py).

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import http.client
import re
import time

import pytest

from serve_client import NAME, Server, stream_events


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def get(server, path, headers=None, method="GET"):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def sample(text, name, labels=""):
    """The sum of the samples named `name` whose label text contains `labels`."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([^\s{]+)(\{[^}]*\})?\s+(\S+)$", line)
        if m and m.group(1) == name and labels in (m.group(2) or ""):
            total += float(m.group(3))
    return total


def metrics(server):
    resp, body = get(server, "/metrics")
    assert resp.status == 200
    return body.decode()


def test_per_request_series_count_each_request_as_vllm_does(server):
    before = metrics(server)
    prompt = [1, 2, 3, 4, 5, 6, 7]
    for _ in range(3):
        status, body = server.post("/v1/completions", {"model": NAME, "prompt": prompt, "max_tokens": 5,
                                                       "ignore_eos": True, "temperature": 0})
        assert status == 200, body
    after = metrics(server)
    d = lambda name: sample(after, name) - sample(before, name)  # noqa: E731
    for family in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
                   "request_inference_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds",
                   "request_num_preemptions", "request_params_n"):
        assert d(f"vllm:{family}_count") == 3, family
    assert d("vllm:inter_token_latency_seconds_count") == 3 * 4
    assert d("vllm:request_prompt_tokens_sum") == 3 * 7
    assert d("vllm:request_generation_tokens_sum") == 3 * 5
    assert d("vllm:request_params_max_tokens_sum") == 3 * 5
    assert d("vllm:iteration_tokens_total_sum") == 3 * (7 + 5)
    assert d("vllm:iteration_tokens_total_count") == 3 * 5
    assert d("vllm:prompt_tokens_total") == 3 * 7
    assert d("vllm:generation_tokens_total") == 3 * 5
    assert d("vllm:request_prefill_time_seconds_sum") > 0 and d("vllm:request_decode_time_seconds_sum") > 0
    # test_metrics_exist: every name vLLM's test expects is there, and cache_config_info says the cache.
    for name in ("vllm:num_requests_waiting_by_reason", "vllm:num_preemptions_total", "vllm:cache_config_info",
                 "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:request_success_total"):
        assert name in after, name
    info = [l for l in after.splitlines() if l.startswith("vllm:cache_config_info{")]
    assert len(info) == 1 and re.search(r'kv_cache_size_tokens="[1-9]\d*"', info[0]) \
        and re.search(r'kv_cache_max_concurrency="[\d.e+]+"', info[0]), info


def test_http_requests_total_by_handler_and_status_class_and_failures_by_stage(server):
    before = metrics(server)
    status, _ = server.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 1})
    assert status == 200
    status, _ = server.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 1, "temperature": -1})
    assert status == 400
    status, _ = server.request("GET", "/does_not_exist")
    assert status == 404
    # An exchange is counted by the access logger, which runs after its response is written: a
    # scrape right after the 404 may come first (it did under a loaded CI machine). Wait for it.
    deadline = time.monotonic() + 10
    while True:
        after = metrics(server)
        d = lambda name, labels="": sample(after, name, labels) - sample(before, name, labels)  # noqa: E731
        if d("http_requests_total", 'handler="none",method="GET",status="4xx"') >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert d("http_requests_total", 'handler="/v1/completions",method="POST",status="2xx"') == 1
    assert d("http_requests_total", 'handler="/v1/completions",method="POST",status="4xx"') == 1
    assert d("http_requests_total", 'handler="none",method="GET",status="4xx"') == 1
    assert 'handler="/metrics"' not in after
    assert d("vllm:request_failure_total", 'stage="input_processing",code="400"') == 1
    assert 'code="404"' not in after  # an unmatched path is not a request for the model
    assert d("http_request_duration_seconds_count", 'handler="/v1/completions",method="POST"') == 2


def test_a_client_that_hangs_up_is_counted_as_a_disconnect_not_a_failure(server):
    before = metrics(server)
    status, _ = stream_events(server, "/v1/completions",
                              {"model": NAME, "prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True,
                               "stream": True}, stop_after=1)
    assert status == 200
    for _ in range(100):  # the server notices at its next write
        after = metrics(server)
        if sample(after, "vllm:http_requests_client_disconnected_total") > \
                sample(before, "vllm:http_requests_client_disconnected_total"):
            break
        time.sleep(0.1)
    assert sample(after, "vllm:http_requests_client_disconnected_total") - \
        sample(before, "vllm:http_requests_client_disconnected_total") == 1
    assert sample(after, "vllm:request_failure_total") == sample(before, "vllm:request_failure_total")


def test_the_endpoint_filters_negotiates_answers_every_method_and_never_compresses(server):
    resp, body = get(server, "/metrics", {"Accept-Encoding": "gzip, deflate, br"})
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    assert resp.getheader("Content-Encoding") is None and b"vllm:num_requests_waiting{" in body
    resp, body = get(server, "/metrics?name[]=vllm:num_requests_waiting&name[]=vllm:prompt_tokens_total")
    text = body.decode()
    assert "vllm:num_requests_waiting{" in text and "vllm:prompt_tokens_total{" in text
    assert "ditto:" not in text and "vllm:num_requests_running" not in text
    resp, body = get(server, "/metrics?name[]=vllm:e2e_request_latency_seconds")
    assert resp.status == 200 and body == b""
    resp, body = get(server, "/metrics?name[]=vllm:e2e_request_latency_seconds_bucket"
                             "&name[]=vllm:e2e_request_latency_seconds_sum")
    assert b"vllm:e2e_request_latency_seconds_bucket{" in body and b"vllm:e2e_request_latency_seconds_sum{" in body
    assert b"_count" not in body
    resp, body = get(server, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert resp.getheader("Content-Type").startswith("application/openmetrics-text; version=1.0.0")
    assert body.endswith(b"# EOF\n")
    for method in ("HEAD", "POST", "PUT", "OPTIONS"):
        resp, _ = get(server, "/metrics", method=method)
        assert resp.status == 200, method
