// The decoder-only transformer shared by every registered architecture (architecture/architecture.h:
// Qwen3ForCausalLM, Qwen3MoeForCausalLM, LlamaForCausalLM, Gemma3ForCausalLM). They differ only in
// data, the config and its architecture's features (per-head q/k RMSNorm, biases, llama3 rope
// scaling, a sparse MoE block instead of the MLP on the layers config.is_moe_layer selects; Gemma 3's
// (1 + w) norms, norms on the attention and MLP outputs, the scaled embedding, GELU(tanh), and
// sliding-window layers with their own RoPE base), so one forward pass serves all (Hugging Face
// modeling_qwen3.py, modeling_qwen3_moe.py, modeling_llama.py, modeling_gemma3.py). The tensors come
// from architecture/model_tensors.h; weights are repacked once at load (kernels/packed_matrix.h).
//
// forward() reads top to bottom: embedding_block, then per layer attention_block and
// feed_forward_block (mlp_block or moe_block), then final_norm_and_lm_head.
//
// The MoE block (DESIGN.md §2, canonical routing): router logits by the canonical GEMM; softmax
// over the experts in float32 (kernels/softmax.h); the top num_experts_per_tok experts by
// (probability desc, expert id asc), so ties go to the lower id; with norm_topk_prob each weight is
// divided by the float32 sum of the selected probabilities taken in that same order; each selected
// expert computes down(silu(gate(x)) · up(x)); the token's output is the sum over its experts in
// ascending expert id of weight · output, one float32 multiply then add per term, from +0.
// Tokens are grouped by expert so each expert's weights are read once per step; because GEMM is
// per-row invariant, grouping never changes a bit.
//
// Tensor parallelism (model/tensor_parallel_shard.h): loaded with a TensorParallelGroup, each rank
// holds its shard; rank 0's load() and forward() send the other ranks the same command
// (model/tensor_parallel_worker.h), and each forward pass all-gathers, per layer, the attention
// output, o_proj's outputs, the MLP activations and down_proj's outputs (MoE: the experts'
// activations and outputs), so every rank holds the whole residual stream with the bits of one
// process. Logits are assembled on rank 0 only.
//
// Thread-safety: forward() may not run concurrently on one instance (it uses the thread pool and
// an activation arena owned by the instance).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "core/step_profile.h"
#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/tensor_parallel_shard.h"

namespace ditto {

// Weights as load() keeps them: a PackedMatrix holds the checkpoint's dtype (bf16, f16 or f32) or
// a GGUF file's quantized blocks (kernels/quant.h) repacked into panels; norm weights and biases
// are widened to f32. Which field a checkpoint tensor fills is its WeightSlot (model_tensors.h).

// One expert of a sparse MoE layer.
struct ExpertWeights {
  LinearWeight gate_up_proj;  // [2·moe_intermediate_size, hidden_size] checkpoint dtype, gate, up fused
  LinearWeight down_proj;     // [hidden_size, moe_intermediate_size] checkpoint dtype
};

struct DecoderLayerWeights {
  std::vector<float> input_layernorm;           // [hidden_size] f32
  LinearWeight qkv_proj;                        // [q_dim + 2·kv_dim, hidden_size] q, k, v fused
  std::vector<float> qkv_bias;                  // [q_dim + 2·kv_dim] f32, empty without has_qkv_bias()
  std::vector<float> q_norm;                    // [head_dim] f32, empty without features.qk_norm
  std::vector<float> k_norm;                    // [head_dim] f32, empty without features.qk_norm
  LinearWeight o_proj;                          // [hidden_size, q_dim]
  std::vector<float> o_bias;                    // [hidden_size] f32, empty without has_o_bias()
  std::vector<float> attention_output_norm;     // [hidden_size] f32 Gemma's post_attention_layernorm, or empty
  std::vector<float> post_attention_layernorm;  // [hidden_size] f32 the MLP's input norm
  LinearWeight gate_up_proj;                    // [2·intermediate_size, hidden_size] gate, up fused
  std::vector<float> gate_up_bias;              // [2·intermediate_size] f32, empty without mlp_bias
  LinearWeight down_proj;                       // [hidden_size, intermediate_size]
  std::vector<float> down_bias;                 // [hidden_size] f32, empty without mlp_bias
  std::vector<float> mlp_output_norm;           // [hidden_size] f32 Gemma's post_feedforward_layernorm, or empty
  // Sparse MoE layers (gate_up_proj/down_proj above are then empty):
  LinearWeight router;                 // [num_experts, hidden_size] mlp.gate.weight
  std::vector<ExpertWeights> experts;  // [num_experts]
  bool is_moe() const { return !experts.empty(); }
};

class CheckpointTensors;  // where load() reads tensors from: safetensors or GGUF (model/checkpoint_tensors.h)
class TensorParallelGroup;

struct LoadStats {
  int64_t num_tensors = 0;
  int64_t weight_bytes = 0;  // payload bytes of the checkpoint's tensors
  double seconds = 0;
};

class CausalLM {
 public:
  // Loads a Hugging Face model directory (config.json and safetensors) or a llama.cpp GGUF file
  // (checkpoint/gguf_model.h): the config, then every tensor the config implies (validated for
  // presence, shape and type before anything is packed). Quantized GGUF weights stay quantized.
  // `pool` is used for packing and by forward(); it must outlive the model.
  // Throws Error naming the file and key/tensor for any malformed or missing input, and
  // Error(kResourceExhausted) when the weights need more memory than the machine has available
  // (core/memory_info.h), before anything is loaded.
  // With a tensor-parallel group (rank 0 calls; the other ranks follow its command) every rank
  // loads its shard; the ranks then compare results, and any rank's failure, a model that the
  // group size does not divide, or ranks that read different files throw on rank 0, naming the
  // rank and its reason.
  static std::unique_ptr<CausalLM> load(const std::string& model_path, ThreadPool* pool,
                                        TensorParallelGroup* tensor_parallel = nullptr);
  ~CausalLM();

