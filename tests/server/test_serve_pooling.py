"""Embeddings, scores and reranking through `ditto serve` (issue 32): /v1/embeddings in OpenAI's shape
(the official `openai` client parses it, float and base64 the same bits), vLLM's /pooling, /score and
/rerank, on an embedding model (--runner pooling) and a reranker (--task score) made from the
session's generated qwen3-0.6b; every number the same bits as `ditto embed` (LLM::encode and
LLM::score) and as the same request alone while 64 clients mix embeddings, reranking and generation
on one server; bad input refused with a 400 naming the field, and the server serving on.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's. The openai
client test runs where the `openai` package is (build/venv; skipped elsewhere).
"""
import base64
import json
import math
import os
import random
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from serve_client import DITTO, MODEL, NAME, Server, canonical

CONTEXT = 512  # --max-model-len: an input past it is short to write
HIDDEN = 1024  # the qwen3-0.6b preset's hidden_size
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "boxing matches in Zürich under café lights 東京 and Αθήνα").split()


@pytest.fixture(scope="module")
def embedder():
    s = Server("--runner", "pooling", "--max-model-len", str(CONTEXT), "--max-num-seqs", "64")
    yield s
    s.close()


@pytest.fixture(scope="module")
def reranker():
    s = Server("--task", "score", "--max-model-len", str(CONTEXT))
    yield s
    s.close()


def bits(values):
    """float32 bits of a JSON vector (each number is a float32 written exactly)."""
    return np.asarray(values, dtype=np.float32).tobytes()


def post_ok(server, path, body):
    status, resp = server.post(path, body)
    assert status == 200, resp
    return resp


def embed(server, inputs, **fields):
    resp = post_ok(server, "/v1/embeddings", {"model": NAME, "input": inputs, **fields})
    return [d["embedding"] for d in resp["data"]]


def expect_error(server, path, body, param, *words, status=400):
    got, resp = server.post(path, body)
    assert got == status, resp
    assert resp["error"]["param"] == param, resp
    for w in words:
        assert w in resp["error"]["message"], resp
    return resp["error"]["message"]


def ditto_embed(lines, *flags):
    """`ditto embed` (LLM::encode / LLM::score) on the test model: one result per JSON line."""
    out = subprocess.run([DITTO, "embed", "--model", MODEL, "--threads", "2", *flags],
                         input="".join(json.dumps(line) + "\n" for line in lines),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def cosine(a, b):
    """engine/pooling.h's cosine_similarity: double sums in ascending index order, then float32."""
    dot = aa = bb = 0.0
    for x, y in zip(np.asarray(a, dtype=np.float32).tolist(), np.asarray(b, dtype=np.float32).tolist()):
        dot += x * y
        aa += x * x
        bb += y * y
    return np.float32(dot / max(math.sqrt(aa) * math.sqrt(bb), 1e-8))


def test_embeddings_shape_and_input_kinds(embedder):
    resp = post_ok(embedder, "/v1/embeddings", {"model": NAME, "input": ["hello world", "a lazy dog"], "user": "u"})
    assert resp["id"].startswith("embd-") and resp["object"] == "list" and resp["model"] == NAME
    assert isinstance(resp["created"], int)
    assert [(d["object"], d["index"], len(d["embedding"])) for d in resp["data"]] == [
        ("embedding", 0, HIDDEN), ("embedding", 1, HIDDEN)]
    for d in resp["data"]:  # normalized: the default of a --runner pooling model
        assert abs(np.linalg.norm(np.asarray(d["embedding"], dtype=np.float64)) - 1) < 1e-5
    ids = post_ok(embedder, "/tokenize", {"model": NAME, "prompt": "a lazy dog"})["tokens"]
    assert resp["usage"] == {"prompt_tokens": 2 + len(ids), "total_tokens": 2 + len(ids)}
    # A string, token ids and a list of token-id lists: the same text is the same bits.
    one = embed(embedder, "a lazy dog")[0]
    assert bits(one) == bits(resp["data"][1]["embedding"])
    assert bits(embed(embedder, ids)[0]) == bits(one)
    assert [bits(e) for e in embed(embedder, [ids, ids[:2]])][0] == bits(one)
    # The client's own id names the response.
    assert post_ok(embedder, "/v1/embeddings", {"input": "x", "request_id": "mine"})["id"] == "embd-mine"


def test_embeddings_are_the_cli_bits(embedder):
    texts = ["hello world", "seven wizards quietly judge boxing matches", "東京 and Αθήνα"]
    cli = ditto_embed([{"input": t} for t in texts] + [{"input": texts[0], "dimensions": 32}], "--runner", "pooling")
    server = embed(embedder, texts)
    for got, want in zip(server, cli):
        assert bits(got) == bits(want["embedding"])
    assert bits(embed(embedder, texts[0], dimensions=32)[0]) == bits(cli[3]["embedding"])


def test_openai_client_parses_float_and_base64(embedder):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"http://{embedder.host}:{embedder.port}/v1", api_key="unused")
    texts = ["hello world", "a lazy dog", "東京"]
    floats = client.embeddings.create(model=NAME, input=texts, encoding_format="float")
    b64 = client.embeddings.create(model=NAME, input=texts, encoding_format="base64")
    default = client.embeddings.create(model=NAME, input=texts)  # the client asks for base64 and decodes it
    assert floats.object == "list" and floats.model == NAME
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0
    for i in range(len(texts)):
        assert floats.data[i].index == i and floats.data[i].object == "embedding"
        want = np.asarray(floats.data[i].embedding, dtype=np.float32).tobytes()
        assert len(want) == 4 * HIDDEN
        assert np.frombuffer(base64.b64decode(b64.data[i].embedding), dtype="<f4").tobytes() == want
        assert np.asarray(default.data[i].embedding, dtype=np.float32).tobytes() == want
    small = client.embeddings.create(model=NAME, input="hello world", dimensions=64)
    assert len(small.data[0].embedding) == 64


