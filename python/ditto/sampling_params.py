"""SamplingParams with vLLM's fields, defaults and errors (vllm/sampling_params.py), so a vLLM
script means the same thing here. The ranges are checked once, by the engine's own rules
(SamplingParams::validate in C++); a bad value raises ValueError naming the field."""
from __future__ import annotations

import dataclasses
import enum
import json as _json
import numbers
from typing import Any, Optional, Union

from ditto import _ditto


class RequestOutputKind(enum.Enum):
    """vLLM's RequestOutputKind. LLM.generate returns whole outputs (CUMULATIVE and FINAL_ONLY
    are the same there); DELTA is for streaming servers."""
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


# vLLM fields ditto does not implement: refused when set to anything but their default.
_UNSUPPORTED = {
    "logits_processors": None,
}

# The constraint kinds of StructuredOutputsParams, exactly one of which a request sets.
_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
# The grammar engine vLLM's `backend` may name: ditto has one, llguidance ("guidance" in vLLM).
_BACKENDS = (None, "auto", "guidance", "llguidance")


@dataclasses.dataclass
class StructuredOutputsParams:
    """Structured outputs (vLLM's StructuredOutputsParams, vllm/sampling_params.py): the output is
    constrained to exactly one of

    json: a JSON Schema (a dict, its JSON text, or a pydantic model class); regex: a regular
    expression the whole output matches (Rust regex syntax); choice: one of these strings;
    grammar: a Lark grammar (llguidance's dialect; GBNF's "::=" is refused); json_object: True
    for any JSON object; structural_tag: vLLM's structural tag (a dict or its JSON text).

    For json and json_object: disable_any_whitespace (no white space between tokens),
    disable_additional_properties (an object schema without "additionalProperties" takes no
    others), whitespace_pattern (the white space allowed, a regex). disable_fallback is accepted
    and changes nothing: ditto has one grammar engine, llguidance, and no fallback.

    Raises ValueError when no kind or more than one is set (vLLM's message) or a field has the
    wrong type. A constraint the grammar engine cannot compile raises ValueError naming the field
    ("structured_outputs.json") and the engine's reason when the request is submitted
    (LLM.generate, LLM.chat, AsyncLLM.generate), before any of the batch runs.
    """

    json: Optional[Union[str, dict]] = None
    regex: Optional[str] = None
    choice: Optional[list[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_fallback: bool = False
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: Optional[str] = None
    structural_tag: Optional[str] = None

    _what = "structured outputs constraint"

    def __post_init__(self) -> None:
        if self.json is not None and hasattr(self.json, "model_json_schema"):  # a pydantic model, as vLLM takes
            self.json = self.json.model_json_schema()
        if isinstance(self.choice, tuple):
            self.choice = list(self.choice)
        count = sum(getattr(self, k) is not None for k in _KINDS)
        if count > 1:
            raise ValueError(f"You can only use one kind of {self._what} but multiple are specified: "
                             f"{self._fields()}")
        if count < 1:
            raise ValueError(f"You must use one kind of {self._what} but none are specified: {self._fields()}")
        self._to_engine()  # the types, checked now

    def _fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def all_constraints_none(self) -> bool:
        """True when no constraint kind is set (vLLM's helper)."""
        return all(getattr(self, k) is None for k in _KINDS)

    def all_non_structural_tag_constraints_none(self) -> bool:
        """True when no kind but perhaps structural_tag is set (vLLM's helper)."""
        return all(getattr(self, k) is None for k in _KINDS if k != "structural_tag")

    def _to_engine(self) -> _ditto.StructuredOutputsParams:
        """The engine's StructuredOutputsParams (json and structural_tag as JSON text). Raises
        ValueError naming the field of the wrong type."""
        so = _ditto.StructuredOutputsParams()
        if self.json is not None:
            so.json = _json_text("structured_outputs.json", self.json, "a JSON Schema (a dict or its JSON text)")
        if self.regex is not None:
            so.regex = _str("structured_outputs.regex", self.regex)
        if self.choice is not None:
            if not isinstance(self.choice, list) or not all(isinstance(c, str) for c in self.choice):
                raise ValueError(f"structured_outputs.choice must be a list of strings, got {self.choice!r}")
            so.choice = self.choice
        if self.grammar is not None:
            so.grammar = _str("structured_outputs.grammar", self.grammar)
        if self.json_object is not None:
            so.json_object = _bool("structured_outputs.json_object", self.json_object)
            if not so.json_object:
                raise ValueError("structured_outputs.json_object must be True when given (None: another kind)")
        if self.structural_tag is not None:
            so.structural_tag = _json_text("structured_outputs.structural_tag", self.structural_tag,
                                           "a structural tag (a dict or its JSON text)")
        _bool("structured_outputs.disable_fallback", self.disable_fallback)
        so.disable_any_whitespace = _bool("structured_outputs.disable_any_whitespace", self.disable_any_whitespace)
        so.disable_additional_properties = _bool("structured_outputs.disable_additional_properties",
                                                 self.disable_additional_properties)
        if self.whitespace_pattern is not None:
            so.whitespace_pattern = _str("structured_outputs.whitespace_pattern", self.whitespace_pattern)
        return so


@dataclasses.dataclass
class GuidedDecodingParams(StructuredOutputsParams):
    """vLLM's older name for StructuredOutputsParams (vLLM <= 0.10: SamplingParams(guided_decoding=
    GuidedDecodingParams(...))), with its `backend`: None, "auto", "guidance" or "llguidance" (ditto's
    one grammar engine); another backend raises ValueError."""

    backend: Optional[str] = None
    backend_was_auto: bool = False

    _what = "guided decoding"

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"guided_decoding.backend is {self.backend!r}; ditto's structured outputs use "
                             "llguidance ('guidance' or 'auto')")
        super().__post_init__()

    @staticmethod
    def from_optional(json: Optional[Union[str, dict]] = None, regex: Optional[str] = None,
                      choice: Optional[list[str]] = None, grammar: Optional[str] = None,
                      json_object: Optional[bool] = None, backend: Optional[str] = None,
                      whitespace_pattern: Optional[str] = None,
                      structural_tag: Optional[str] = None) -> Optional["GuidedDecodingParams"]:
        """vLLM's: None when no kind is given, else GuidedDecodingParams of them."""
        if all(a is None for a in (json, regex, choice, grammar, json_object, structural_tag)):
            return None
        return GuidedDecodingParams(json=json, regex=regex, choice=choice, grammar=grammar, json_object=json_object,
                                    backend=backend, whitespace_pattern=whitespace_pattern,
                                    structural_tag=structural_tag)

# max_tokens=None: as many as the context leaves (the engine cuts max_tokens to it).
_UNBOUNDED = 1 << 62


@dataclasses.dataclass
class SamplingParams:
    """Sampling parameters for one request (vLLM's names and defaults).

    n: choices per prompt, each with its own random stream. presence_penalty, frequency_penalty
    in [-2, 2]; repetition_penalty > 0; temperature >= 0 (0 is greedy); top_p in (0, 1]; top_k 0
    or -1 (off) or a count; min_p in [0, 1]; seed: the request's seed (None or -1: one derived from
    the LLM's seed; a negative seed s in [-2^63, -2] is the seed 2^64 + s, as torch's generator
    reads it in vLLM). stop: strings that end the output (cut from it unless include_stop_str_in_output);
    stop_token_ids: ids that end it (kept in token_ids). max_tokens >= 1, or None for what the
    context leaves; min_tokens <= max_tokens. logprobs / prompt_logprobs: the sampled (or prompt)
    token's log-probability and this many top ones (<= the LLM's max_logprobs, default 20; what
    they are is the LLM's logprobs_mode). logit_bias: {token id: bias} added to the logits;
    allowed_token_ids: only these may be sampled (not empty); bad_words: words the output must not
    contain (each banned as it tokenizes, with and without a leading space);
    truncate_prompt_tokens: keep only the prompt's last k tokens (-1: the context's worth).
    logprob_token_ids: the logprobs of these ids beside each sampled token, instead of the top
    `logprobs`. structured_outputs: a StructuredOutputsParams the output keeps to (JSON Schema,
    regex, choice, grammar, ...); guided_decoding: vLLM's older name for it (GuidedDecodingParams).

    Raises ValueError naming the field for a value out of range or of the wrong type, for both
    structured_outputs and guided_decoding at once, and for logits_processors (not implemented).
    """

    n: int = 1
    best_of: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, list[str]]] = None
    stop_token_ids: Optional[list[int]] = None
    bad_words: Optional[list[str]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    logits_processors: Optional[Any] = None
    include_stop_str_in_output: bool = False
    truncate_prompt_tokens: Optional[int] = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    guided_decoding: Optional[Any] = None
    structured_outputs: Optional[Any] = None
    logit_bias: Optional[dict] = None
    allowed_token_ids: Optional[list[int]] = None
    logprob_token_ids: Optional[list[int]] = None
    extra_args: Optional[dict] = None

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        elif self.stop is None:
            self.stop = []
        elif isinstance(self.stop, (tuple, list)):
            self.stop = list(self.stop)
        if self.stop_token_ids is None:
            self.stop_token_ids = []
        elif isinstance(self.stop_token_ids, (tuple, list)):
            self.stop_token_ids = list(self.stop_token_ids)
        else:
            raise ValueError(f"stop_token_ids must be a list of token ids, got {self.stop_token_ids!r}")
        if self.seed == -1:  # vLLM's "no seed"
            self.seed = None
        if self.logprobs is True:  # vLLM: True means 1
            self.logprobs = 1
        for name in ("logprobs", "prompt_logprobs"):
            if getattr(self, name) == -1:
                raise ValueError(f"{name}=-1 (the whole vocabulary) is not supported; give a count up to the LLM's "
                                 "max_logprobs")
        for name, default in _UNSUPPORTED.items():
            value = getattr(self, name)
            if value != default and not (isinstance(value, (list, tuple, dict)) and not value):
                raise ValueError(f"{name} is not supported by ditto (leave it at {default!r})")
        for name in ("structured_outputs", "guided_decoding"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, StructuredOutputsParams):
                raise ValueError(f"{name} must be a StructuredOutputsParams (or vLLM's GuidedDecodingParams), got "
                                 f"{type(value).__name__}")
        if self.structured_outputs is not None and self.guided_decoding is not None:
            raise ValueError("give structured_outputs or guided_decoding (vLLM's older name for it), not both")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError(f"best_of must equal n (ditto returns every choice), got best_of={self.best_of}, n={self.n}")
        if not self.detokenize:
            raise ValueError("detokenize=False is not supported by ditto")
        if not self.spaces_between_special_tokens:
            raise ValueError("spaces_between_special_tokens=False is not supported by ditto")
        if not isinstance(self.output_kind, RequestOutputKind):
            raise ValueError(f"output_kind must be a RequestOutputKind, got {self.output_kind!r}")
        self._to_engine().validate()

    def clone(self) -> "SamplingParams":
        """A deep copy (vLLM's SamplingParams.clone)."""
        return dataclasses.replace(self, stop=list(self.stop), stop_token_ids=list(self.stop_token_ids))

    def _to_engine(self, default_seed: Optional[int] = None) -> _ditto.SamplingParams:
        """The engine's SamplingParams (C++). Raises ValueError naming a field of the wrong type."""
        p = _ditto.SamplingParams()
        p.n = _int("n", self.n)
        p.presence_penalty = _float("presence_penalty", self.presence_penalty)
        p.frequency_penalty = _float("frequency_penalty", self.frequency_penalty)
        p.repetition_penalty = _float("repetition_penalty", self.repetition_penalty)
        p.temperature = _float("temperature", self.temperature)
        p.top_p = _float("top_p", self.top_p)
        p.top_k = _int("top_k", self.top_k)
        p.min_p = _float("min_p", self.min_p)
        seed = self.seed if self.seed is not None else default_seed
        if seed is not None:
            seed = _int("seed", seed, bits=None)
            if not -(1 << 63) <= seed < 1 << 64:
                raise ValueError(f"seed must be in [-2^63, 2^64 - 1] (-1 or None: none), got {seed}")
            if seed < 0:
                # vLLM seeds torch's generator with it, which reads a negative int64 as its two's
                # complement (torch/csrc/Generator.cpp, unpack_uint64): -5 is the seed 2^64 - 5.
                seed += 1 << 64
            p.seed = seed
        if not isinstance(self.stop, list) or not all(isinstance(s, str) for s in self.stop):
            raise ValueError(f"stop must be a string or a list of strings, got {self.stop!r}")
        p.stop = self.stop
        p.stop_token_ids = [_int("stop_token_ids", t, bits=32) for t in self.stop_token_ids]
        p.ignore_eos = _bool("ignore_eos", self.ignore_eos)
        p.include_stop_str_in_output = _bool("include_stop_str_in_output", self.include_stop_str_in_output)
        p.max_tokens = _UNBOUNDED if self.max_tokens is None else _int("max_tokens", self.max_tokens)
        p.min_tokens = _int("min_tokens", self.min_tokens)
        if self.logprobs is not None:
            p.logprobs = _int("logprobs", self.logprobs)
        if self.prompt_logprobs is not None:
            p.prompt_logprobs = _int("prompt_logprobs", self.prompt_logprobs)
        p.skip_special_tokens = _bool("skip_special_tokens", self.skip_special_tokens)
        if self.logit_bias:
            if not isinstance(self.logit_bias, dict):
                raise ValueError(f"logit_bias must be a dict of token id to bias, got {self.logit_bias!r}")
            p.logit_bias = {_int("logit_bias", int(k) if isinstance(k, str) and k.lstrip("-").isdigit() else k,
                                 bits=32): _float("logit_bias", v) for k, v in self.logit_bias.items()}
        if self.allowed_token_ids is not None:
            if not isinstance(self.allowed_token_ids, (list, tuple)):
                raise ValueError(f"allowed_token_ids must be a list of token ids, got {self.allowed_token_ids!r}")
            p.allowed_token_ids = [_int("allowed_token_ids", t, bits=32) for t in self.allowed_token_ids]
        if self.bad_words:
            if not isinstance(self.bad_words, (list, tuple)) or not all(isinstance(w, str) for w in self.bad_words):
                raise ValueError(f"bad_words must be a list of strings, got {self.bad_words!r}")
            p.bad_words = list(self.bad_words)
        if self.truncate_prompt_tokens is not None:
            p.truncate_prompt_tokens = _int("truncate_prompt_tokens", self.truncate_prompt_tokens)
        if self.logprob_token_ids is not None:
            if not isinstance(self.logprob_token_ids, (list, tuple)):
                raise ValueError(f"logprob_token_ids must be a list of token ids, got {self.logprob_token_ids!r}")
            p.logprob_token_ids = [_int("logprob_token_ids", t, bits=32) for t in self.logprob_token_ids]
            if self.logprobs is None:
                p.logprobs = 0
        constraint = self.structured_outputs if self.structured_outputs is not None else self.guided_decoding
        if constraint is not None:
            p.structured_outputs = constraint._to_engine()
        return p


def _int(name: str, value: Any, bits: Optional[int] = 64) -> int:
    """value as an int that fits a signed `bits`-bit integer (None: any size). Raises ValueError
    naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if bits is not None and not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{name} is out of range, got {value}")
    return value


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def _json_text(name: str, value: Any, what: str) -> str:
    """value (a dict or list, or JSON text as given) as JSON text. Raises ValueError naming `name`."""
    if isinstance(value, str):
        return value
    if not isinstance(value, (dict, list)):
        raise ValueError(f"{name} must be {what}, got {type(value).__name__}")
    try:
        return _json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} is not JSON: {err}") from None
    except RecursionError:  # the engine refuses deeper than 100 levels anyway
        raise ValueError(f"{name} is nested too deeply to write as JSON") from None


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


# vLLM keeps BeamSearchParams here too (vllm.sampling_params.BeamSearchParams).
from ditto.beam_search import BeamSearchParams  # noqa: E402,F401
