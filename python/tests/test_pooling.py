"""Embeddings and scores through Python (LLM.embed / encode / score, vLLM's API): the shapes, and
each result the same float32 bits alone, in a shuffled batch of 64, chunked, with prefix-cache hits,
and from the `ditto embed` command. Models: the session's 2-layer qwen3-0.6b loaded with
runner="pooling", and a 2-layer qwen3-reranker-0.6b (Qwen3-Reranker's configuration and tokenizer,
random weights) loaded with task="score"."""
import json
import math
import random
import struct
import subprocess

import pytest

from conftest import ditto_command, make_model
from ditto import (LLM, EmbeddingOutput, EmbeddingRequestOutput, PoolingOutput, PoolingParams, PoolingRequestOutput,
                   ScoringOutput, ScoringRequestOutput)

WORDS = ("retrieval pipelines embed the same document twice once when it is indexed and again beside other "
         "documents expecting the same vector evaluation scores pairs").split()
QUERY = "Which documents talk about the same vector?"
DOCS = ["Retrieval pipelines embed a document twice.", "The weather is fine today.", QUERY,
        "Evaluation pipelines score the same pair twice.", "A vector is an arrow.", "Bits never change."]
RERANKER_OVERRIDES = {"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"],
                      "is_original_qwen3_reranker": True}


