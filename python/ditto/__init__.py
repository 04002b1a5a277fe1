"""ditto: a batch-invariant LLM inference engine for CPUs, with vLLM's Python API.

    from ditto import LLM, SamplingParams
    llm = LLM(model="Qwen/Qwen3-8B")
    outputs = llm.generate(["The future of AI is"], SamplingParams(temperature=0.7, seed=42))
    embeddings = LLM(model="Qwen/Qwen3-Embedding-0.6B").embed(["The future of AI is"])

Every output is the same bits whatever else is in the batch, its order, the thread count and the
CPU's instruction set (docs/INVARIANCE.md).
"""
from ditto._env import batch_invariant_mode
from ditto._ditto import __version__
from ditto.beam_search import BeamSearchOutput, BeamSearchParams, BeamSearchSequence
from ditto.async_llm import AsyncLLM
from ditto.llm import LLM
from ditto.outputs import (CompletionOutput, EmbeddingOutput, EmbeddingRequestOutput, Logprob, PoolingOutput,
                           PoolingRequestOutput, RequestOutput, ScoringOutput, ScoringRequestOutput)
from ditto.pooling_params import PoolingParams
from ditto.sampling_params import (GuidedDecodingParams, RequestOutputKind, SamplingParams,
                                   StructuredOutputsParams)
from ditto.tokenizer import Tokenizer

__all__ = [
    "LLM",
    "AsyncLLM",
    "SamplingParams",
    "StructuredOutputsParams",
    "GuidedDecodingParams",
    "RequestOutputKind",
    "RequestOutput",
    "CompletionOutput",
    "Logprob",
    "PoolingParams",
    "PoolingRequestOutput",
    "PoolingOutput",
    "EmbeddingRequestOutput",
    "EmbeddingOutput",
    "ScoringRequestOutput",
    "ScoringOutput",
    "Tokenizer",
    "BeamSearchParams",
    "BeamSearchOutput",
    "BeamSearchSequence",
    "batch_invariant_mode",
    "__version__",
]

batch_invariant_mode()  # reads VLLM_BATCH_INVARIANT / DITTO_BATCH_INVARIANT once, at import
