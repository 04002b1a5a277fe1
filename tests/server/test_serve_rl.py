"""`ditto serve` as an RL rollout engine (issue 35, docs/RL.md), with VLLM_SERVER_DEV_MODE=1: new
weights through /start_weight_update, /update_weights (the shared file, or base64 in the body),
/finish_weight_update give the answers of a server started on those weights, bit for bit; a
refused update leaves the old weights serving, bit for bit; /pause?mode=keep with requests in
flight, an update, then /resume loses nothing and says which tokens came from which version;
mode=abort ends them; /sleep and /wake_up; /abort_requests; /weight_info; a prefix-cache hit never
crosses versions; without the dev mode the routes are 404.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import base64
import json
import os
import struct
import subprocess
import tempfile
import threading
import time

import pytest
from serve_client import DITTO, MODEL, NAME, Server, canonical, raw_exchange, stream_events

PROMPTS = ["The capital of France is", "def fib(n):", "Once upon a time, in a land far away,"]


def requests():
    out = []
    for k, prompt in enumerate(PROMPTS):
        out.append({"model": NAME, "prompt": prompt, "max_tokens": 12, "temperature": 0, "logprobs": 1})
        out.append({"model": NAME, "prompt": prompt, "max_tokens": 10, "temperature": 0.9, "seed": 3 + k, "n": 2,
                    "logprobs": 1})
    return out


def answers(server):
    got = []
    for body in requests():
        status, resp = server.post("/v1/completions", body)
        assert status == 200, resp
        got.append(canonical("/v1/completions", resp)[0])
    return got


def read_checkpoint(model_dir):
    """Every tensor of a safetensors directory: [(name, dtype name, shape, bytes)], sorted by name."""
    out = []
    for f in sorted(os.listdir(model_dir)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, f), "rb") as fh:
            data = fh.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            dtype = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[info["dtype"]]
            out.append((name, dtype, info["shape"], data[8 + n + begin:8 + n + end]))
    return sorted(out)


def write_region(path, tensors):
    """The trainer's side of the shm transport: bytes at 64-byte aligned offsets; the update_info."""
    info = {"names": [], "dtype_names": [], "shapes": [], "offsets": []}
    offset = 0
    with open(path, "wb") as f:
        for name, dtype, shape, data in tensors:
            offset = (offset + 63) // 64 * 64
            f.seek(offset)
            f.write(data)
            for key, value in (("names", name), ("dtype_names", dtype), ("shapes", shape), ("offsets", offset)):
                info[key].append(value)
            offset += len(data)
    return info


