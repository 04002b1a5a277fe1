"""LLM: vLLM's offline API (vllm/entrypoints/llm.py) over ditto's engine.

    llm = LLM(model="Qwen/Qwen3-8B")                   # a directory or a Hugging Face cache id
    outputs = llm.generate(prompts, SamplingParams(temperature=0.7, max_tokens=100, seed=42))

    embedder = LLM(model="Qwen/Qwen3-Embedding-0.6B")  # pools by its sentence-transformers files
    vectors = [o.outputs.embedding for o in embedder.embed(texts)]
    reranker = LLM(model="Qwen/Qwen3-Reranker-0.6B", task="score")
    scores = [o.outputs.score for o in reranker.score(query, documents)]

Each output is the same bits whatever else is in the batch (docs/INVARIANCE.md).
"""
from __future__ import annotations

import atexit
import json
import numbers
import os
import sys
import threading
import time
from typing import Any, Optional, Sequence, Union

from ditto import _ditto
from ditto.outputs import (EmbeddingRequestOutput, PoolingRequestOutput, RequestOutput, ScoringRequestOutput,
                           from_engine, pooling_from_engine)
from ditto.rl import WeightTransferMixin, check_weight_transfer_config
from ditto.pooling_params import PoolingParams, PoolingParamsArg, params_per_prompt, truncation, with_task
from ditto.sampling_params import RequestOutputKind, SamplingParams
from ditto.tokenizer import Tokenizer, chat_prompt

# vLLM arguments that only mean something on a GPU or for features ditto does not have: accepted,
# with one warning line each, so a vLLM script runs unchanged.
_IGNORED_ARGS = frozenset({
    "gpu_memory_utilization", "enforce_eager", "swap_space", "cpu_offload_gb", "max_seq_len_to_capture",
    "disable_custom_all_reduce", "disable_async_output_proc", "compilation_config", "kv_cache_dtype",
    "enable_chunked_prefill", "disable_log_stats", "revision", "tokenizer_revision", "tokenizer_mode",
    "trust_remote_code", "download_dir", "load_format", "distributed_executor_backend", "hf_token",
    "pipeline_parallel_size", "max_cpu_loras", "enable_lora", "mm_processor_kwargs",
    "async_scheduling", "worker_cls", "seed_everything", "served_model_name",
    "data_parallel_size", "limit_mm_per_prompt", "max_loras", "num_gpu_blocks_override", "model_impl",
    "config_format", "enable_expert_parallel", "preemption_mode", "max_num_partial_prefills",
})
# vLLM arguments that would change the outputs, which ditto cannot honour: refused unless unset.
_REFUSED_ARGS = frozenset({"rope_scaling", "logits_processors"})

# generation_config.json keys that become default sampling parameters (vLLM's
# ModelConfig.get_diff_sampling_param), max_new_tokens as max_tokens.
_GENERATION_CONFIG_KEYS = {"repetition_penalty": "repetition_penalty", "temperature": "temperature",
                           "top_k": "top_k", "top_p": "top_p", "min_p": "min_p", "max_new_tokens": "max_tokens"}

PromptType = Union[str, dict]  # a text, {"prompt": text} or {"prompt_token_ids": [...]}


def _splitmix64(x: int) -> int:
    """The default seed of the k-th unseeded request, x = seed + k: the engine's derived_seed (the top
    53 bits of SplitMix64; include/ditto/sampling_params.h), one rule for every front end."""
    return _ditto.derived_seed(x & 0xFFFFFFFFFFFFFFFF, 0)


