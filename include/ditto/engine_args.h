// How to load a model and size its engine: vLLM's EngineArgs, with the names and defaults of
// `vllm serve` / `LLM(...)` where they exist, and ditto's own for what a CPU engine adds.
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <cstdint>
#include <string>

namespace ditto {

struct EngineArgs {
  std::string model;                           // a directory or a hub id in the local HF cache
  int threads = 0;                             // 0: $DITTO_NUM_THREADS or all cores
  int64_t block_size = 16;                     // KV cache block, tokens
  int64_t kv_cache_memory = int64_t{2} << 30;  // bytes of bf16 KV cache
  int64_t max_num_batched_tokens = 2048;       // tokens per engine step
  int64_t max_num_seqs = 256;                  // sequences running at once
  // The most prompt tokens one request prefills in an engine step it shares with others (vLLM's
  // long_prefill_token_threshold), so that no request waits behind a long prompt; ≥ 0. 0: a
  // quarter of max_num_batched_tokens; max_num_batched_tokens or more: no cap. Never changes a bit
  // of any output (chunking does not).
  int64_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = true;
  // Context in tokens (prompt + output) every request must fit; 0: the model's
  // max_position_embeddings. A smaller value caps a chat's default max_tokens.
  int64_t max_model_len = 0;
  int64_t max_logprobs = 20;  // the most top logprobs a request may ask for
  // Processes the model is split over (vLLM's tensor_parallel_size), one per MPI rank, launched
  // with `mpirun -np N`; outputs are bit-identical for every N (docs/INVARIANCE.md). Each rank holds
  // 1/N of the weights and of kv_cache_memory's KV heads. Only rank 0 may construct an engine; the
  // others serve it (serve_as_tensor_parallel_rank, model/tensor_parallel_worker.h).
  int tensor_parallel_size = 1;
};

}  // namespace ditto
