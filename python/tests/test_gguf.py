"""`LLM(model="file.gguf")`: the real SmolLM2-135M-Instruct Q4_1 GGUF (scripts/install-deps.sh puts it
in models/) runs through the Python API — its tokenizer and chat template from the file, a chat
that says real words, the same bits alone and in a batch, and the tokenizer's transformers-style
properties."""
import pytest

from conftest import REPO

SMOLLM2 = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2():
    if not SMOLLM2.is_file():
        pytest.fail(f"{SMOLLM2} is missing: scripts/install-deps.sh fetches it (make test runs it)")
    import ditto
    return ditto.LLM(model=str(SMOLLM2), kv_cache_memory="256MiB")


def test_chat_says_real_words(smollm2):
    from ditto import SamplingParams
    out = smollm2.chat([{"role": "user", "content": "Write a haiku about the sea."}],
                       SamplingParams(temperature=0, max_tokens=60), use_tqdm=False)
    text = out[0].outputs[0].text
    assert text == "In the depths of the blue, a lone vessel sails, a reflection of the unending beauty of the sea."
    assert out[0].outputs[0].finish_reason == "stop"


def test_the_same_bits_alone_and_in_a_batch(smollm2):
    from ditto import SamplingParams
    p = SamplingParams(temperature=0.8, max_tokens=24, seed=7, logprobs=2)
    prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "Water boils at"]
    alone = smollm2.generate(prompts[1], p, use_tqdm=False)[0].outputs[0]
    together = smollm2.generate(prompts, p, use_tqdm=False)[1].outputs[0]
    assert alone.token_ids == together.token_ids
    assert alone.cumulative_logprob == together.cumulative_logprob
    assert alone.text == together.text


def test_tokenizer_comes_from_the_file(smollm2):
    tok = smollm2.get_tokenizer()
    assert tok.name_or_path == str(SMOLLM2)
    assert tok.chat_template.startswith("{% for message in messages %}")
    assert tok.eos_token == "<|im_end|>"
    ids = tok.encode("Hello world")
    assert tok.decode(ids) == "Hello world"
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