def test_dimensions_cut_before_normalizing(embedder):
    full = embed(embedder, "a lazy dog", normalize=False)[0]
    cut = embed(embedder, "a lazy dog", normalize=False, dimensions=64)[0]
    assert bits(cut) == bits(full[:64])
    cut_norm = np.asarray(embed(embedder, "a lazy dog", dimensions=64)[0], dtype=np.float64)
    assert len(cut_norm) == 64 and abs(np.linalg.norm(cut_norm) - 1) < 1e-5
    assert bits(embed(embedder, "a lazy dog", use_activation=False)[0]) == bits(full)


def test_chat_messages_embed_the_rendered_chat(embedder):
    messages = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello"}]
    ids = post_ok(embedder, "/tokenize", {"model": NAME, "messages": messages,
                                          "add_generation_prompt": False})["tokens"]
    want = bits(embed(embedder, ids)[0])
    resp = post_ok(embedder, "/v1/embeddings", {"model": NAME, "messages": messages})
    assert bits(resp["data"][0]["embedding"]) == want
    assert bits(embed(embedder, messages)[0]) == want  # vLLM's chat in `input`


def test_truncate_prompt_tokens_keeps_the_last_tokens(embedder):
    long_text = " ".join(["word"] * (CONTEXT + 100))
    message = expect_error(embedder, "/v1/embeddings", {"input": long_text}, "input", str(CONTEXT),
                           "truncate_prompt_tokens")
    assert "tokens" in message
    ids = post_ok(embedder, "/tokenize", {"model": NAME, "prompt": long_text})["tokens"]
    got = embed(embedder, long_text, truncate_prompt_tokens=10)[0]
    assert bits(got) == bits(embed(embedder, ids[-10:])[0])
    full_context = embed(embedder, long_text, truncate_prompt_tokens=-1)[0]  # the last max_model_len tokens
    assert bits(full_context) == bits(embed(embedder, ids[-CONTEXT:])[0])


def test_pooling_route(embedder, reranker):
    resp = post_ok(embedder, "/pooling", {"model": NAME, "input": ["hello world", "a lazy dog"]})
    assert resp["id"].startswith("pool-") and resp["object"] == "list"
    assert [(d["index"], d["object"]) for d in resp["data"]] == [(0, "pooling"), (1, "pooling")]
    assert bits(resp["data"][1]["data"]) == bits(embed(embedder, "a lazy dog")[0])
    b64 = post_ok(embedder, "/pooling", {"input": "a lazy dog", "encoding_format": "base64"})["data"][0]["data"]
    assert np.frombuffer(base64.b64decode(b64), dtype="<f4").tobytes() == bits(resp["data"][1]["data"])
    # On a reranker the pooled output is its score of the text as it is: [relevance].
    scored = post_ok(reranker, "/pooling", {"input": "hello world"})["data"][0]["data"]
    assert len(scored) == 1 and 0 < scored[0] < 1
    assert bits(post_ok(reranker, "/pooling", {"input": "hello world", "task": "score"})["data"][0]["data"]) == \
        bits(scored)
    expect_error(reranker, "/pooling", {"input": "x", "task": "embed"}, "task", "score")


