// What a checkpoint says about pooling, read from its own files: a Hugging Face directory's
// sentence-transformers modules (modules.json, the Pooling module's config.json, a Normalize
// module; Qwen3-Embedding ships them) or a GGUF file's `{arch}.pooling_type` key (llama.cpp's
// LLAMA_POOLING_TYPE values). The engine (engine/pooling.h) turns this and the launch flags into
// the model's pooling task; this file only reads.
#pragma once

#include <optional>
#include <string>

namespace ditto {

// How the token rows of a prompt become one vector (vLLM's PoolingType names).
enum class PoolingType {
  kLast,  // the last prompt token's row (sentence-transformers pooling_mode_lasttoken; llama.cpp LAST = 3)
  kMean,  // the mean of every prompt token's row (pooling_mode_mean_tokens; llama.cpp MEAN = 1)
  kCls,   // the first prompt token's row (pooling_mode_cls_token; llama.cpp CLS = 2)
};

// "LAST", "MEAN", "CLS".
const char* pooling_type_name(PoolingType type);
// The type of that name (case-insensitive). Throws Error(kInvalidArgument, param = "pooling_type")
// naming the three.
PoolingType parse_pooling_type(const std::string& name);

// A checkpoint's own pooling description.
struct PoolingFiles {
  PoolingType pooling_type = PoolingType::kLast;
  bool normalize = false;  // a Normalize module follows the pooling (L2, sentence-transformers)
  // llama.cpp's RANK pooling (4): a reranker whose GGUF file carries a classifier head; ditto
  // refuses it by name (it scores a causal LM's yes/no logits instead; engine/pooling.h).
  bool rank = false;
  std::string source;  // the file read: ".../modules.json" or "FILE.gguf: qwen3.pooling_type"
};

// Reads `model_path` (a directory or a .gguf file). nullopt: the checkpoint says nothing about
// pooling (no modules.json with a Pooling module; no pooling_type key, or NONE = 0). Throws
// Error(kInvalidArgument) naming the file and key for a malformed modules.json or Pooling config,
// a Pooling config with no mode or several (ditto pools one way), a mode ditto lacks
// (pooling_mode_max_tokens, weightedmean, mean_sqrt_len), or a pooling_type value outside 0..4.
std::optional<PoolingFiles> read_pooling_files(const std::string& model_path);

}  // namespace ditto
