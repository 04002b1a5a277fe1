"""AsyncLLM: vLLM's asynchronous engine API (vllm/v1/engine/async_llm.py) over ditto's engine
thread, for frameworks that embed the engine in an asyncio program:

    engine = AsyncLLM(model="Qwen/Qwen3-8B")               # LLM's keyword arguments
    async for output in engine.generate("Hello", SamplingParams(max_tokens=32), request_id="a"):
        print(output.outputs[0].text)                      # the whole output so far (CUMULATIVE)

Several generate() calls run concurrently in one engine; each output is the bits the same request
gets alone (docs/INVARIANCE.md), whatever runs beside it and whenever it arrives.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, AsyncGenerator, Iterable, Optional, Union

from ditto import _ditto
from ditto.llm import LLM, PromptType, _cache_salts, _prompt, _splitmix64
from ditto.outputs import RequestOutput, from_engine
from ditto.sampling_params import RequestOutputKind, SamplingParams
from ditto.tokenizer import Tokenizer

_KINDS = {RequestOutputKind.CUMULATIVE: "cumulative", RequestOutputKind.DELTA: "delta",
          RequestOutputKind.FINAL_ONLY: "final_only"}
# How long one wait for a request's reports lasts on a worker thread before it looks again.
_POLL_S = 0.05


class AsyncLLM:
    """An engine thread that requests are added to at any time (vLLM's AsyncLLM).

    Takes LLM's arguments (model, seed, max_num_seqs, kv_cache_memory / kv_cache_memory_bytes,
    ...; see ditto.LLM) and loads the model once. Its engine is its own: a KV cache and prefix
    cache of kv_cache_memory, which it keeps while idle (reset_prefix_cache() drops it). Waiting for
    reports takes a worker thread per running generate() (the GIL released): up to
    max_concurrent_waits at once, later streams waiting their turn, each for at most 50 ms.
    Raises as LLM() does; a tensor_parallel_size above 1 is refused (ValueError).
    """

    def __init__(self, model: str, max_concurrent_waits: int = 64, **kwargs: Any) -> None:
        if kwargs.get("tensor_parallel_size", 1) not in (1, None):
            raise ValueError("AsyncLLM: tensor_parallel_size above 1 is not supported (use LLM under mpirun)")
        self._llm = LLM(model=model, **kwargs)
        self._engine = _ditto.AsyncEngine(self._llm._engine)
        self._waits = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrent_waits,
                                                            thread_name_prefix="ditto-async")

    @classmethod
    def from_engine_args(cls, engine_args: dict) -> "AsyncLLM":
        """AsyncLLM(**engine_args): vLLM's constructor shape, with the engine arguments as a dict of
        LLM's keyword arguments (model included)."""
        return cls(**engine_args)

    async def generate(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None, *, lora_request: None = None,
                       trace_headers: Optional[dict] = None, priority: int = 0) -> AsyncGenerator[RequestOutput, None]:
        """Runs one request and yields its RequestOutputs as the engine produces them, by
        sampling_params.output_kind: CUMULATIVE (the default) the whole output so far after each
        engine step that produced something, DELTA only what is new (prompt fields on every one,
        prompt_logprobs on the first), FINAL_ONLY the finished output alone. The last has finished
        set. prompt: a string or a {"prompt": ...} / {"prompt_token_ids": [...]} dict (as
        LLM.generate's); sampling_params: default LLM.get_default_sampling_params(); request_id:
        unique among running requests (default: a counter).

        Raises ValueError naming the field for a bad prompt or parameter (before any output), and
        for a request_id already running (at the first iteration). Leaving the loop early (break,
        cancellation, the generator closed) aborts the request.
        """
        if lora_request is not None:
            raise ValueError("lora_request is not supported")
        if priority != 0:
            raise ValueError("priority: ditto schedules first come, first served (give 0)")
        if sampling_params is None:
            sampling_params = self._llm.get_default_sampling_params()
        if not isinstance(sampling_params, SamplingParams):
            raise ValueError(f"sampling_params must be SamplingParams, got {type(sampling_params).__name__}")
        engine_prompt = _prompt(0, prompt)
        with self._llm._lock:  # the request counter LLM.generate's default seeds come from
            k = self._llm._next_request
            self._llm._next_request += 1
        if request_id is None:
            request_id = f"async-{k}"
        seed = self._llm._seed
        params = sampling_params._to_engine(default_seed=None if seed is None else _splitmix64(seed + k))
        params.cache_salt = _cache_salts([prompt])[0]
        engine = self._engine
        if engine is None:
            raise RuntimeError("AsyncLLM: shut down")
        stream = engine.add_request(str(request_id), engine_prompt, params, _KINDS[sampling_params.output_kind],
                                          sampling_params.max_tokens is None)
        loop = asyncio.get_running_loop()
        prompt_text: Optional[str] = None
        prompt_token_ids: list[int] = []
        finished = False
        try:
            while not finished:
                try:
                    outs = await loop.run_in_executor(self._waits, stream.get, _POLL_S)
                except (ValueError, RuntimeError, MemoryError):
                    finished = True  # the engine refused or failed it: nothing of it runs
                    raise
                for out in outs:
                    o = from_engine(out, prompt_is_text=engine_prompt.token_ids is None,
                                    want_logprobs=sampling_params.logprobs is not None,
                                    want_prompt_logprobs=sampling_params.prompt_logprobs is not None)
                    if o.prompt_token_ids:
                        prompt_text, prompt_token_ids = o.prompt, o.prompt_token_ids
                    else:  # a later DELTA report: vLLM repeats the prompt on each
                        o.prompt, o.prompt_token_ids = prompt_text, list(prompt_token_ids)
                    finished = o.finished
                    yield o
        finally:
            if not finished:  # left early: break, cancellation, an exception in the caller
                engine.abort(str(request_id))

    async def abort(self, request_id: Union[str, Iterable[str]]) -> None:
        """Stops the request(s): each one's stream ends with a last output whose unfinished choices
        have finish_reason "abort". Unknown or finished ids are ignored."""
        engine = self._engine
        if engine is None:
            return
        for rid in [request_id] if isinstance(request_id, str) else list(request_id):
            engine.abort(str(rid))

    async def reset_prefix_cache(self) -> bool:
        """Empties the engine's prefix cache. False, dropping nothing, while requests run."""
        return self._engine is not None and self._engine.reset_prefix_cache()

    async def pause_generation(self, mode: str = "abort") -> None:
        """vLLM's pause_generation (docs/RL.md): "abort" ends the running requests (finish_reason
        "abort"), "wait" lets them finish, "keep" stops them where they are, to go on after
        resume_generation() under the weights loaded then. Requests added while paused wait.
        Returns once the engine has stopped. Raises ValueError for another mode."""
        if self._engine is not None:
            await asyncio.get_running_loop().run_in_executor(self._waits, self._engine.pause_generation, mode)

    async def resume_generation(self) -> None:
        """vLLM's resume_generation: the engine runs again."""
        if self._engine is not None:
            self._engine.resume_generation()

    async def is_paused(self) -> bool:
        return self._engine is not None and self._engine.is_paused

    async def init_weight_transfer_engine(self, request) -> None:
        """As LLM.init_weight_transfer_engine."""
        self._llm.init_weight_transfer_engine(request)

    async def start_weight_update(self) -> None:
        """As LLM.start_weight_update: nothing changes until finish_weight_update."""
        self._llm.start_weight_update()

    async def update_weights(self, request=None, *, named_tensors=None) -> None:
        """As LLM.update_weights (a refused chunk cancels the update: the old weights keep serving)."""
        self._llm.update_weights(request, named_tensors=named_tensors)

    async def finish_weight_update(self, weight_version: Optional[str] = None) -> str:
        """Applies the update with the engine stopped at a step boundary for that moment: requests
        kept by pause_generation("keep") go on under the new weights, and each output's
        weight_versions says from which token. Returns the new version."""
        if self._engine is None:
            return self._llm.finish_weight_update(weight_version)
        await asyncio.get_running_loop().run_in_executor(self._waits, self._engine.finish_weight_update,
                                                         weight_version or "")
        return self._llm.weight_version

    async def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (as LLM.get_tokenizer())."""
        return self._llm.get_tokenizer()

    @property
    def tokenizer(self) -> Tokenizer:
        return self._llm.get_tokenizer()

    def get_default_sampling_params(self) -> SamplingParams:
        return self._llm.get_default_sampling_params()

    @property
    def num_unfinished_requests(self) -> int:
        """Requests added and not yet finished."""
        return 0 if self._engine is None else self._engine.num_unfinished

    @property
    def is_running(self) -> bool:
        return self._engine is not None

    def shutdown(self) -> None:
        """Takes no more requests; the engine thread stops (and its memory goes) once the
        generate() calls still running have ended — abort them first to end them now."""
        if self._engine is not None:
            self._engine = None  # the running generate() calls hold it until they end
            self._waits.shutdown(wait=False)