def test_score_on_an_embedding_model_is_the_cosine(embedder):
    docs = ["hello world", "a lazy dog", "hello"]
    resp = post_ok(embedder, "/score", {"model": NAME, "text_1": "hello", "text_2": docs})
    assert resp["id"].startswith("score-") and resp["object"] == "list"
    assert [(d["index"], d["object"]) for d in resp["data"]] == [(0, "score"), (1, "score"), (2, "score")]
    query = embed(embedder, "hello")[0]
    for d, doc in zip(resp["data"], docs):
        assert np.float32(d["score"]).tobytes() == cosine(query, embed(embedder, doc)[0]).tobytes()
    cli = ditto_embed([{"text_1": "hello", "text_2": d} for d in docs], "--runner", "pooling")
    assert bits([d["score"] for d in resp["data"]]) == bits([c["score"] for c in cli])
    # vLLM's other names, N:N pairs and /v1/score.
    pairs = post_ok(embedder, "/v1/score", {"queries": ["hello", "hello"], "documents": docs[:2]})
    assert bits([d["score"] for d in pairs["data"]]) == bits([d["score"] for d in resp["data"][:2]])
    ranked = post_ok(embedder, "/rerank", {"query": "hello", "documents": docs})
    assert [r["index"] for r in ranked["results"]][0] == 2  # the same text: cosine 1
    assert bits(sorted(r["relevance_score"] for r in ranked["results"])) == \
        bits(sorted(d["score"] for d in resp["data"]))


def test_reranker_score_and_rerank(reranker):
    query = "what does the fox jump over"
    docs = ["the quick brown fox jumps over a lazy dog", "boxing matches in Zürich", "café lights", "東京"]
    resp = post_ok(reranker, "/score", {"model": NAME, "text_1": query, "text_2": docs})
    scores = [d["score"] for d in resp["data"]]
    assert all(0 < s < 1 for s in scores)
    cli = ditto_embed([{"text_1": query, "text_2": d} for d in docs], "--task", "score")
    assert bits(scores) == bits([c["score"] for c in cli])
    raw = post_ok(reranker, "/score", {"text_1": query, "text_2": docs, "use_activation": False})
    assert [1 / (1 + math.exp(-d["score"])) for d in raw["data"]] == pytest.approx(scores, rel=1e-6)
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        ranked = post_ok(reranker, path, {"model": NAME, "query": query, "documents": docs})
        assert ranked["id"].startswith("rerank-") and ranked["model"] == NAME
        assert ranked["usage"]["total_tokens"] == resp["usage"]["prompt_tokens"]
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], i))
        assert [r["index"] for r in ranked["results"]] == order
        assert [r["document"]["text"] for r in ranked["results"]] == [docs[i] for i in order]
        assert bits([r["relevance_score"] for r in ranked["results"]]) == bits([scores[i] for i in order])
    top = post_ok(reranker, "/rerank", {"query": query, "documents": [{"text": d} for d in docs], "top_n": 2,
                                        "return_documents": False})
    assert [r["index"] for r in top["results"]] == order[:2]
    assert all("document" not in r for r in top["results"])
    expect_error(reranker, "/v1/embeddings", {"input": "x"}, "model", "reranker", "/rerank")


def test_bad_input_is_refused_by_field_and_the_server_serves_on(embedder, reranker):
    before = bits(embed(embedder, "a lazy dog")[0])
    before_score = post_ok(reranker, "/rerank", {"query": "q", "documents": ["a", "b"]})["results"]
    expect_error(embedder, "/v1/embeddings", {"input": []}, "input", "empty")
    expect_error(embedder, "/v1/embeddings", {"input": ["x"] * 10000}, "input", "2048")
    expect_error(embedder, "/v1/embeddings", {"input": ["x"] * 2049}, "input", "2048")
    expect_error(embedder, "/v1/embeddings", {"input": "x", "dimensions": HIDDEN + 1}, "dimensions", str(HIDDEN))
    expect_error(embedder, "/v1/embeddings", {"input": "x", "encoding_format": "binary"}, "encoding_format")
    expect_error(embedder, "/v1/embeddings", {"input": [[1, 2], [10 ** 9]]}, "input", "input 1", "vocabulary")
    expect_error(embedder, "/v1/embeddings", {"input": "x", "model": "other"}, "model", status=404)
    expect_error(embedder, "/score", {"text_1": ["a", "b"], "text_2": ["a", "b", "c"]}, "text_1")
    expect_error(embedder, "/score", {"text_1": "a", "text_2": []}, "text_2")
    expect_error(reranker, "/rerank", {"query": "q", "documents": []}, "documents")
    expect_error(reranker, "/rerank", {"query": "q", "documents": ["a", " ".join(["word"] * CONTEXT)]},
                 "documents", "pair 1", str(CONTEXT))
    status, _ = embedder.request("GET", "/v1/embeddings")
    assert status == 405
    # 2048 inputs pass, in windows of the queue's size.
    many = embed(embedder, ["a lazy dog"] * 2048, dimensions=8)
    assert len(many) == 2048 and len({bits(e) for e in many}) == 1
    assert bits(embed(embedder, "a lazy dog")[0]) == before
    assert post_ok(reranker, "/rerank", {"query": "q", "documents": ["a", "b"]})["results"] == before_score