class LLM(WeightTransferMixin):
    """A model loaded for offline generation, with vLLM's constructor arguments.

    generation_config: "auto" (the model's generation_config.json gives the default sampling
    parameters, get_default_sampling_params), "vllm" (SamplingParams() as it is), or a folder
    holding a generation_config.json (vLLM's --generation-config);
    override_generation_config: keys that win over both.
    model: a directory (config.json, safetensors, tokenizer.json) or a Hugging Face cache id such
    as "Qwen/Qwen3-8B" (found under $HF_HUB_CACHE or $HF_HOME/hub; nothing is downloaded).
    seed: requests without a seed get one derived from it (the k-th request's: SplitMix64 of
    seed + k), so a script gives the same text every run; None: drawn from the OS. A negative seed
    is refused (ValueError), as vLLM's engine refuses it (numpy's seed range).
    One LLM runs one generate(), chat(), embed(), score() or encode() at a time; calls from other
    threads wait their turn. max_model_len: the context (prompt + output) in tokens, default the
    model's. max_num_seqs, max_num_batched_tokens, block_size,
    enable_prefix_caching, max_logprobs: the engine's, as in vLLM. long_prefill_token_threshold (vLLM's
    EngineArgs field): the most prompt tokens one request prefills in a step shared with others, so no
    request waits behind a long prompt; 0 (the default): a quarter of max_num_batched_tokens. ditto's
    own: kv_cache_memory (bytes or "2GiB", default "2GiB"; vLLM's kv_cache_memory_bytes, an int of
    bytes, is the same knob: give one, or both with the same value), threads (default:
    $DITTO_NUM_THREADS or every core).
    Every engine knob is checked and set by the one table the CLI's flags come from too
    (src/engine/engine_args_table.cc; its names: ditto._ditto.engine_arg_names()); a knob of that
    table not in this signature may be given by name.

    speculative_config (vLLM's): {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": a,
    "prompt_lookup_max": b} guesses by prompt lookup, {"model": DRAFT, "num_speculative_tokens": k} by a
    smaller model with the same tokenizer; disable_by_batch_size turns guessing off in steps with that
    many running sequences. Outputs are the same bits with it on or off; only the speed changes.

    enable_return_routed_experts=True (vLLM's; a MoE model only, else ValueError naming it): every
    finished CompletionOutput carries routed_experts, the experts each MoE layer's router chose for
    each token that went through the model (docs/RL_ROUTED_EXPERTS.md).

    Pooling (vLLM's runner="pooling"): embed(), score() and encode() run on a model loaded with
    runner="pooling" (a causal LM's final-normed hidden states as embeddings), task="embed" or
    task="score" (a causal LM reranker such as Qwen3-Reranker: its yes/no logits), or whose files
    say it pools (Qwen3-Embedding's sentence-transformers modules, a GGUF pooling_type).
    pooler_config={"pooling_type": "LAST" | "MEAN" | "CLS", "normalize": bool} (vLLM's; its older
    name override_pooler_config too) and hf_overrides={"architectures":
    ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True} (vLLM's way to load Qwen3-Reranker; also
    "matryoshka_dimensions") are read as vLLM reads them; another hf_overrides key is a ValueError.
    Such a model still generates.

    tensor_parallel_size=N splits the model over N processes, as vLLM's external launcher does: run
    the same script under `mpirun -np N python script.py`. Rank 0 loads its shard and drives; on
    every other rank the constructor serves rank 0 until rank 0's script ends, and then generate()
    and chat() return [] there (is_driver is False). Outputs are the bits of one process for every N.

    Raises FileNotFoundError for a model that is not there, ValueError for a bad argument or file
    (naming it), MemoryError when the weights or KV cache do not fit, TypeError for an argument
    vLLM does not have either. vLLM's GPU-only arguments are accepted with a warning.
    """

    def __init__(self, model: str, tokenizer: Optional[str] = None, dtype: str = "auto", seed: int = 0,
                 tensor_parallel_size: int = 1, max_model_len: Optional[int] = None, max_num_seqs: int = 256,
                 max_num_batched_tokens: int = 2048, enable_prefix_caching: bool = True, block_size: int = 16,
                 max_logprobs: int = 20, quantization: Optional[str] = None, skip_tokenizer_init: bool = False,
                 generation_config: str = "auto", override_generation_config: Optional[dict] = None,
                 kv_cache_memory: Union[int, str, None] = None, threads: Optional[int] = None,
                 long_prefill_token_threshold: int = 0, speculative_config: Optional[dict] = None,
                 kv_cache_memory_bytes: Optional[int] = None, **kwargs: Any) -> None:
        kv_cache_memory = _kv_cache_memory(kv_cache_memory, kv_cache_memory_bytes)
        # vLLM's RL arguments: the weight-transfer backend (checked here), and sleep mode, which
        # ditto always has (LLM.sleep / wake_up).
        self.weight_transfer_backend = check_weight_transfer_config(kwargs.pop("weight_transfer_config", None))
        kwargs.pop("enable_sleep_mode", None)
        if kwargs.get("override_pooler_config") is not None:  # vLLM's older name of pooler_config
            if kwargs.get("pooler_config") not in (None, kwargs["override_pooler_config"]):
                raise ValueError("pooler_config and override_pooler_config are the same knob with different values; "
                                 "give one")
            kwargs["pooler_config"] = kwargs["override_pooler_config"]
        kwargs.pop("override_pooler_config", None)
        # Every engine knob goes through the one table (EngineArgs.set): the keywords above and any
        # other knob of the table given by name. None leaves a knob at its default.
        engine_kwargs = {"threads": threads, "block_size": block_size, "kv_cache_memory": kv_cache_memory,
                         "max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs,
                         "long_prefill_token_threshold": long_prefill_token_threshold,
                         "enable_prefix_caching": bool(enable_prefix_caching), "max_model_len": max_model_len,
                         "max_logprobs": max_logprobs, "tensor_parallel_size": tensor_parallel_size,
                         "generation_config": generation_config, "speculative_config": speculative_config}
        for name in [n for n in kwargs if n in _ditto.engine_arg_names()]:
            engine_kwargs[name] = kwargs.pop(name)
        for name, value in kwargs.items():
            if name in _REFUSED_ARGS:
                if value:
                    raise ValueError(f"{name}={value!r} is not supported by ditto")
                continue
            if name not in _IGNORED_ARGS:
                raise TypeError(f"LLM.__init__() got an unexpected keyword argument '{name}'")
            print(f"ditto: LLM argument {name}={value!r} has no effect on ditto (a CPU engine); ignored",
                  file=sys.stderr)
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a directory or a Hugging Face id, got {model!r}")
        if tokenizer is not None and os.path.normpath(os.fspath(tokenizer)) != os.path.normpath(model):
            raise ValueError(f"tokenizer={tokenizer!r}: ditto reads the tokenizer from the model ({model!r}); "
                             "a separate tokenizer is not supported")
        if dtype not in ("auto", "bfloat16", "bf16"):
            raise ValueError(f"dtype={dtype!r}: ditto computes with bfloat16 weights; use 'auto' or 'bfloat16'")
        if quantization is not None:
            raise ValueError(f"quantization={quantization!r} is not supported")
        if skip_tokenizer_init:
            raise ValueError("skip_tokenizer_init=True is not supported (give token-id prompts instead)")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 1 << 64):
            raise ValueError(f"seed must be None or an integer in [0, 2^64 - 1], got {seed!r} (vLLM's engine "
                             "refuses a negative seed too)")
        args = _ditto.EngineArgs()
        args.model = model
        for name, value in engine_kwargs.items():
            args.set(name, json.dumps(value))
        tensor_parallel_size = args.tensor_parallel_size
        self.is_driver = True
        if tensor_parallel_size > 1:
            if _ditto.serve_as_tensor_parallel_rank(tensor_parallel_size):
                self.is_driver = False  # rank 0's script has ended; it returned the results
                return
            # Rank 0 releases the other ranks when this interpreter exits.
            atexit.register(_ditto.shutdown_tensor_parallel)
        self._engine = _ditto.Engine(args)
        self._default_sampling = _default_sampling(self._engine.generation_defaults(), override_generation_config)
        self._lock = threading.Lock()  # one generate at a time: calls from other threads wait
        self._seed = seed
        self._next_request = 0
        # Pooling requests are numbered apart ("pool-K"): nothing is sampled, so they take no
        # generation request's number and leave every later default seed as it was.
        self._next_pooling_request = 0
        self._tokenizer = Tokenizer(self._engine)

    def get_default_sampling_params(self) -> SamplingParams:
        """The SamplingParams generate() and chat() use when given none: with generation_config
        "auto" (the default), SamplingParams() with the model's generation_config.json values for
        temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens (as max_tokens);
        with "vllm", SamplingParams() as it is. override_generation_config's keys win."""
        if not self.is_driver:
            return SamplingParams()
        return SamplingParams(**self._default_sampling)

    @property
    def system_fingerprint(self) -> Optional[str]:
        """OpenAI's system_fingerprint of this engine, "fp_" + 16 hex digits: a hash of the weight
        files' contents, ditto's numerics version and the instruction-set class (one for all ISAs,
        which give the same bits). Two engines with the same fingerprint answer a request with the
        same bits; `ditto serve` reports the same value. None on a tensor-parallel rank other than 0."""
        return self._engine.system_fingerprint if self.is_driver else None

    def reset_prefix_cache(self) -> bool:
        """Empties the prefix cache the LLM keeps between generate() and chat() calls (vLLM's), so
        later prompts are computed again (the same bits either way; num_cached_tokens shows the
        difference). Returns False, dropping nothing, while a generate() or chat() runs on another
        thread, as vLLM does while requests run; True otherwise."""
        if not self.is_driver:
            return True
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._engine.reset_prefix_cache()
        finally:
            self._lock.release()

    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (encode, decode, apply_chat_template). Raises RuntimeError on a
        tensor-parallel rank other than 0, which holds no engine."""
        if not self.is_driver:
            raise RuntimeError("this process is a tensor-parallel rank other than 0; rank 0 holds the tokenizer")
        return self._tokenizer

    def generate(self, prompts: Union[PromptType, Sequence[PromptType]],
                 sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None,
                 use_tqdm: bool = True, lora_request: None = None) -> list[RequestOutput]:
        """Completes every prompt and returns the outputs in input order.

        prompts: a string, a {"prompt": str} or {"prompt_token_ids": [int, ...]} dict (either with
        vLLM's "cache_salt": the prefix cache shared only with the same salt), or a list of
        them. sampling_params: one for all (default SamplingParams()) or one per prompt.
        use_tqdm: a progress bar with the requests done and the input / output tokens per second.
        Raises ValueError naming the prompt and field for a bad prompt (nothing runs then);
        KeyboardInterrupt (Ctrl-C) aborts the batch. Releases the GIL while the engine runs.
        """
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        prompts = _prompt_list(prompts)
        engine_prompts = [_prompt(i, p) for i, p in enumerate(prompts)]
        return self._run(engine_prompts, sampling_params, use_tqdm, _cache_salts(prompts))

    def beam_search(self, prompts: Union[PromptType, Sequence[PromptType]], params: "BeamSearchParams",
                    lora_request: None = None, use_tqdm: bool = False) -> list["BeamSearchOutput"]:
        """vLLM's LLM.beam_search: for each prompt (a string, {"prompt": ...} or
        {"prompt_token_ids": [...]}), its at most params.beam_width best sequences by
        length-penalised score, best first. The sampled candidates of temperature > 0 are keyed by
        the LLM's seed. Raises ValueError naming the parameter or the prompt."""
        from ditto.beam_search import BeamSearchParams, from_engine
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        if not isinstance(params, BeamSearchParams):
            raise ValueError(f"params must be a BeamSearchParams, got {type(params).__name__}")
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        engine_prompts = [_prompt(i, p) for i, p in enumerate(prompts)]
        if any(salt is not None for salt in _cache_salts(prompts)):
            raise ValueError("cache_salt is not supported by beam_search (its steps share the unsalted prefix cache)")
        if not self.is_driver:
            return []
        with self._lock:
            outs = self._engine.beam_search(engine_prompts, params._to_engine(), self._seed or 0)
        return [from_engine(o) for o in outs]

    def chat(self, messages: Union[list[dict], list[list[dict]]],
             sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None,
             use_tqdm: bool = True, lora_request: None = None, chat_template: Optional[str] = None,
             add_generation_prompt: bool = True, continue_final_message: bool = False,
             tools: Optional[list[dict]] = None, chat_template_kwargs: Optional[dict] = None) -> list[RequestOutput]:
        """Answers one conversation (a list of {"role", "content"} messages) or a list of them,
        rendered with the model's chat template (chat_template_kwargs reach it, e.g.
        {"enable_thinking": False}; tools are listed for it). Returns one RequestOutput per
        conversation; raises as generate()."""
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        if chat_template is not None:
            raise ValueError("chat_template: ditto uses the model's own chat template")
        if continue_final_message and add_generation_prompt:
            add_generation_prompt = False  # vLLM's rule: continuing the last message adds no new turn
        conversations = messages if messages and isinstance(messages[0], list) else [messages]
        engine_prompts = [chat_prompt(c, tools, chat_template_kwargs, add_generation_prompt, continue_final_message)
                          for c in conversations]
        return self._run(engine_prompts, sampling_params, use_tqdm)

    def encode(self, prompts: Union[PromptType, Sequence[PromptType]], pooling_params: PoolingParamsArg = None, *,
               truncate_prompt_tokens: Optional[int] = None, use_tqdm: bool = True, lora_request: None = None,
               pooling_task: Optional[str] = None,
               tokenization_kwargs: Optional[dict] = None) -> list[PoolingRequestOutput]:
        """vLLM's LLM.encode: each prompt pooled by the model, one PoolingRequestOutput per prompt in
        input order, its outputs.data a list of float32 values as floats — [dimensions or
        hidden_size] for an embedding, [1] for a reranker's score (vLLM gives a torch tensor).
        Each is the same bits alone or in any batch, in any order, with or without prefix-cache hits.

        prompts: as generate() takes them (a string, {"prompt": ...}, {"prompt_token_ids": [...]},
        or a list), without cache_salt. pooling_params: one PoolingParams for all (default
        PoolingParams()) or one per prompt. pooling_task: "embed" or "score", set on every
        PoolingParams that names none; None (unlike vLLM, which requires it) is the model's own
        task. truncate_prompt_tokens (or tokenization_kwargs={"truncate_prompt_tokens": k}): keep the
        last k tokens of every prompt whose PoolingParams leaves it unset (-1: the last
        max_model_len). use_tqdm: a progress bar. Requests are numbered "pool-0", "pool-1", ...
        apart from generation's, so pooling never moves a later generation's default seed.

        Raises ValueError when the model does not pool (load it with runner="pooling"), and for a
        bad prompt or parameter, naming the prompt and the field ("prompt 3: ... dimensions must
        be in [1, 1024] ..."; nothing runs then); KeyboardInterrupt (Ctrl-C) aborts the batch.
        Releases the GIL while the engine runs.
        """
        if not self.is_driver:
            return []
        self._require_pooling("encode")
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        prompts = _prompt_list(prompts)
        if any(salt is not None for salt in _cache_salts(prompts)):
            raise ValueError("cache_salt is not supported by pooling requests")
        engine_prompts = [_prompt(i, p) for i, p in enumerate(prompts)]
        truncate = truncation(truncate_prompt_tokens, tokenization_kwargs)
        engine_params = [with_task(p, pooling_task)._to_engine(truncate)
                         for p in params_per_prompt(pooling_params, len(engine_prompts))]
        with self._lock:
            ids = self._pooling_request_ids(len(engine_prompts))
            bar = _ProgressBar(len(engine_prompts), pooling=True) if use_tqdm else None
            try:
                outs = self._engine.generate(engine_prompts, [_ditto.SamplingParams()], ids, [],
                                             bar.update if bar else None, pooling=engine_params)
            finally:
                if bar:
                    bar.close()
        return [pooling_from_engine(o.request_id, o.pooled, o) for o in outs]

    def embed(self, prompts: Union[PromptType, Sequence[PromptType]], pooling_params: PoolingParamsArg = None, *,
              truncate_prompt_tokens: Optional[int] = None, use_tqdm: bool = True, lora_request: None = None,
              tokenization_kwargs: Optional[dict] = None) -> list[EmbeddingRequestOutput]:
        """vLLM's LLM.embed: one EmbeddingRequestOutput per prompt, in input order; its
        outputs.embedding is a list of hidden_size float32 values as floats (the first
        PoolingParams.dimensions of them when given, Matryoshka), unit L2 norm unless
        normalize=False. The model's pooling (LAST, MEAN or CLS) picks the token rows it comes from.
        The same bits alone or in any batch, in any order, with or without prefix-cache hits.
        Arguments as encode(). Raises ValueError when the model does not embed (a generation model:
        load it with runner="pooling"; a reranker: use score()), and as encode() does.
        """
        if not self.is_driver:
            return []
        self._require_pooling("embed", task="embed")
        outs = self.encode(prompts, pooling_params, truncate_prompt_tokens=truncate_prompt_tokens, use_tqdm=use_tqdm,
                           lora_request=lora_request, pooling_task="embed", tokenization_kwargs=tokenization_kwargs)
        return [EmbeddingRequestOutput.from_base(o) for o in outs]

    def score(self, data_1: Union[PromptType, Sequence[PromptType]], data_2: Union[PromptType, Sequence[PromptType]],
              *, truncate_prompt_tokens: Optional[int] = None, use_tqdm: bool = True,
              pooling_params: Optional[PoolingParams] = None, lora_request: None = None,
              tokenization_kwargs: Optional[dict] = None, chat_template: Optional[str] = None,
              chat_template_kwargs: Optional[dict] = None) -> list[ScoringRequestOutput]:
        """vLLM's LLM.score: the relevance of each (data_1, data_2) pair, one ScoringRequestOutput
        per pair in data_2's order; outputs.score is a float32 value as a float.

        data_1: one text (paired with every data_2: 1 -> N) or a list as long as data_2 (N -> N);
        data_2: a text or a list. A text is a string, {"prompt": ...}, or {"prompt_token_ids":
        [...]} (decoded to text first, as vLLM does). A reranker (task "score") renders each pair
        with its score template — Qwen3-Reranker's prompt, or the LLM's chat_template;
        chat_template_kwargs such as {"instruction": "..."} reach it — and scores
        sigmoid(logit("yes") − logit("no")) in (0, 1) (use_activation=False: the difference);
        prompt_token_ids are the rendered pair's. An embedding model embeds every distinct text once
        and scores each pair's cosine similarity, prompt_token_ids empty. Every score is the same
        bits alone or beside any other pairs. pooling_params: one PoolingParams (dimensions,
        normalize / use_activation); truncate_prompt_tokens as encode(). use_tqdm is accepted and
        shows nothing: a score call reports no progress, and Ctrl-C takes effect when it returns.
        Releases the GIL while the engine runs.

        Raises ValueError when the model does not pool (load it with runner="pooling" or
        task="score"), for an empty data_1 or data_2, counts that do not pair (naming data_1),
        chat_template given here (ditto takes it when loading: LLM(model, chat_template=...)), and
        for a bad text or parameter, naming the pair and the field.
        """
        if not self.is_driver:
            return []
        self._require_pooling("score")
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        if chat_template is not None:
            raise ValueError("chat_template: give the score template when loading the model, "
                             "LLM(model, task=\"score\", chat_template=...)")
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, dict):
            raise ValueError(f"chat_template_kwargs must be a dict, got {type(chat_template_kwargs).__name__}")
        texts_1, texts_2 = self._score_texts("data_1", data_1), self._score_texts("data_2", data_2)
        if len(texts_1) != 1 and len(texts_1) != len(texts_2):
            raise ValueError(f"data_1 has {len(texts_1)} texts for {len(texts_2)} in data_2: give one (paired with "
                             "each) or as many as data_2")
        params = PoolingParams() if pooling_params is None else pooling_params
        if not isinstance(params, PoolingParams):
            raise ValueError(f"pooling_params must be a PoolingParams, got {type(params).__name__}")
        engine_params = params._to_engine(truncation(truncate_prompt_tokens, tokenization_kwargs))
        with self._lock:
            outs = self._engine.score(texts_1, texts_2, engine_params,
                                      json.dumps(chat_template_kwargs) if chat_template_kwargs else "")
            ids = self._pooling_request_ids(len(outs))
        return [ScoringRequestOutput.from_base(pooling_from_engine(i, o.data, o)) for i, o in zip(ids, outs)]

    def _require_pooling(self, method: str, task: Optional[str] = None) -> None:
        """Raises ValueError unless the model pools (for `task` when given)."""
        engine = self._engine
        if engine.runner != "pooling":
            raise ValueError(f"LLM.{method}() is only supported for pooling models: {engine.model_dir} is loaded "
                             "for generation; load it with LLM(model, runner=\"pooling\") (or task=\"embed\" / "
                             "task=\"score\")")
        if task is not None and engine.pooling_task != task:
            raise ValueError(f"LLM.{method}(): this model's pooling task is {engine.pooling_task!r}, not {task!r} "
                             "(a reranker scores pairs: use LLM.score)")

    def _pooling_request_ids(self, count: int) -> list[str]:
        first = self._next_pooling_request
        self._next_pooling_request += count
        return [f"pool-{first + i}" for i in range(count)]

    def _score_texts(self, name: str, data: Union[PromptType, Sequence[PromptType]]) -> list[str]:
        """data_1 or data_2 as texts (token ids decoded, special tokens kept, as vLLM's
        tokenizer.decode). Raises ValueError naming the argument and item."""
        items = _prompt_list(data, name)
        if not items:
            raise ValueError(f"{name}: at least one text must be given")
        texts = []
        for i, item in enumerate(items):
            where = f"{name}[{i}]"
            if isinstance(item, dict) and "cache_salt" in item:
                raise ValueError(f"{where}: cache_salt is not supported by score")
            p = _prompt(i, item, where)
            texts.append(p.text if p.token_ids is None else self._engine.decode(p.token_ids, skip_special_tokens=False))
        return texts

    def _run(self, engine_prompts: list, sampling_params, use_tqdm: bool,
             cache_salts: Optional[list[Optional[str]]] = None) -> list[RequestOutput]:
        if not self.is_driver:
            return []
        if sampling_params is None:
            sampling_params = self.get_default_sampling_params()
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params] * len(engine_prompts)
        elif isinstance(sampling_params, (list, tuple)):
            params = list(sampling_params)
            if len(params) != len(engine_prompts):
                raise ValueError("The lengths of prompts and sampling_params must be the same.")
            for p in params:
                if not isinstance(p, SamplingParams):
                    raise ValueError(f"sampling_params must be SamplingParams, got {type(p).__name__}")
        else:
            raise ValueError("sampling_params must be a SamplingParams or a list of them, got "
                             f"{type(sampling_params).__name__}")
        for p in params:
            if p.output_kind == RequestOutputKind.DELTA:
                raise ValueError("output_kind DELTA is for streaming; LLM.generate returns whole outputs")
        with self._lock:
            first = self._next_request
            self._next_request += len(engine_prompts)
            ids = [str(first + i) for i in range(len(engine_prompts))]
            engine_params = [p._to_engine(default_seed=None if self._seed is None else
                                          _splitmix64(self._seed + first + i)) for i, p in enumerate(params)]
            for e, salt in zip(engine_params, cache_salts or []):
                e.cache_salt = salt
            rest = [p.max_tokens is None for p in params]
            bar = _ProgressBar(len(engine_prompts)) if use_tqdm else None
            try:
                outs = self._engine.generate(engine_prompts, engine_params, ids, rest, bar.update if bar else None)
            finally:
                if bar:
                    bar.close()
        return [from_engine(o, prompt_is_text=pr.token_ids is None,
                            want_logprobs=p.logprobs is not None or p.logprob_token_ids is not None,
                            want_prompt_logprobs=p.prompt_logprobs is not None)
                for o, pr, p in zip(outs, engine_prompts, params)]


