"""LLM: vLLM's offline API (vllm/entrypoints/llm.py) over ditto's engine.

    llm = LLM(model="Qwen/Qwen3-8B")                   # a directory or a Hugging Face cache id
    outputs = llm.generate(prompts, SamplingParams(temperature=0.7, max_tokens=100, seed=42))

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
from ditto.outputs import RequestOutput, from_engine
from ditto.sampling_params import RequestOutputKind, SamplingParams
from ditto.tokenizer import Tokenizer, chat_prompt

# vLLM arguments that only mean something on a GPU or for features ditto does not have: accepted,
# with one warning line each, so a vLLM script runs unchanged.
_IGNORED_ARGS = frozenset({
    "gpu_memory_utilization", "enforce_eager", "swap_space", "cpu_offload_gb", "max_seq_len_to_capture",
    "disable_custom_all_reduce", "disable_async_output_proc", "compilation_config", "kv_cache_dtype",
    "enable_chunked_prefill", "disable_log_stats", "revision", "tokenizer_revision", "tokenizer_mode",
    "trust_remote_code", "download_dir", "load_format", "distributed_executor_backend", "hf_token",
    "pipeline_parallel_size", "max_cpu_loras", "enable_lora", "mm_processor_kwargs", "override_pooler_config",
    "async_scheduling", "worker_cls", "seed_everything", "served_model_name", "task", "runner", "enable_sleep_mode",
    "data_parallel_size", "limit_mm_per_prompt", "max_loras", "num_gpu_blocks_override", "model_impl",
    "config_format", "enable_expert_parallel", "preemption_mode", "max_num_partial_prefills",
})
# vLLM arguments that would change the outputs, which ditto cannot honour: refused unless unset.
_REFUSED_ARGS = frozenset({"hf_overrides", "rope_scaling", "logits_processors", "chat_template"})

# generation_config.json keys that become default sampling parameters (vLLM's
# ModelConfig.get_diff_sampling_param), max_new_tokens as max_tokens.
_GENERATION_CONFIG_KEYS = {"repetition_penalty": "repetition_penalty", "temperature": "temperature",
                           "top_k": "top_k", "top_p": "top_p", "min_p": "min_p", "max_new_tokens": "max_tokens"}

PromptType = Union[str, dict]  # a text, {"prompt": text} or {"prompt_token_ids": [...]}


def _splitmix64(x: int) -> int:
    """The default seed of the k-th unseeded request, x = seed + k: the engine's derived_seed (the top
    53 bits of SplitMix64; include/ditto/sampling_params.h), one rule for every front end."""
    return _ditto.derived_seed(x & 0xFFFFFFFFFFFFFFFF, 0)


class LLM:
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
    One LLM runs one generate() or chat() at a time; calls from other threads wait their turn. max_model_len: the context (prompt +
    output) in tokens, default the model's. max_num_seqs, max_num_batched_tokens, block_size,
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
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        if not isinstance(prompts, Sequence) or isinstance(prompts, (bytes, bytearray)):
            raise ValueError(f"prompts must be a string, a prompt dict or a list of them, got {type(prompts).__name__}")
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


def _prompt(i: int, p: PromptType) -> "_ditto.Prompt":
    """Prompt i as the engine's. Raises ValueError naming it."""
    e = _ditto.Prompt()
    if isinstance(p, dict):
        unknown = set(p) - _PROMPT_KEYS
        if unknown:
            raise ValueError(f"prompt {i}: {', '.join(sorted(unknown))} not supported (ditto takes text models' "
                             "'prompt' or 'prompt_token_ids', and 'cache_salt')")
    if isinstance(p, str) or (isinstance(p, dict) and "prompt" in p and "prompt_token_ids" not in p):
        text = p if isinstance(p, str) else p["prompt"]
        if not isinstance(text, str):
            raise ValueError(f"prompt {i}: 'prompt' must be a string, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"prompt {i}: not valid Unicode text ({err.reason} at {err.start})") from None
        e.text = text
    elif isinstance(p, dict) and "prompt_token_ids" in p:
        ids = p["prompt_token_ids"]
        if hasattr(ids, "tolist"):  # a numpy array
            ids = ids.tolist()
        if not isinstance(ids, (list, tuple)) or not all(
                isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in ids):
            raise ValueError(f"prompt {i}: prompt_token_ids must be a list of integers")
        ids = [int(t) for t in ids]
        for t in ids:
            if not -(1 << 31) <= t < 1 << 31:
                raise ValueError(f"prompt {i}: prompt token {t} is out of vocabulary")
        e.token_ids = ids
    else:
        raise ValueError(f"prompt {i}: expected a string, {{'prompt': str}} or {{'prompt_token_ids': [int, ...]}}, "
                         f"got {type(p).__name__}")
    return e


class _ProgressBar:
    """vLLM's bar: requests processed, with the input and output tokens per second of the finished
    ones."""

    def __init__(self, total: int) -> None:
        from tqdm.auto import tqdm
        self._bar = tqdm(total=total, desc="Processed prompts", dynamic_ncols=True,
                         postfix="est. speed input: 0.00 toks/s, output: 0.00 toks/s")
        self._start = time.perf_counter()

    def update(self, done: int, total: int, prompt_tokens: int, output_tokens: int) -> None:
        if done != self._bar.n:
            elapsed = max(time.perf_counter() - self._start, 1e-9)
            self._bar.set_postfix_str(f"est. speed input: {prompt_tokens / elapsed:.2f} toks/s, "
                                      f"output: {output_tokens / elapsed:.2f} toks/s", refresh=False)
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        self._bar.close()