def test_a_generation_model_refuses_pooling_routes_by_name():
    s = Server("--max-model-len", str(CONTEXT))
    try:
        for path, body in (("/v1/embeddings", {"input": "x"}), ("/pooling", {"input": "x"}),
                           ("/score", {"text_1": "a", "text_2": "b"}), ("/rerank", {"query": "a", "documents": ["b"]})):
            expect_error(s, path, body, "model", "--runner pooling")
        post_ok(s, "/v1/completions", {"prompt": "hello", "max_tokens": 2})
    finally:
        s.close()


def load_requests(count, scores):
    """A fixed mix: embeddings (one to three inputs, text or token ids, some cut to 64 dimensions;
    on a reranker /score and /pooling instead), reranking, and completions (seeded sampling and
    greedy, with logprobs)."""
    rng = random.Random(32)

    def text(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    reqs = []
    for i in range(count):
        kind = i % 4
        if kind == 0 and scores:
            if i % 8 == 0:
                reqs.append(("/score", {"model": NAME, "text_1": text(3), "text_2": [text(9), text(40)]}))
            else:
                reqs.append(("/pooling", {"model": NAME, "input": [text(rng.choice([2, 30, 120]))]}))
        elif kind == 0:
            body = {"model": NAME, "input": [text(rng.choice([2, 9, 40, 150])) for _ in range(1 + i % 3)]}
            if i % 8 == 0:
                body["dimensions"] = 64
            if i % 12 == 4:
                body["input"] = [[rng.randrange(100, 20000) for _ in range(rng.randint(3, 60))]]
            reqs.append(("/v1/embeddings", body))
        elif kind == 1:
            reqs.append(("/rerank", {"model": NAME, "query": text(4),
                                     "documents": [text(rng.choice([3, 20, 80])) for _ in range(2 + i % 4)]}))
        else:
            body = {"model": NAME, "prompt": text(rng.choice([1, 12, 60, 200])), "max_tokens": rng.randint(8, 24),
                    "logprobs": 2, "return_tokens_as_token_ids": True, "seed": 500 + i}
            body["temperature"] = 0.8 if kind == 2 else 0
            if kind == 2 and i % 8 == 6:
                body["n"] = 2
            reqs.append(("/v1/completions", body))
    return reqs


def load_answer(path, resp):
    """What the contract covers: float32 bits of embeddings and scores, token ids and logprobs."""
    if path == "/v1/embeddings":
        return [(d["index"], bits(d["embedding"])) for d in resp["data"]], resp["usage"]
    if path == "/pooling":
        return [(d["index"], bits(d["data"])) for d in resp["data"]], resp["usage"]
    if path == "/score":
        return [(d["index"], bits([d["score"]])) for d in resp["data"]], resp["usage"]
    if path == "/rerank":
        return [(r["index"], bits([r["relevance_score"]])) for r in resp["results"]], resp["usage"]
    return canonical(path, resp)


def run_load(server, clients, per_client, scores):
    """Each request alone, in turn; then `clients` threads at once, each sending its share of the
    same requests (in a shuffled order) back to back. Returns (requests, seconds of the burst)."""
    reqs = load_requests(clients * per_client, scores)
    alone = [load_answer(path, post_ok(server, path, body)) for path, body in reqs]
    order = list(range(len(reqs)))
    random.Random(7).shuffle(order)
    together = {}

    def client(c):
        for i in order[c::clients]:
            path, body = reqs[i]
            together[i] = load_answer(path, post_ok(server, path, body))

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    seconds = time.time() - t0
    mismatches = [(i, reqs[i][0]) for i in range(len(reqs)) if together[i] != alone[i]]
    assert not mismatches, mismatches
    kinds = {p: sum(q == p for q, _ in reqs) for p in sorted({q for q, _ in reqs})}
    print(f"\n{clients} concurrent clients, {len(reqs)} requests {kinds}: {seconds:.1f} s, every answer the "
          "bits of the request alone")
    return reqs, seconds


LOAD_CLIENTS = 16 if os.environ.get("DITTO_SANITIZER") == "thread" else 64


def test_load_mixing_embeddings_rerank_and_generation_is_each_request_alone(embedder):
    run_load(embedder, LOAD_CLIENTS, 3, scores=False)


def test_load_on_a_reranker_is_each_request_alone(reranker):
    run_load(reranker, LOAD_CLIENTS // 2, 2, scores=True)
