// Pooling requests: embeddings and relevance scores, shaped like vLLM's PoolingParams and
// PoolingRequestOutput (vllm/pooling_params.py, vllm/outputs.py).
//
// A pooling request runs its prompt through the model like a generation's prefill and returns,
// instead of tokens, one vector computed from the final-normed hidden states (task "embed") or
// from the last token's next-token logits (task "score", a Qwen3-Reranker's yes/no relevance).
// It is the same bits alone or in any batch, chunked at any budget, with prefix-cache hits, on any
// thread count, ISA or tensor-parallel size (docs/INVARIANCE.md).
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ditto {

struct PoolingParams {
  // "embed", "score", or "" for the model's pooling task (ModelInfo::pooling_task). "score" on an
  // embedding model is refused here: LLM::score pairs texts and takes their embeddings' cosine.
  std::string task;
  // embed: keep the first `dimensions` values before normalizing (Matryoshka representation
  // learning); in [1, hidden_size], and one of the config's matryoshka_dimensions when it lists
  // them. Unset: all hidden_size values.
  std::optional<int64_t> dimensions;
  // embed: divide by the L2 norm (vLLM's normalize); unset: the model's default (true for
  // sentence-transformers models with a Normalize module and for a plain --runner pooling model,
  // as vLLM). score: a synonym of use_activation.
  std::optional<bool> normalize;
  // score: the relevance as sigmoid(logit(yes) − logit(no)) (true, the default) or the raw
  // difference; embed: a synonym of normalize (vLLM's newer name).
  std::optional<bool> use_activation;
  // Keep only the last k prompt tokens (vLLM's truncate_prompt_tokens; -1: the last max_model_len).
  std::optional<int64_t> truncate_prompt_tokens;
};

// One pooling request's result (vLLM's PoolingRequestOutput; EmbeddingRequestOutput's
// outputs.embedding and ScoringRequestOutput's outputs.score are `data` here).
struct PoolingRequestOutput {
  std::string request_id;
  std::string prompt;  // the prompt as text (a rendered score pair, a text prompt); "" for token ids
  std::vector<int32_t> prompt_token_ids;
  // embed: [dimensions or hidden_size] f32; score: [1] f32, the relevance.
  std::vector<float> data;
  // Prompt tokens whose K/V the prefix cache held (not part of the contract: work saved, not bits).
  int64_t num_cached_tokens = 0;
  bool finished = true;
};

// A request that could not run carries its error; the others complete.
struct PoolingResult {
  PoolingRequestOutput output;
  std::optional<std::string> error;  // "prompt I: why", naming the field at fault
};

}  // namespace ditto
