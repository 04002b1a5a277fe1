// A llama.cpp GGUF file as a ditto model: its metadata read into the same ModelConfig a Hugging
// Face config.json gives, its tokenizer keys into a GgufVocab, and its tensors located for each
// TensorDesc of that config (architecture/model_tensors.h), so CausalLM::load packs them like safetensors.
//
// Metadata -> config (the inverse of llama.cpp's convert_hf_to_gguf.py, which ditto's own
// export-gguf writes, checkpoint/gguf_export.h): general.architecture picks the registry entry whose
// GgufArchitecture::arch it is (llama, qwen3, qwen3moe); <arch>.embedding_length -> hidden_size,
// feed_forward_length -> intermediate_size, block_count -> num_hidden_layers,
// attention.head_count(_kv) -> num_attention_heads / num_key_value_heads, attention.key_length ->
// head_dim (default embedding_length / head_count), context_length -> max_position_embeddings,
// attention.layer_norm_rms_epsilon -> rms_norm_eps, rope.freq_base -> rope_theta (default 10000),
// vocab_size (else the token list's length); expert_count, expert_used_count and
// expert_feed_forward_length for qwen3moe (whose top-k weights llama.cpp always renormalises:
// norm_topk_prob). The weights decide the rest: tie_word_embeddings when output.weight is absent,
// attention_bias / mlp_bias when blk.0's biases are present; rope_freqs.weight (llama3 scaling as
// llama.cpp stores it) becomes rope_freq_divisors.
//
// Tensors: matrices may be any type of checkpoint/gguf_types.h; norm weights and biases must be float.
// llama's q/k rows were regrouped per head for llama.cpp's adjacent-pair RoPE (LlamaModel.permute);
// GgufWeight::permute_head_dim says so and the loader puts them back in Hugging Face order. An
// expert's matrix is its slice of the layer's stacked [num_experts, out, in] tensor.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "checkpoint/gguf_reader.h"
#include "tokenizer/gguf_vocab.h"

namespace ditto {

// The config.json keys gguf_model_config parses (Hugging Face names: architectures, model_type,
// hidden_size, ...), without what only the tensors say beyond them (rope_freqs.weight's divisors).
// Errors as gguf_model_config's for the metadata it reads.
nlohmann::json gguf_config_json(const GgufFile& g);

// The config of the model in `g`. Error(kInvalidArgument) "<path>: metadata '<key>' ..." naming
// the key for a missing or malformed hyperparameter, an architecture ditto does not run (listing
// the supported ones), or a feature it lacks (partial rotary dimensions, rope scaling types).
ModelConfig gguf_model_config(const GgufFile& g);

// The tokenizer.* keys of `g`. Error(kInvalidArgument) naming the key for a missing token list or
// a wrongly typed key. (tokenizer/gguf_vocab.h turns it into a tokenizer.)
GgufVocab gguf_vocab(const GgufFile& g);

// Where the data of one Hugging Face tensor (a TensorDesc) lies in the file.
struct GgufWeight {
  const GgufTensor* tensor = nullptr;
  const uint8_t* data = nullptr;  // the first row: the tensor's, or the expert's slice of it
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;  // Hugging Face shape[0] (1 for a vector)
  int64_t cols = 0;  // Hugging Face shape[1] (the vector's length)
  size_t row_bytes = 0;
  // > 0: rows are stored in llama.cpp's per-head pair order for heads of this size; Hugging Face
  // row permuted_row(r, permute_head_dim) is stored at row r (checkpoint/gguf_export.h).
  int64_t permute_head_dim = 0;
};

// llama.cpp's regrouping of q/k rows (LlamaModel.permute: reshape(n_head, 2, d/2).swapaxes(1, 2)):
// row r of the GGUF tensor is row llama_permuted_row(r, head_dim) of the Hugging Face one. Within a
// head, rows [x_0..x_{d/2-1}, y_0..] become [x_0, y_0, x_1, y_1, ...].
int64_t llama_permuted_row(int64_t r, int64_t head_dim);

// Locates `t` in `g`, checking its shape against the config and its type against its role.
// Error(kInvalidArgument) naming the tensor: missing, a shape that disagrees with the metadata
// (expected and actual), a quantized norm weight or bias.
GgufWeight gguf_weight(const GgufFile& g, const ModelConfig& c, const TensorDesc& t);

// gguf_weight for every tensor of `c`, before anything is loaded.
void validate_gguf_weights(const GgufFile& g, const ModelConfig& c);

}  // namespace ditto