@pytest.fixture(scope="module")
def new_model():
    """The same architecture as MODEL with other weights (seed 8 instead of 7)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "model")
        subprocess.run([DITTO, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2", "--seed", "8",
                        "--out", out], check=True, capture_output=True)
        yield out


@pytest.fixture(scope="module")
def want(new_model):
    """The answers of servers started on each checkpoint."""
    result = {}
    for key, model in (("old", MODEL), ("new", new_model)):
        s = Server(model=model)
        try:
            result[key] = answers(s)
        finally:
            s.close()
    assert result["old"] != result["new"]
    return result


@pytest.fixture()
def dev_server():
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    try:
        # A tensor goes whole in one body, base64 (the 311 MB embedding: 415 MB of text).
        s = Server("--enable-prompt-tokens-details", "--max-request-body-bytes", "600000000")
    finally:
        del os.environ["VLLM_SERVER_DEV_MODE"]
    try:
        yield s
    finally:
        s.close()


def post(server, path, body=None):
    status, payload = server.request("POST", path, body)
    return status, json.loads(payload) if payload else None


def get(server, path):
    status, payload = server.request("GET", path)
    return status, json.loads(payload)


def update_shm(server, tensors, version, chunks=2):
    with tempfile.NamedTemporaryFile(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as region:
        info = write_region(region.name, tensors)
        assert post(server, "/init_weight_transfer_engine", {"init_info": {"path": region.name}})[0] == 200
        assert post(server, "/start_weight_update")[0] == 200
        n = len(info["names"])
        for c in range(chunks):
            part = {k: v[c * n // chunks:(c + 1) * n // chunks] for k, v in info.items()}
            status, resp = post(server, "/update_weights", {"update_info": part})
            assert status == 200, resp
        status, resp = post(server, "/finish_weight_update", {"weight_version": version})
        assert status == 200, resp
        assert resp["weight_version"] == version


def update_http(server, tensors, version):
    assert post(server, "/start_weight_update")[0] == 200
    chunks, chunk = [], []
    for t in tensors:  # bodies of at most ~64 MB of tensors, a big one alone
        if chunk and sum(len(x[3]) for x in chunk) + len(t[3]) > 64 << 20:
            chunks.append(chunk)
            chunk = []
        chunk.append(t)
    for chunk in chunks + [chunk]:
        status, resp = post(server, "/update_weights", {"update_info": {
            "names": [t[0] for t in chunk], "dtype_names": [t[1] for t in chunk], "shapes": [t[2] for t in chunk],
            "data_base64": [base64.b64encode(t[3]).decode() for t in chunk]}})
        assert status == 200, resp
    status, resp = post(server, "/finish_weight_update", {"weight_version": version})
    assert status == 200, resp


def test_without_dev_mode_the_routes_are_404():
    s = Server()
    try:
        for path in ("/pause", "/start_weight_update", "/update_weights", "/sleep"):
            status, resp = post(s, path)
            assert status == 404, (path, resp)
            assert "VLLM_SERVER_DEV_MODE=1" in resp["error"]["message"]
        status, resp = get(s, "/weight_info")
        assert status == 404
    finally:
        s.close()


def test_updates_give_the_bits_of_a_server_on_the_new_weights(dev_server, new_model, want):
    s = dev_server
    assert answers(s) == want["old"]
    status, info = get(s, "/weight_info")
    assert status == 200 and info["weight_version"] == "0" and not info["update_in_progress"]
    fingerprint = info["system_fingerprint"]
    update_shm(s, read_checkpoint(new_model), "v1")
    assert answers(s) == want["new"]
    status, resp = s.post("/v1/completions", requests()[0])
    assert resp["weight_version"] == "v1"
    assert resp["system_fingerprint"] != fingerprint
    # A prompt seen under the old weights is not served from KV computed under them.
    body = dict(requests()[0], prompt="A prompt never sent before: " + "word " * 40)
    update_http(s, read_checkpoint(MODEL), "v2")  # back, the bytes in the request bodies
    first = s.post("/v1/completions", body)[1]
    update_shm(s, read_checkpoint(new_model), "v3")
    again = s.post("/v1/completions", body)[1]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, again["usage"]
    once_more = s.post("/v1/completions", body)[1]
    assert once_more["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, once_more["usage"]
    assert first["weight_version"] == "v2" and again["weight_version"] == "v3"
    update_http(s, read_checkpoint(MODEL), "v4")
    assert answers(s) == want["old"]
    assert get(s, "/weight_info")[1]["system_fingerprint"] != fingerprint  # a hash of the updates, not the files


def test_a_refused_update_leaves_the_old_weights(dev_server, new_model, want):
    s = dev_server
    tensors = read_checkpoint(new_model)
    assert post(s, "/start_weight_update")[0] == 200
    name, dtype, shape, data = tensors[1]
    bad = {"update_info": {"names": [tensors[0][0], name], "dtype_names": [tensors[0][1], dtype],
                           "shapes": [tensors[0][2], [shape[0], shape[-1] + 1] if len(shape) == 2 else [shape[0] + 1]],
                           "data_base64": [base64.b64encode(tensors[0][3]).decode(), base64.b64encode(data).decode()]}}
    status, resp = post(s, "/update_weights", bad)
    assert status == 400, resp
    assert name in resp["error"]["message"] and "old weights keep serving" in resp["error"]["message"]
    status, resp = post(s, "/finish_weight_update", {"weight_version": "never"})
    assert status == 400 and "no weight update in progress" in resp["error"]["message"]
    for body, says in (({"update_info": {"names": ["x"], "dtype_names": ["bfloat16"], "shapes": [[1]],
                                         "offsets": [0], "packed": True}}, "update_info.packed"),
                       ({"update_info": {"names": [], "dtype_names": [], "shapes": []}}, "empty"),
                       ({"updateinfo": {}}, "updateinfo")):
        assert post(s, "/start_weight_update")[0] == 200
        status, resp = post(s, "/update_weights", body)
        assert status == 400 and says in resp["error"]["message"], resp
        post(s, "/finish_weight_update")
    assert get(s, "/weight_info")[1]["weight_version"] in ("0", "1", "2", "3")  # empty updates only
    assert answers(s) == want["old"]


def test_pause_keep_then_update_loses_nothing_and_says_which_tokens_came_from_where(dev_server, new_model, want):
    s = dev_server
    body = {"model": NAME, "prompt": PROMPTS[2], "max_tokens": 48, "temperature": 0, "ignore_eos": True,
            "logprobs": 1, "stream": True}
    seen, paused = [], threading.Event()

    def on_event(e):
        if e != "[DONE]" and e["choices"]:
            seen.append(e)
        if len(seen) >= 6:
            paused.set()

    result = {}
    t = threading.Thread(target=lambda: result.update(r=stream_events(s, "/v1/completions", body, on_event=on_event)))
    t.start()
    assert paused.wait(120)
    status, resp = post(s, "/pause?mode=keep")
    assert status == 200 and resp["is_paused"]
    assert get(s, "/is_paused")[1]["is_paused"]
    time.sleep(0.5)
    update_shm(s, read_checkpoint(new_model), "kept-v1")
    assert post(s, "/resume")[0] == 200
    t.join(300)
    status, got = result["r"]
    assert status == 200
    chunks = [e for e in got if e != "[DONE]" and e["choices"]]
    tokens = [tok for e in chunks for tok in e["choices"][0]["logprobs"]["tokens"]]
    assert len(tokens) == 48  # nothing lost
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    versions = [e["weight_version"] for e in chunks]
    assert versions[0] == "0" and versions[-1] == "kept-v1" and versions == sorted(versions, key=lambda v: v != "0")
    switched = [e for e in chunks if "weight_versions" in e["choices"][0]]
    assert len(switched) == 1, [e["choices"][0].get("weight_versions") for e in chunks]
    first_new = switched[0]["choices"][0]["weight_versions"][-1]["first_token"]
    assert 0 < first_new < 48
    # The tokens before the switch are the old weights' answer, bit for bit.
    alone = s.post("/v1/completions", dict(body, stream=False))  # now under kept-v1
    assert alone[1]["weight_version"] == "kept-v1"
    update_http(s, read_checkpoint(MODEL), "back")
    old = s.post("/v1/completions", dict(body, stream=False))[1]
    old_tokens = old["choices"][0]["logprobs"]["tokens"]
    assert tokens[:first_new] == old_tokens[:first_new]


def test_pause_abort_wait_and_requests_sent_while_paused(dev_server, want):
    s = dev_server
    body = {"model": NAME, "prompt": PROMPTS[0], "max_tokens": 400, "temperature": 0, "ignore_eos": True}
    result = {}
    t = threading.Thread(target=lambda: result.update(r=s.post("/v1/completions", body)))
    t.start()
    time.sleep(1.0)
    status, resp = post(s, "/pause?mode=abort")
    assert status == 200
    t.join(120)
    assert result["r"][1]["choices"][0]["finish_reason"] == "abort"
    # Sent while paused: it waits, then runs after /resume, the same bits as ever.
    late = {}
    t = threading.Thread(target=lambda: late.update(r=s.post("/v1/completions", requests()[0])))
    t.start()
    time.sleep(1.0)
    assert "r" not in late
    assert post(s, "/resume")[0] == 200
    t.join(120)
    assert canonical("/v1/completions", late["r"][1])[0] == want["old"][0]
    status, resp = post(s, "/pause?mode=wait")
    assert status == 200 and resp["mode"] == "wait"
    assert post(s, "/resume")[0] == 200
    status, resp = post(s, "/pause?mode=later")
    assert status == 400 and "mode" in resp["error"]["message"]


def test_abort_requests_by_response_id(dev_server):
    s = dev_server
    body = {"model": NAME, "prompt": [PROMPTS[0], PROMPTS[1]], "max_tokens": 400, "temperature": 0,
            "ignore_eos": True, "request_id": "rl-abort-me"}
    result = {}
    t = threading.Thread(target=lambda: result.update(r=s.post("/v1/completions", body)))
    t.start()
    time.sleep(1.0)
    status, resp = post(s, "/abort_requests", {"request_ids": ["cmpl-rl-abort-me"]})
    assert status == 200, resp
    t.join(120)
    assert [c["finish_reason"] for c in result["r"][1]["choices"]] == ["abort", "abort"]
    status, resp = post(s, "/abort_requests", {"request_id": "x"})
    assert status == 400 and "request_id" in resp["error"]["message"]


def test_sleep_and_wake_up(dev_server, new_model, want):
    s = dev_server
    assert post(s, "/sleep?level=1")[0] == 200
    assert get(s, "/is_sleeping")[1]["is_sleeping"]
    assert post(s, "/wake_up")[0] == 200
    assert answers(s) == want["old"]
    assert post(s, "/sleep?level=2")[0] == 200
    status, resp = post(s, "/wake_up")
    assert status == 400 and "every tensor" in resp["error"]["message"]
    tensors = read_checkpoint(new_model)
    assert post(s, "/start_weight_update")[0] == 200
    status, resp = post(s, "/update_weights", {"update_info": {
        "names": [tensors[0][0]], "dtype_names": [tensors[0][1]], "shapes": [tensors[0][2]],
        "data_base64": [base64.b64encode(tensors[0][3]).decode()]}})
    assert status == 200
    status, resp = post(s, "/finish_weight_update")
    assert status == 400 and "every tensor" in resp["error"]["message"]  # one tensor is not enough
    update_shm(s, tensors, "after-sleep")
    assert post(s, "/wake_up")[0] == 200
    assert answers(s) == want["new"]
    assert post(s, "/sleep?level=3")[0] == 400


def test_a_shared_file_changed_before_the_finish_is_refused_there(dev_server, new_model, want):
    s = dev_server
    tensors = read_checkpoint(new_model)
    with tempfile.NamedTemporaryFile(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as region:
        info = write_region(region.name, tensors)
        assert post(s, "/init_weight_transfer_engine", {"init_info": {"path": region.name}})[0] == 200
        assert post(s, "/start_weight_update")[0] == 200
        assert post(s, "/update_weights", {"update_info": info})[0] == 200
        os.truncate(region.name, 1000)  # the trainer broke its promise: the server must not fault
        status, resp = post(s, "/finish_weight_update", {"weight_version": "never"})
    assert status == 400 and "changed before the finish" in resp["error"]["message"], resp
    assert get(s, "/weight_info")[1]["weight_version"] == "0"
    assert answers(s) == want["old"]
    status, resp = post(s, "/start_weight_update")
    assert status == 200  # the refused update is gone: a new one starts
    status, resp = post(s, "/update_weights", {"update_info": {"names": ["x"], "dtype_names": ["bfloat16"]}})
    assert status == 400 and "cancelled" in resp["error"]["message"]  # a malformed body cancels it too
    status, resp = post(s, "/finish_weight_update")
    assert status == 400 and "no weight update in progress" in resp["error"]["message"]


def test_queued_and_kept_requests_can_be_aborted_while_paused(dev_server):
    s = dev_server
    body = {"model": NAME, "prompt": PROMPTS[0], "max_tokens": 300, "temperature": 0, "ignore_eos": True}
    kept, queued = {}, {}
    t1 = threading.Thread(target=lambda: kept.update(r=s.post("/v1/completions", body)))
    t1.start()
    time.sleep(1.0)
    assert post(s, "/pause?mode=keep")[0] == 200
    t2 = threading.Thread(target=lambda: queued.update(r=s.post("/v1/completions", dict(body, max_tokens=5))))
    t2.start()
    time.sleep(0.5)
    # abort mode while paused ends the kept request; abort_all ends the one still queued.
    assert post(s, "/pause?mode=abort")[0] == 200
    t1.join(60)
    assert kept["r"][1]["choices"][0]["finish_reason"] == "abort"
    assert post(s, "/abort_requests", {"abort_all": True})[0] == 200
    t2.join(60)
    assert not t2.is_alive() and queued["r"][0] != 200 and "aborted" in queued["r"][1]["error"]["message"]
    assert post(s, "/resume")[0] == 200


def test_sleep_level_2_is_refused_on_a_gguf_model():
    gguf = os.path.join(os.path.dirname(__file__), "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(gguf):
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing: scripts/install-deps.sh fetches it")
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    try:
        s = Server(model=gguf)
    finally:
        del os.environ["VLLM_SERVER_DEV_MODE"]
    try:
        status, resp = post(s, "/sleep?level=2")
        assert status == 400 and "GGUF" in resp["error"]["message"]
        assert not get(s, "/is_sleeping")[1]["is_sleeping"] and not get(s, "/is_paused")[1]["is_paused"]
        status, resp = post(s, "/start_weight_update")
        assert status == 400 and "GGUF" in resp["error"]["message"]
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 3})
        assert status == 200
    finally:
        s.close()


def test_a_bodiless_post_as_curl_sends_it(dev_server):
    # `curl -X POST http://HOST/pause?mode=keep` sends neither Content-Length nor a body.
    status, reply, _ = raw_exchange(dev_server, b"POST /pause?mode=keep HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and b'"is_paused":true' in reply, reply
    status, reply, _ = raw_exchange(dev_server, b"POST /resume HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and b'"is_paused":false' in reply, reply
    # Elsewhere a POST still needs its framing (a body is required there).
    status, _, _ = raw_exchange(dev_server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 411