  // What this process holds (the whole model without tensor parallelism).
  const TensorParallelShard& shard() const { return shard_; }

  // A KV cache for this rank's KV heads: num_blocks blocks of block_size tokens. On rank 0 of a
  // group the other ranks allocate theirs; release_kv_cache() frees them. Throws as KvCache.
  KvCache make_kv_cache(int64_t num_blocks, int64_t block_size) const;
  void release_kv_cache(const KvCache& cache) const;

  const ModelConfig& config() const { return config_; }
  const LoadStats& load_stats() const { return load_stats_; }
  // True when the weights came from a GGUF file (they cannot be updated: model/weight_update.h).
  bool is_gguf() const { return is_gguf_; }
  // How many weight updates have been applied (model/weight_update.h): 0 as loaded. KV computed
  // under one epoch is never reused under another (the engine keys its prefix cache by it).
  uint64_t weights_epoch() const { return weights_epoch_; }
  // The opaque version string of the weights (docs/RL.md): "0" as loaded, then what the last
  // weight update set (WeightUpdate::apply). Every output carries it (RequestOutput::weight_version).
  const std::string& weight_version() const { return weight_version_; }

  // Bytes of weights one decode step reads at batch size 1: every layer's packed matrices and
  // norm vectors, the final norm and the LM head (the embedding table when tied); on MoE layers
  // the router and num_experts_per_tok experts (the *active* weights; every expert is the same
  // size). One embedding row is negligible and not counted. The denominator of the decode
  // roofline: tokens/s ≤ read bandwidth ÷ decode_weight_bytes().
  int64_t decode_weight_bytes() const;
  // The part of decode_weight_bytes() the LM head reads (its packed matrix, or the tied embedding).
  int64_t lm_head_weight_bytes() const {
    return (config_.tie_word_embeddings ? embed_tokens_ : lm_head_).weight_bytes();
  }

  // Floating-point operations of one prefill of a `prompt_tokens`-token prompt at positions 0…,
  // counting a multiply-add as 2: every token through every linear layer (2·n·k each; on MoE
  // layers the router and num_experts_per_tok experts), causal attention (4·head_dim per query
  // head and visible key: q·k and p·v), and the LM head for the last token only (what prefill
  // computes). Norms, RoPE, softmax and activations are not counted. The numerator of prefill's
  // ratio to the machine's GEMM peak.
  double prefill_flops(int64_t prompt_tokens) const;

  // Runs the model over a flat batch: writes every token's K/V into `cache` at its slot, then
  // computes attention over the sequence's cached keys 0..position. logits: [num_logits,
  // vocab_size] f32 for the rows batch.logits_indices, in that order (rank 0; null on the others
  // of a tensor-parallel group); no logits row wanted: the LM head is not run. hidden: [num_hidden,
  // hidden_size] f32, the final norm's output (what the LM head reads: Hugging Face's
  // last_hidden_state) for the rows batch.hidden_indices, in that order; may be null when there
  // are none. Each row is the same bits whatever else the batch holds (the LM head's input is). Under tensor
  // parallelism a failure after the other ranks have started stops every rank (TensorParallelGroup::abort) rather than
  // leave them waiting. Throws Error(kInvalidArgument) for token ids outside the vocabulary, positions outside [0,
  // max_position_embeddings) or slots outside the cache; the KV of tokens before the failure may have been written.
  // routed_experts: [num_tokens, config().num_moe_layers(), num_experts_per_tok] int32, per token and
  // MoE layer (in layer order) the experts its router chose, in the router's order (probability
  // desc, expert id asc: the top-k order of the file comment), or null. Rank 0 fills it; every rank
  // routes the whole batch with the whole router, so the other ranks' choice is the same.
  void forward(const ForwardBatch& batch, KvCache& cache, float* logits, float* hidden = nullptr,
               int32_t* routed_experts = nullptr) const;

  // Frees forward()'s activation buffers, which keep the size of the largest batch seen (up to
  // the step's token budget: 62 MiB for SmolLM2-135M at 2048 tokens); the next forward() allocates
  // them again. For an idle server. Not concurrently with forward() (this process only: under
  // tensor parallelism the other ranks keep theirs).
  void release_activations() const;