def _kv_cache_memory(kv_cache_memory: Union[int, str, None], kv_cache_memory_bytes: Optional[int]) -> Union[int, str]:
    """The one KV cache size of ditto's kv_cache_memory (bytes or "2GiB") and vLLM's
    kv_cache_memory_bytes (an int of bytes); "2GiB" when neither is given. Raises ValueError for a
    kv_cache_memory_bytes that is no integer, or for both given with different sizes."""
    if kv_cache_memory_bytes is None:
        return "2GiB" if kv_cache_memory is None else kv_cache_memory
    if isinstance(kv_cache_memory_bytes, bool) or not isinstance(kv_cache_memory_bytes, numbers.Integral):
        raise ValueError(f"kv_cache_memory_bytes must be an integer number of bytes, got {kv_cache_memory_bytes!r}")
    if kv_cache_memory is not None:
        given, other = _ditto.EngineArgs(), _ditto.EngineArgs()
        given.set("kv_cache_memory", json.dumps(kv_cache_memory))
        other.set("kv_cache_memory", json.dumps(int(kv_cache_memory_bytes)))
        if given.kv_cache_memory != other.kv_cache_memory:
            raise ValueError(f"kv_cache_memory={kv_cache_memory!r} and kv_cache_memory_bytes={kv_cache_memory_bytes!r} "
                             "are the same knob with different sizes; give one")
    return int(kv_cache_memory_bytes)


