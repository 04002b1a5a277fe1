"""The outputs of LLM.generate and LLM.chat, with vLLM's classes and attributes
(vllm/outputs.py, vllm/sequence.py): RequestOutput, CompletionOutput and Logprob."""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

# A position's log-probabilities: the chosen (or prompt) token first, then the top ones, by id.
PositionLogprobs = dict[int, "Logprob"]


@dataclasses.dataclass
class Logprob:
    """One token's log-probability (float32, before penalties and temperature), its rank among all
    tokens (1 = most likely) and its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclasses.dataclass
class CompletionOutput:
    """One choice of a request. cumulative_logprob (the sum of the chosen tokens' logprobs, in
    order) and logprobs (one dict per generated token) are set when logprobs were asked for.
    stop_reason: the stop string or stop token id that ended it, None for EOS or the length."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[list[PositionLogprobs]]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None
    lora_request: None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclasses.dataclass
class RequestOutput:
    """One prompt's result: its prompt (None when given as token ids), prompt_token_ids,
    prompt_logprobs (None first: the first token has no context) and its n outputs. `seed` is
    ditto's addition: the seed the request ran with, so it can be repeated. num_cached_tokens:
    the prompt tokens the prefix cache already held (vLLM's; it depends on what ran before, not
    part of the invariance contract)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list[int]
    prompt_logprobs: Optional[list[Optional[PositionLogprobs]]]
    outputs: list[CompletionOutput]
    finished: bool
    seed: Optional[int] = None
    metrics: None = None
    lora_request: None = None
    encoder_prompt: None = None
    encoder_prompt_token_ids: None = None
    num_cached_tokens: Optional[int] = None


def _position(sampled) -> PositionLogprobs:
    """One position's logprobs, the sampled token first; texts as the engine decoded them."""
    entries = {sampled.token.token_id: Logprob(sampled.token.logprob, sampled.token.rank,
                                                sampled.token.decoded_token)}
    for e in sampled.top_logprobs:
        if e.token_id not in entries:
            entries[e.token_id] = Logprob(e.logprob, e.rank, e.decoded_token)
    return entries


def from_engine(out, prompt_is_text: bool, want_logprobs: bool, want_prompt_logprobs: bool) -> RequestOutput:
    """A RequestOutput from the engine's (ditto._ditto.RequestOutput)."""
    outputs = []
    for c in out.outputs:
        stop_reason = c.stop_string if c.stop_string is not None else c.stop_token_id
        outputs.append(CompletionOutput(
            index=c.index,
            text=c.text,
            token_ids=list(c.token_ids),
            cumulative_logprob=c.cumulative_logprob if want_logprobs else None,
            logprobs=[_position(s) for s in c.logprobs] if want_logprobs else None,
            finish_reason=c.finish_reason or None,
            stop_reason=stop_reason,
        ))
    prompt_logprobs = None
    if want_prompt_logprobs:
        prompt_logprobs = [None if s is None else _position(s) for s in out.prompt_logprobs]
    return RequestOutput(
        request_id=out.request_id,
        prompt=out.prompt if prompt_is_text else None,
        prompt_token_ids=list(out.prompt_token_ids),
        prompt_logprobs=prompt_logprobs,
        outputs=outputs,
        finished=out.finished,
        seed=out.seed,
        num_cached_tokens=out.num_cached_tokens,
    )