 private:
  friend class TensorParallelWorker;  // model/tensor_parallel_worker.h
  friend class WeightUpdate;          // model/weight_update.h: writes the slots in place
  friend void drop_weight_pages(CausalLM& model);
  struct Activations;  // forward()'s buffers, shapes in causal_lm.cc

  CausalLM() = default;

  // Every rank: loads this rank's shard and, in a group, agrees with the others on the outcome.
  static std::unique_ptr<CausalLM> load_shard(const std::string& model_path, ThreadPool* pool,
                                              TensorParallelGroup* tensor_parallel, int64_t model_id);
  static std::unique_ptr<CausalLM> load_local(const std::string& model_path, ThreadPool* pool, int rank, int size);
  // forward() after validation, on every rank (routed_experts: rank 0's, or null).
  void forward_shard(const ForwardBatch& batch, KvCache& cache, float* logits, float* hidden,
                     int32_t* routed_experts = nullptr) const;
  // full [rows, size · width] = every rank's local [rows, width] side by side in rank order
  // (all-gather; a copy when size is 1 and full != local). When `consumer`, the linear layer full
  // feeds, rounds its input to bf16, the values travel as bf16. scratch: [(size + 1) · rows ·
  // width / 2] floats.
  void gather_columns(const float* local, int64_t rows, int64_t width, float* full, float* scratch,
                      const LinearWeight* consumer = nullptr) const;

  // Packs every tensor of config_ from `tensors` into its slot.
  void load_tensors(const CheckpointTensors& tensors, ThreadPool* pool);
  void tune_kernels() const;
  // Where load() puts a tensor of `slot` (model_tensors.h); experts are added as they come.
  LinearWeight* matrix_slot(WeightSlot slot, int64_t layer, int64_t expert);
  std::vector<float>* vector_slot(WeightSlot slot, int64_t layer);

  // forward()'s blocks, in the order it runs them; each reads and updates `a` (see causal_lm.cc).
  Activations activations(int64_t num_tokens) const;
  void embedding_block(const ForwardBatch& batch, Activations& a) const;
  void embedding_rows(const ForwardBatch& batch, Activations& a) const;  // h = embed_tokens[token_ids]
  void attention_block(const DecoderLayerWeights& l, int64_t layer, KvCacheLayer kv, const ForwardBatch& batch,
                       const AttentionShape& shape, Activations& a) const;
  // routed: where a MoE layer writes each token's experts (moe_block's), or null.
  void feed_forward_block(const DecoderLayerWeights& l, Activations& a, int32_t* routed = nullptr,
                          int64_t routed_stride = 0) const;
  void mlp_block(const DecoderLayerWeights& l, Activations& a) const;
  void final_norm_and_lm_head(const ForwardBatch& batch, const Activations& a, float* logits, float* hidden) const;
  // Each rank's logits [num_logits, its vocabulary rows] into rank 0's logits [num_logits, vocab_size].
  void gather_logits(const float* local, int64_t num_logits, float* logits) const;
  void for_tokens(int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) const;

  // The sparse MoE block for x [num_tokens, hidden_size] into delta [num_tokens, hidden_size]
  // (see the file comment). scratch holds moe_scratch_floats(num_tokens) floats.
  // Under tensor parallelism delta is this rank's [num_tokens, shard.hidden] columns.
  // routed: null, or token t's num_experts_per_tok chosen expert ids (int32, in the router's order:
  // probability desc, id asc) go to routed[t · routed_stride + j].
  void moe_block(const DecoderLayerWeights& l, const float* x, int64_t num_tokens, float* delta, float* scratch,
                 int32_t* routed = nullptr, int64_t routed_stride = 0) const;
  size_t moe_scratch_floats(int64_t num_tokens) const;

  ModelConfig config_;
  TensorParallelShard shard_;  // the whole model unless tensor-parallel
  TensorParallelGroup* tp_ = nullptr;
  int64_t tp_model_id_ = -1;  // this model's id in rank 0's commands
  ThreadPool* pool_ = nullptr;
  LoadStats load_stats_;
  bool is_gguf_ = false;
  uint64_t weights_epoch_ = 0;
  std::string weight_version_ = "0";
  std::vector<double> inv_freq_;             // [head_dim / 2] f64 rotary frequencies
  std::vector<double> local_inv_freq_;       // [head_dim / 2] f64 sliding layers' frequencies, or empty
  LinearWeight embed_tokens_;                // [vocab rows of the shard, hidden_size] checkpoint dtype, one part
  std::vector<DecoderLayerWeights> layers_;  // [num_hidden_layers]
  std::vector<float> norm_;                  // [hidden_size] f32 final RMSNorm
  LinearWeight lm_head_;                     // [vocab_size, hidden_size] checkpoint dtype; empty when tied
  mutable std::vector<float> arena_;         // forward()'s Activations, reused across calls (release_activations)
};

}  // namespace ditto