def _default_sampling(model_defaults: dict, overrides: Optional[dict]) -> dict:
    """The keyword arguments of the default SamplingParams: the model's (read by the engine's front
    door from generation_config.json, as the server and the CLI read them), then
    override_generation_config's keys. Raises ValueError naming what is wrong."""
    if overrides is not None and not isinstance(overrides, dict):
        raise ValueError("override_generation_config must be a dict")
    values = dict(model_defaults)
    for k, v in (overrides or {}).items():
        if k not in _GENERATION_CONFIG_KEYS:
            raise ValueError(f"override_generation_config: {k!r} is not one of {', '.join(_GENERATION_CONFIG_KEYS)}")
        values[_GENERATION_CONFIG_KEYS[k]] = v
    SamplingParams(**values)  # a bad value names its field now, not at the first generate()
    return values


_PROMPT_KEYS = {"prompt", "prompt_token_ids", "cache_salt"}


def _prompt_list(prompts: Union[PromptType, Sequence[PromptType]], name: str = "prompts") -> list[PromptType]:
    """One prompt (a string or a dict) or a list of them, as a list. Raises ValueError naming `name`."""
    if isinstance(prompts, (str, dict)):
        return [prompts]
    if not isinstance(prompts, Sequence) or isinstance(prompts, (bytes, bytearray)):
        raise ValueError(f"{name} must be a string, a prompt dict or a list of them, got {type(prompts).__name__}")
    return list(prompts)


