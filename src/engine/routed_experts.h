// Routed experts ("routing replay", vLLM's enable_return_routed_experts): the experts each MoE
// layer's router chose for each token a sequence ran, kept per KV slot as vLLM keeps them. A
// token's row is written to the slot its K/V go to, in the same step, so the row travels with the
// K/V: a prefix-cache hit reads the rows the cached block was computed with, a preempted and
// recomputed sequence rewrites them, a speculative guess that is dropped leaves its row past the
// sequence's computed tokens where the next step overwrites it. Routing is a per-row pure function
// of the token and its prefix (the router's GEMM and softmax are batch-invariant), so every way of
// filling a slot gives the same ids (docs/RL_ROUTED_EXPERTS.md).
// Cost: num_slots · num_moe_layers · num_experts_per_tok uint16 (Qwen3-30B-A3B: 768 bytes a token
// beside its 96 KiB of bf16 K/V).
// Thread-safety: none; the engine's thread drives it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "architecture/config.h"
#include "ditto/request_output.h"

namespace ditto {

// Throws Error(kInvalidArgument, param = "enable_return_routed_experts") naming the model's
// architecture when it has no MoE layers (no router chooses experts), or naming num_experts when
// uint16 ids cannot hold them. LLMEngine checks at load, so a server with the flag does not start.
void check_routed_experts_supported(const ModelConfig& config);

class RoutedExpertsStore {
 public:
  // A store for `num_slots` KV slots (num_blocks · block_size) of a model of `config`. Throws as
  // check_routed_experts_supported.
  RoutedExpertsStore(const ModelConfig& config, int64_t num_slots);

  // Values per token of a forward pass's routed experts: num_moe_layers · num_experts_per_tok.
  int64_t row_width() const { return num_moe_layers_ * num_experts_per_tok_; }

  // Keeps a forward pass's rows ([num_tokens, row_width()] int32, CausalLM::forward's
  // routed_experts) at their tokens' slots ([num_tokens], ForwardBatch::slot_mapping).
  void record(std::span<const int64_t> slot_mapping, std::span<const int32_t> rows);

  // The rows of positions [0, num_tokens) of a sequence whose blocks are `block_table` (position p
  // in block_table[p / block_size]); num_tokens is cut to what the table covers.
  RoutedExperts read(std::span<const int32_t> block_table, int64_t block_size, int64_t num_tokens) const;

 private:
  int64_t num_moe_layers_;
  int64_t num_experts_per_tok_;
  int64_t num_experts_;
  std::vector<uint16_t> by_slot_;  // [num_slots, num_moe_layers, num_experts_per_tok] expert ids
};

// `r` as the bytes of a NumPy .npy file (format 1.0): shape (num_tokens, num_moe_layers,
// num_experts_per_tok), C order, dtype uint8 when num_experts <= 256, else little-endian uint16
// (vLLM's choice of the narrowest type). The server sends it base64-encoded, as vLLM does:
// numpy.load(io.BytesIO(base64.b64decode(s))) reads it back.
std::string routed_experts_npy(const RoutedExperts& r);

}  // namespace ditto
