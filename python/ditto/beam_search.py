"""Beam search with vLLM's shapes (vllm.sampling_params.BeamSearchParams, vllm.beam_search's
BeamSearchSequence and BeamSearchOutput), for LLM.beam_search. The search itself is the engine's
(include/ditto/beam_search.h): every number is the engine's, so a prompt's beams are the same bits
alone or beside others."""
from __future__ import annotations

import dataclasses
from typing import Optional

from ditto import _ditto
from ditto.outputs import Logprob, _position


@dataclasses.dataclass
class BeamSearchParams:
    """vLLM's BeamSearchParams: beam_width beams per prompt (each step asks for 2·beam_width
    logprobs, so at most the LLM's max_logprobs / 2), max_tokens steps, ignore_eos, temperature
    (> 0 adds each beam's sampled token to its candidates), length_penalty (score = cumulative
    logprob / length ** length_penalty). Raises ValueError naming a field out of range."""

    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False

    def _to_engine(self) -> "_ditto.BeamSearchParams":
        p = _ditto.BeamSearchParams()
        for name in ("beam_width", "max_tokens", "ignore_eos", "temperature", "length_penalty",
                     "include_stop_str_in_output"):
            value = getattr(self, name)
            try:
                setattr(p, name, value)
            except TypeError:
                raise ValueError(f"{name} has the wrong type: {value!r}") from None
        return p


@dataclasses.dataclass
class BeamSearchSequence:
    """One beam (vLLM's): tokens = the prompt's then the beam's; logprobs, one {token_id: Logprob}
    per output token (the step's candidates); cum_logprob; text = all tokens decoded (prompt
    included, as vLLM's LLM gives it); finish_reason "stop" (EOS) or "length"."""

    tokens: list[int]
    logprobs: list[dict[int, Logprob]]
    cum_logprob: float = 0.0
    text: Optional[str] = None
    finish_reason: Optional[str] = None
    stop_reason: Optional[int] = None


@dataclasses.dataclass
class BeamSearchOutput:
    """The best beams of one prompt, best first (vLLM's): at most beam_width sequences."""

    sequences: list[BeamSearchSequence]


def from_engine(out: "_ditto.BeamSearchOutput") -> BeamSearchOutput:
    return BeamSearchOutput([BeamSearchSequence(tokens=list(s.tokens), logprobs=[_position(p) for p in s.logprobs],
                                                cum_logprob=s.cum_logprob, text=s.text,
                                                finish_reason=s.finish_reason) for s in out.sequences])
