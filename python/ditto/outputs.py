"""The outputs of LLM.generate and LLM.chat, with vLLM's classes and attributes
(vllm/outputs.py, vllm/sequence.py): RequestOutput, CompletionOutput and Logprob; and those of
LLM.encode, LLM.embed and LLM.score: PoolingRequestOutput (PoolingOutput), EmbeddingRequestOutput
(EmbeddingOutput) and ScoringRequestOutput (ScoringOutput).

Pooled values are float32 numbers computed by the engine, given as Python floats (each exactly its
float32 value): vLLM gives PoolingOutput.data as a torch tensor, ditto (which has no torch) as a
list; numpy.asarray(data, dtype=numpy.float32) or torch.tensor(data) turns it into one without
changing a bit. ditto has no classification models, so no ClassificationRequestOutput.
"""
from __future__ import annotations

import array
import dataclasses
from typing import Any, Optional, Union

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
    stop_reason: the stop string or stop token id that ended it, None for EOS or the length; for
        finish_reason "error" (a structured output that cannot go on), why.
    weight_versions: ditto's addition (docs/RL.md): [(first_token, weight_version), ...], the
        weight versions its tokens were sampled under, one entry per change (one when no weight
        update landed while it ran).
    routed_experts: with LLM(enable_return_routed_experts=True) on a MoE model, once the choice has
        finished (vLLM's field): the expert ids each MoE layer's router chose for each token that
        went through the model, a numpy array of shape [len(prompt_token_ids) + len(token_ids) - 1,
        num_moe_layers, num_experts_per_tok], dtype uint8 (num_experts <= 256) or uint16, each row's
        ids in the router's order (probability desc, then id asc); nested lists of ints when numpy is
        not installed. None otherwise (docs/RL_ROUTED_EXPERTS.md)."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[list[PositionLogprobs]]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None
    lora_request: None = None
    weight_versions: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    routed_experts: Any = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclasses.dataclass
class RequestOutput:
    """One prompt's result: its prompt (None when given as token ids), prompt_token_ids,
    prompt_logprobs (None first: the first token has no context) and its n outputs. `seed` is
    ditto's addition: the seed the request ran with, so it can be repeated. num_cached_tokens:
    the prompt tokens the prefix cache already held (vLLM's; it depends on what ran before, not
    part of the invariance contract). weight_version: the version of the weights its latest token
    came from (LLM.finish_weight_update's; "0" as loaded)."""

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
    weight_version: Optional[str] = None


def _position(sampled) -> PositionLogprobs:
    """One position's logprobs, the sampled token first; texts as the engine decoded them."""
    entries = {sampled.token.token_id: Logprob(sampled.token.logprob, sampled.token.rank,
                                                sampled.token.decoded_token)}
    for e in sampled.top_logprobs:
        if e.token_id not in entries:
            entries[e.token_id] = Logprob(e.logprob, e.rank, e.decoded_token)
    return entries


def _routed_experts(r):
    """vLLM's CompletionOutput.routed_experts from the engine's RoutedExperts (or None)."""
    if r is None:
        return None
    shape = (r.num_tokens, r.num_moe_layers, r.num_experts_per_tok)
    try:
        import numpy
    except ImportError:  # numpy is not a dependency of ditto: nested lists of the same values
        ids = array.array("H")
        ids.frombytes(r.expert_ids)
        flat = ids.tolist()
        k, width = shape[2], shape[1] * shape[2]
        return [[flat[t * width + m * k:t * width + (m + 1) * k] for m in range(shape[1])]
                for t in range(shape[0])]
    ids = numpy.frombuffer(r.expert_ids, dtype="<u2").reshape(shape)
    return ids.astype(numpy.uint8 if r.num_experts <= 256 else numpy.uint16)


def from_engine(out, prompt_is_text: bool, want_logprobs: bool, want_prompt_logprobs: bool) -> RequestOutput:
    """A RequestOutput from the engine's (ditto._ditto.RequestOutput)."""
    outputs = []
    for c in out.outputs:
        stop_reason = c.stop_string if c.stop_string is not None else c.stop_token_id
        if stop_reason is None and c.finish_message is not None:  # finish_reason "error": why
            stop_reason = c.finish_message
        outputs.append(CompletionOutput(
            index=c.index,
            text=c.text,
            token_ids=list(c.token_ids),
            cumulative_logprob=c.cumulative_logprob if want_logprobs else None,
            logprobs=[_position(s) for s in c.logprobs] if want_logprobs else None,
            finish_reason=c.finish_reason or None,
            stop_reason=stop_reason,
            weight_versions=list(c.weight_versions),
            routed_experts=_routed_experts(c.routed_experts),
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
        weight_version=out.weight_version,
    )


@dataclasses.dataclass(repr=False)
class PoolingOutput:
    """One pooling request's result (vLLM's): data, [dimensions or hidden_size] float32 values for
    an embedding, [1] for a score — a list of floats (vLLM: a torch tensor)."""

    data: list[float]

    def __repr__(self) -> str:
        return f"PoolingOutput(data={self.data})"


@dataclasses.dataclass(repr=False)
class EmbeddingOutput:
    """An embedding (vLLM's): [hidden_size, or the request's dimensions] float32 values as floats,
    unit L2 norm unless normalize=False."""

    embedding: list[float]

    @staticmethod
    def from_base(pooling_output: PoolingOutput) -> "EmbeddingOutput":
        return EmbeddingOutput(list(pooling_output.data))

    @property
    def hidden_size(self) -> int:
        """The embedding's length."""
        return len(self.embedding)

    def __repr__(self) -> str:
        return f"EmbeddingOutput(hidden_size={self.hidden_size})"


@dataclasses.dataclass(repr=False)
class ScoringOutput:
    """A pair's relevance (vLLM's): a reranker's sigmoid(logit("yes") − logit("no")) in (0, 1) (the
    raw difference with use_activation=False), or an embedding model's cosine in [-1, 1]; a float32
    value as a float."""

    score: float

    @staticmethod
    def from_base(pooling_output: PoolingOutput) -> "ScoringOutput":
        if len(pooling_output.data) != 1:
            raise ValueError("pooled data should be a single score")
        return ScoringOutput(pooling_output.data[0])

    def __repr__(self) -> str:
        return f"ScoringOutput(score={self.score})"


@dataclasses.dataclass(repr=False)
class PoolingRequestOutput:
    """One pooling request's result (vLLM's): request_id, outputs (a PoolingOutput here; an
    EmbeddingOutput or ScoringOutput in the subclasses), prompt_token_ids (the tokens that ran,
    after truncation; a reranker's rendered pair; empty for an embedding model's score, which runs
    two prompts), num_cached_tokens (prompt tokens the prefix cache held: work saved, not part of
    the invariance contract) and finished (always True: offline results are whole)."""

    request_id: str
    outputs: Any
    prompt_token_ids: list[int]
    num_cached_tokens: int
    finished: bool

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(request_id={self.request_id!r}, outputs={self.outputs!r}, "
                f"prompt_token_ids={self.prompt_token_ids}, num_cached_tokens={self.num_cached_tokens}, "
                f"finished={self.finished})")


class EmbeddingRequestOutput(PoolingRequestOutput):
    """LLM.embed's result: outputs is an EmbeddingOutput."""

    @staticmethod
    def from_base(request_output: PoolingRequestOutput) -> "EmbeddingRequestOutput":
        return _retyped(EmbeddingRequestOutput, request_output, EmbeddingOutput.from_base(request_output.outputs))


class ScoringRequestOutput(PoolingRequestOutput):
    """LLM.score's result: outputs is a ScoringOutput."""

    @staticmethod
    def from_base(request_output: PoolingRequestOutput) -> "ScoringRequestOutput":
        return _retyped(ScoringRequestOutput, request_output, ScoringOutput.from_base(request_output.outputs))


def _retyped(cls: type, request_output: PoolingRequestOutput, outputs: Any) -> Any:
    """`request_output` as a `cls` (a PoolingRequestOutput subclass) holding `outputs`."""
    return cls(request_output.request_id, outputs, request_output.prompt_token_ids, request_output.num_cached_tokens,
               request_output.finished)


def pooling_from_engine(request_id: str, data: list[float], out) -> PoolingRequestOutput:
    """A PoolingRequestOutput of `data` under the LLM's request id, the rest from the engine's
    output (ditto._ditto.RequestOutput of a pooling request, or ditto._ditto.PoolingRequestOutput)."""
    return PoolingRequestOutput(request_id, PoolingOutput(list(data)), list(out.prompt_token_ids),
                                out.num_cached_tokens, out.finished)