def _cache_salts(prompts: Sequence[PromptType]) -> list[Optional[str]]:
    """Each prompt dict's vLLM cache_salt (None when absent): a non-empty string, or ValueError
    naming the prompt. A salted prompt shares prefix-cache blocks only with the same salt."""
    salts = []
    for i, p in enumerate(prompts):
        salt = p.get("cache_salt") if isinstance(p, dict) else None
        if salt is not None and (not isinstance(salt, str) or not salt):
            raise ValueError(f"prompt {i}: Parameter 'cache_salt' must be a non-empty string if provided.")
        salts.append(salt)
    return salts


def _prompt(i: int, p: PromptType, where: Optional[str] = None) -> "_ditto.Prompt":
    """Prompt i as the engine's. Raises ValueError naming it (`where`, default "prompt I")."""
    where = where or f"prompt {i}"
    e = _ditto.Prompt()
    if isinstance(p, dict):
        unknown = set(p) - _PROMPT_KEYS
        if unknown:
            raise ValueError(f"{where}: {', '.join(sorted(unknown))} not supported (ditto takes text models' "
                             "'prompt' or 'prompt_token_ids', and 'cache_salt')")
    if isinstance(p, str) or (isinstance(p, dict) and "prompt" in p and "prompt_token_ids" not in p):
        text = p if isinstance(p, str) else p["prompt"]
        if not isinstance(text, str):
            raise ValueError(f"{where}: 'prompt' must be a string, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"{where}: not valid Unicode text ({err.reason} at {err.start})") from None
        e.text = text
    elif isinstance(p, dict) and "prompt_token_ids" in p:
        ids = p["prompt_token_ids"]
        if hasattr(ids, "tolist"):  # a numpy array
            ids = ids.tolist()
        if not isinstance(ids, (list, tuple)) or not all(
                isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in ids):
            raise ValueError(f"{where}: prompt_token_ids must be a list of integers")
        ids = [int(t) for t in ids]
        for t in ids:
            if not -(1 << 31) <= t < 1 << 31:
                raise ValueError(f"{where}: prompt token {t} is out of vocabulary")
        e.token_ids = ids
    else:
        raise ValueError(f"{where}: expected a string, {{'prompt': str}} or {{'prompt_token_ids': [int, ...]}}, "
                         f"got {type(p).__name__}")
    return e


class _ProgressBar:
    """vLLM's bar: requests processed, with the input and output tokens per second of the finished
    ones (input only for pooling requests, which have no output tokens)."""

    def __init__(self, total: int, pooling: bool = False) -> None:
        from tqdm.auto import tqdm
        self._pooling = pooling
        self._bar = tqdm(total=total, desc="Processed prompts", dynamic_ncols=True,
                         postfix=self._speed(0, 0, 1.0))
        self._start = time.perf_counter()

    def _speed(self, prompt_tokens: int, output_tokens: int, elapsed: float) -> str:
        speed = f"est. speed input: {prompt_tokens / elapsed:.2f} toks/s"
        return speed if self._pooling else f"{speed}, output: {output_tokens / elapsed:.2f} toks/s"

    def update(self, done: int, total: int, prompt_tokens: int, output_tokens: int) -> None:
        if done != self._bar.n:
            elapsed = max(time.perf_counter() - self._start, 1e-9)
            self._bar.set_postfix_str(self._speed(prompt_tokens, output_tokens, elapsed), refresh=False)
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        self._bar.close()