def bits(values):
    """float32 values (Python floats that hold them) as their bytes: equal iff the same bits."""
    return struct.pack(f"<{len(values)}f", *values)


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def prompts_64():
    """64 texts from 3 to ~90 tokens; groups share long prefixes, so a batch finds prefix-cache hits."""
    rng = random.Random(7)
    prefixes = [" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(4)]
    return [(prefixes[i % 4] + " " if i % 3 else "") + " ".join(rng.choice(WORDS) for _ in range(2 + i % 29)) +
            f" item {i}" for i in range(64)]


@pytest.fixture(scope="module")
def embedder(model_dir):
    return LLM(model=model_dir, runner="pooling", kv_cache_memory="256MiB")


@pytest.fixture(scope="module")
def reranker_dir(tmp_path_factory):
    return str(make_model(tmp_path_factory.mktemp("models") / "qwen3-reranker-0.6b-2l", preset="qwen3-reranker-0.6b"))


@pytest.fixture(scope="module")
def reranker(reranker_dir):
    return LLM(model=reranker_dir, task="score", kv_cache_memory="256MiB")


def test_embed_gives_unit_vectors_of_hidden_size_and_matryoshka_prefixes(embedder):
    out = embedder.embed(["Hello, world!", "Bits never change."], use_tqdm=False)
    assert [type(o) for o in out] == [EmbeddingRequestOutput] * 2 and isinstance(out[0].outputs, EmbeddingOutput)
    e = out[0].outputs.embedding
    assert out[0].outputs.hidden_size == len(e) == 1024 and all(type(x) is float for x in e)
    assert abs(math.fsum(x * x for x in e) - 1.0) < 1e-5
    assert out[0].prompt_token_ids == embedder.get_tokenizer().encode("Hello, world!") and out[0].finished
    assert out[0].request_id != out[1].request_id and bits(e) != bits(out[1].outputs.embedding)
    # The same prompt as {"prompt": ...}, as token ids, and through encode(): the same bits.
    ids = {"prompt_token_ids": out[0].prompt_token_ids}
    assert bits(embedder.embed({"prompt": "Hello, world!"}, use_tqdm=False)[0].outputs.embedding) == bits(e)
    assert bits(embedder.embed(ids, use_tqdm=False)[0].outputs.embedding) == bits(e)
    pooled = embedder.encode("Hello, world!", use_tqdm=False)[0]
    assert type(pooled) is PoolingRequestOutput and isinstance(pooled.outputs, PoolingOutput)
    assert bits(pooled.outputs.data) == bits(e)
    # dimensions: the first k values of the raw vector, then normalized; normalize=False: the raw one.
    raw = embedder.embed("Hello, world!", PoolingParams(normalize=False), use_tqdm=False)[0].outputs.embedding
    assert max(abs(x / math.sqrt(math.fsum(r * r for r in raw)) - y) for x, y in zip(raw, e)) < 1e-6
    cut = embedder.embed("Hello, world!", PoolingParams(dimensions=64), use_tqdm=False)[0].outputs.embedding
    norm = math.sqrt(math.fsum(r * r for r in raw[:64]))
    assert len(cut) == 64 and max(abs(x / norm - y) for x, y in zip(raw[:64], cut)) < 1e-6
    per_prompt = embedder.embed(["Hello, world!"] * 2, [PoolingParams(dimensions=8), PoolingParams()], use_tqdm=False)
    assert [o.outputs.hidden_size for o in per_prompt] == [8, 1024] and bits(per_prompt[1].outputs.embedding) == bits(e)


def test_each_embedding_is_its_bits_alone_in_a_shuffled_chunked_batch_and_from_the_prefix_cache(model_dir):
    texts = prompts_64()
    alone_llm = LLM(model=model_dir, runner="pooling", kv_cache_memory="256MiB", enable_prefix_caching=False)
    alone = [bits(alone_llm.embed(t, use_tqdm=False)[0].outputs.embedding) for t in texts]
    order = list(range(64))
    random.Random(11).shuffle(order)
    # Short steps (chunked prefill) and at most 16 sequences at a time: rows of other prompts around each one.
    batch_llm = LLM(model=model_dir, runner="pooling", kv_cache_memory="256MiB", max_num_batched_tokens=64,
                    max_num_seqs=16)
    for _ in range(2):  # the second time most prompts find their blocks in the prefix cache
        out = batch_llm.embed([texts[i] for i in order], use_tqdm=False)
        assert [bits(o.outputs.embedding) for o in out] == [alone[i] for i in order]
    assert sum(o.num_cached_tokens > 0 for o in out) > 32


def test_mean_pooling_is_invariant_and_equals_last_for_one_token(model_dir, embedder):
    mean = LLM(model=model_dir, runner="pooling", pooler_config={"pooling_type": "MEAN"}, kv_cache_memory="256MiB",
               max_num_batched_tokens=32)
    texts = prompts_64()[:12]
    alone = [bits(mean.embed(t, use_tqdm=False)[0].outputs.embedding) for t in texts]
    assert [bits(o.outputs.embedding) for o in mean.embed(texts[::-1], use_tqdm=False)] == alone[::-1]
    last = [bits(o.outputs.embedding) for o in embedder.embed(texts, use_tqdm=False)]
    assert all(a != b for a, b in zip(alone, last))
    one = {"prompt_token_ids": [9707]}  # a one-token prompt: the mean of one row is that row
    assert bits(mean.embed(one, use_tqdm=False)[0].outputs.embedding) == \
        bits(embedder.embed(one, use_tqdm=False)[0].outputs.embedding)
    older_name = LLM(model=model_dir, runner="pooling", override_pooler_config={"pooling_type": "MEAN"},
                     kv_cache_memory="64MiB")
    assert bits(older_name.embed(texts[0], use_tqdm=False)[0].outputs.embedding) == alone[0]


def test_reranker_scores_are_probabilities_the_same_bits_alone_in_any_batch(reranker_dir, reranker):
    out = reranker.score(QUERY, DOCS, use_tqdm=False)
    assert [type(o) for o in out] == [ScoringRequestOutput] * len(DOCS) and isinstance(out[0].outputs, ScoringOutput)
    scores = [o.outputs.score for o in out]
    assert all(0.0 < s < 1.0 for s in scores) and len(set(scores)) > 1
    assert out[0].prompt_token_ids and out[0].prompt_token_ids != out[1].prompt_token_ids
    assert bits([o.outputs.score for o in reranker.score([QUERY] * len(DOCS), DOCS, use_tqdm=False)]) == bits(scores)
    assert [bits([reranker.score(QUERY, d, use_tqdm=False)[0].outputs.score]) for d in DOCS] == \
        [bits([s]) for s in scores]
    order = list(range(len(DOCS)))
    random.Random(5).shuffle(order)
    mixed = reranker.score([QUERY] * len(DOCS) + DOCS, [DOCS[i] for i in order] + DOCS[::-1], use_tqdm=False)
    assert bits([o.outputs.score for o in mixed[:len(DOCS)]]) == bits([scores[i] for i in order])
    # use_activation=False: the logit difference, whose sigmoid is the score.
    raw = reranker.score(QUERY, DOCS[0], pooling_params=PoolingParams(use_activation=False), use_tqdm=False)
    assert abs(1.0 / (1.0 + math.exp(-raw[0].outputs.score)) - scores[0]) < 1e-6
    # The instruction reaches Qwen3-Reranker's prompt.
    told = reranker.score(QUERY, DOCS[0], chat_template_kwargs={"instruction": "Judge relevance to a question"},
                          use_tqdm=False)[0]
    assert told.prompt_token_ids != out[0].prompt_token_ids
    # vLLM's way of loading Qwen3-Reranker (hf_overrides as a dict) is the same model.
    overridden = LLM(model=reranker_dir, runner="pooling", hf_overrides=RERANKER_OVERRIDES, kv_cache_memory="256MiB")
    assert bits([o.outputs.score for o in overridden.score(QUERY, DOCS, use_tqdm=False)]) == bits(scores)


def test_an_embedding_models_score_is_the_cosine_of_its_embeddings(embedder):
    vectors = [o.outputs.embedding for o in embedder.embed([QUERY] + DOCS, use_tqdm=False)]
    scores = [o.outputs.score for o in embedder.score({"prompt": QUERY}, DOCS, use_tqdm=False)]
    assert max(abs(s - cosine(vectors[0], v)) for s, v in zip(scores, vectors[1:])) < 1e-6
    assert abs(scores[2] - 1.0) < 1e-6  # the query against itself
    assert [bits([embedder.score(QUERY, d, use_tqdm=False)[0].outputs.score]) for d in DOCS] == \
        [bits([s]) for s in scores]
    assert bits([o.outputs.score for o in embedder.score(DOCS, DOCS[::-1], use_tqdm=False)]) == \
        bits([embedder.score(a, b, use_tqdm=False)[0].outputs.score for a, b in zip(DOCS, DOCS[::-1])])


def test_bad_input_raises_value_error_naming_the_field_and_disturbs_nothing(model_dir, llm, embedder, reranker):
    before = bits(embedder.embed(QUERY, use_tqdm=False)[0].outputs.embedding)
    with pytest.raises(ValueError, match='runner="pooling"'):
        llm.embed("a generation model")
    with pytest.raises(ValueError, match='runner="pooling"'):
        llm.score("a", "b")
    cases = [
        (lambda: embedder.embed([QUERY, ""], use_tqdm=False), r"prompt 1: .*input is empty"),
        (lambda: embedder.embed({"prompt_token_ids": [10**6]}, use_tqdm=False), r"prompt 0: .*out of vocabulary"),
        (lambda: embedder.embed(QUERY, PoolingParams(dimensions=2048), use_tqdm=False), r"prompt 0: dimensions"),
        (lambda: embedder.embed(QUERY, PoolingParams(dimensions=1.5)), "dimensions must be an integer"),
        (lambda: embedder.embed(QUERY, PoolingParams(normalize="yes")), "normalize must be"),
        (lambda: embedder.embed(QUERY, [PoolingParams()] * 2), "pooling_params"),
        (lambda: embedder.embed(QUERY, PoolingParams(task="score")), "cannot overwrite task='score'"),
        (lambda: embedder.encode(QUERY, pooling_task="score", use_tqdm=False), r"prompt 0: .*task"),
        (lambda: embedder.embed(QUERY, tokenization_kwargs={"padding": True}), "tokenization_kwargs: padding"),
        (lambda: embedder.embed({"prompt": QUERY, "cache_salt": "s"}), "cache_salt"),
        (lambda: embedder.embed(QUERY, truncate_prompt_tokens=-2, use_tqdm=False), "truncate_prompt_tokens"),
        (lambda: embedder.score(DOCS[:2], DOCS[:3]), "data_1 has 2 texts for 3"),
        (lambda: embedder.score(QUERY, []), "data_2: at least one"),
        (lambda: embedder.score(QUERY, [{"prompt": 3}]), r"data_2\[0\]: 'prompt' must be a string"),
        (lambda: reranker.score(QUERY, DOCS[0], chat_template="{{ x }}"), "chat_template"),
        (lambda: reranker.embed(QUERY), "use LLM.score"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert bits(embedder.embed(QUERY, use_tqdm=False)[0].outputs.embedding) == before
    # Longer than the context: refused naming the input, or its last tokens kept (truncate_prompt_tokens).
    short = LLM(model=model_dir, runner="pooling", max_model_len=16, kv_cache_memory="64MiB")
    text = " ".join(WORDS)
    with pytest.raises(ValueError, match=r"prompt 0: .*maximum context length is 16"):
        short.embed(text, use_tqdm=False)
    kept = short.embed(text, truncate_prompt_tokens=-1, use_tqdm=False)[0]
    assert kept.prompt_token_ids == short.get_tokenizer().encode(text)[-16:]
    assert bits(kept.outputs.embedding) == \
        bits(embedder.embed({"prompt_token_ids": kept.prompt_token_ids}, use_tqdm=False)[0].outputs.embedding)


def test_the_embed_command_gives_the_bits_python_gives(tmp_path, model_dir, embedder, reranker_dir, reranker):
    lines = [{"input": QUERY}, {"input": [9707, 11, 1879]}, {"input": DOCS[0], "dimensions": 32},
             {"input": DOCS[1], "normalize": False}, {"text_1": QUERY, "text_2": DOCS[0]}]

    def run(model, *flags, expect_rc=0):
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        done = subprocess.run([ditto_command(), "embed", "--model", model, *flags, "--kv-cache-memory", "256MiB",
                               "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl")],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == expect_rc, done.stderr
        return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]

    got = run(model_dir, "--runner", "pooling")
    params = [PoolingParams(), PoolingParams(), PoolingParams(dimensions=32), PoolingParams(normalize=False)]
    prompts = [QUERY, {"prompt_token_ids": [9707, 11, 1879]}, DOCS[0], DOCS[1]]
    want = [o.outputs.embedding for o in embedder.embed(prompts, params, use_tqdm=False)]
    assert [bits(g["embedding"]) for g in got[:4]] == [bits(w) for w in want]
    assert bits([got[4]["score"]]) == bits([embedder.score(QUERY, DOCS[0], use_tqdm=False)[0].outputs.score])
    # On a reranker an input line is scored; `dimensions` (embeddings only) fails on its own line, which makes
    # the command exit 1, and every other line is still answered.
    on_reranker = run(reranker_dir, "--task", "score", expect_rc=1)
    assert len(on_reranker) == 5 and [("error" in line) for line in on_reranker] == [False, False, True, False, False]
    assert "dimensions" in on_reranker[2]["error"] and on_reranker[2]["error"].startswith("line 3: ")
    pair = on_reranker[4]
    assert bits([pair["score"]]) == bits([reranker.score(QUERY, DOCS[0], use_tqdm=False)[0].outputs.score])
