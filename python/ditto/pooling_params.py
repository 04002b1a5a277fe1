"""PoolingParams: vLLM's parameters of a pooling request (vllm/pooling_params.py), for LLM.encode,
LLM.embed and LLM.score (include/ditto/pooling.h is the engine's side)."""
from __future__ import annotations

import dataclasses
import numbers
from typing import Optional, Sequence, Union

from ditto import _ditto

# The tasks a pooling request may name: ditto's two, and vLLM's synonyms the engine takes for them.
_TASKS = ("embed", "score", "embedding", "classify")


@dataclasses.dataclass
class PoolingParams:
    """What a pooling request computes, with vLLM's fields; None leaves a field to the model's
    default (its pooler_config, its sentence-transformers files).

    truncate_prompt_tokens: keep only the last k prompt tokens (-1: the last max_model_len); None
    keeps them all, and a prompt longer than the context is refused.
    dimensions (embed): keep the first `dimensions` values before normalizing (Matryoshka), in
    [1, hidden_size] and one of the model's matryoshka_dimensions when its config lists them.
    normalize (embed): divide the embedding by its L2 norm (default True).
    use_activation (score): the relevance as sigmoid(logit("yes") − logit("no")) (default True) or
    the raw difference. On an embedding model it is a synonym of normalize; the two must agree
    when both are given.
    task: "embed" or "score" (vLLM's "embedding" and "classify" are read as them); set by the
    method (LLM.embed, LLM.score, LLM.encode's pooling_task), None for the model's own.

    Fields are checked when a request uses them: ValueError naming the field (a wrong type, a
    dimensions out of range, a task the model does not pool for).
    """

    truncate_prompt_tokens: Optional[int] = None
    dimensions: Optional[int] = None
    normalize: Optional[bool] = None
    use_activation: Optional[bool] = None
    task: Optional[str] = None

    def clone(self) -> "PoolingParams":
        """A copy (vLLM's clone)."""
        return dataclasses.replace(self)

    def _to_engine(self, truncate_prompt_tokens: Optional[int] = None) -> "_ditto.PoolingParams":
        """The engine's PoolingParams; `truncate_prompt_tokens` (the method's keyword) applies when
        this one leaves it unset. Raises ValueError naming a field of the wrong type."""
        p = _ditto.PoolingParams()
        truncate = self.truncate_prompt_tokens if self.truncate_prompt_tokens is not None else truncate_prompt_tokens
        for name, value in (("truncate_prompt_tokens", truncate), ("dimensions", self.dimensions)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            try:
                setattr(p, name, None if value is None else int(value))
            except TypeError:  # past int64
                raise ValueError(f"{name} is out of range: {value!r}") from None
        for name in ("normalize", "use_activation"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{name} must be True, False or None, got {value!r}")
            setattr(p, name, value)
        if self.task is not None:
            if self.task not in _TASKS:
                raise ValueError(f"task must be 'embed' or 'score', got {self.task!r}")
            p.task = self.task
        return p


PoolingParamsArg = Optional[Union[PoolingParams, Sequence[PoolingParams]]]


def params_per_prompt(pooling_params: PoolingParamsArg, count: int) -> list[PoolingParams]:
    """One PoolingParams per prompt: None (PoolingParams()) or one shared, or one each. Raises
    ValueError for anything else."""
    if pooling_params is None:
        return [PoolingParams()] * count
    if isinstance(pooling_params, PoolingParams):
        return [pooling_params] * count
    if not isinstance(pooling_params, (list, tuple)):
        raise ValueError(f"pooling_params must be a PoolingParams or a list of them, got "
                         f"{type(pooling_params).__name__}")
    if len(pooling_params) != count:
        raise ValueError("The lengths of prompts and pooling_params must be the same.")
    for p in pooling_params:
        if not isinstance(p, PoolingParams):
            raise ValueError(f"pooling_params must be PoolingParams, got {type(p).__name__}")
    return list(pooling_params)


def with_task(params: PoolingParams, pooling_task: Optional[str]) -> PoolingParams:
    """`params` with the method's task when it names none (vLLM's rule; the caller's object is left
    as it is). Raises ValueError when it names another."""
    if pooling_task is None or params.task == pooling_task:
        return params
    if params.task is not None:
        raise ValueError(f"You cannot overwrite task={params.task!r} with pooling_task={pooling_task!r}!")
    return dataclasses.replace(params, task=pooling_task)


def truncation(truncate_prompt_tokens: Optional[int], tokenization_kwargs: Optional[dict]) -> Optional[int]:
    """The truncate_prompt_tokens of a pooling call: the keyword, else tokenization_kwargs' (vLLM's
    newer place for it; its only key ditto takes). Raises ValueError for another key."""
    kwargs = dict(tokenization_kwargs or {})
    unknown = set(kwargs) - {"truncate_prompt_tokens"}
    if unknown:
        raise ValueError(f"tokenization_kwargs: {', '.join(sorted(unknown))} not supported (ditto takes "
                         "truncate_prompt_tokens)")
    return truncate_prompt_tokens if truncate_prompt_tokens is not None else kwargs.get("truncate_prompt_tokens")
