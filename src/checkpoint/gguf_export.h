// The GGUF converter: writes a Hugging Face model directory of a registered architecture
// (architecture/architecture.h, GgufArchitecture) as the GGUF file that llama.cpp's convert_hf_to_gguf.py
// writes for it, streaming one tensor at a time from the mmap. The tensors, their GGUF names and
// types come from architecture/model_tensors.h; the tokenizer keys from tokenizer/gguf_vocab.h.
//
// Every convention is llama.cpp's (the source bundled with node-llama-cpp 3.21.1:
// conversion/{base,llama,qwen}.py, gguf-py/gguf/{constants,vocab,metadata}.py,
// src/llama-vocab.cpp, src/models/{llama,qwen3,qwen3moe}.cpp):
//  - general.architecture GgufArchitecture::arch: "qwen3" (Qwen3ForCausalLM), "qwen3moe"
//    (Qwen3MoeForCausalLM) or "llama" (LlamaForCausalLM), and the hyperparameters as
//    <arch>.block_count, context_length, embedding_length, ...
//  - tensors token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm,
//    attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down (qwen3moe: ffn_gate_inp, ffn_gate_exps,
//    ffn_up_exps, ffn_down_exps)}, output_norm, and output unless the embeddings are tied
//    (llama.cpp then reuses token_embd).
//  - 1-D tensors, *_norm.weight and the MoE router ffn_gate_inp as F32; every other tensor keeps its
//    dtype (bf16 -> BF16, f16 -> F16: what --outtype auto picks; an f32 checkpoint stays F32, where
//    auto would pick F16).
//  - qwen3moe (conversion/qwen.py Qwen3MoeModel, a Qwen2MoeModel; src/models/qwen3moe.cpp): the
//    router mlp.gate as blk.N.ffn_gate_inp [num_experts, hidden_size]; each layer's experts stacked
//    into 3-D tensors blk.N.ffn_{gate,up,down}_exps [num_experts, out, in] (ggml ne: {in, out,
//    num_experts}), written down, gate, up as the converter yields them; expert_count,
//    expert_used_count, expert_feed_forward_length keys. llama.cpp's qwen3moe has a sparse block on
//    every layer and always renormalises the top-k weights: a dense layer (mlp_only_layers,
//    decoder_sparse_step) is refused, as the converter refuses it (QWEN3MOE has no ffn_gate tensor);
//    norm_topk_prob = false is written (no key holds it) with a warning.
//  - GgufArchitecture::permute_qk (llama): q_proj / k_proj rows regrouped per head (LlamaModel.permute), because
//  llama.cpp's
//    LLAMA graph rotates adjacent pairs while Hugging Face rotates the two halves of a head; Qwen3
//    runs NEOX-style (halves) RoPE in llama.cpp and is written as is.
//  - llama3 rope_scaling (GgufArchitecture::rope_freqs): a rope_freqs.weight [head_dim / 2] F32 tensor of per-frequency
//  divisors
//    (LlamaModel.generate_extra_tensors); no rope.scaling.* keys.
//  - tokenizer "gpt2" (byte-level BPE): tokens padded to vocab_size with "[PAD<i>]", token types,
//    merges, the pre-tokenizer named by its split regex, special ids and add_*_token flags as
//    gguf.SpecialVocab reads them (a TemplateProcessing post-processor that appends a token makes it
//    the EOS with add_eos_token, the old EOS the EOT: Qwen3-Embedding's <|endoftext|>), the chat
//    template; sampling defaults from generation_config.json.
//  - a sentence-transformers directory's pooling (checkpoint/pooling_files.h) as <arch>.pooling_type
//    (MEAN 1, CLS 2, LAST 3), as _try_set_pooling_type writes it; the Normalize module has no key.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/quant.h"

namespace ditto {

struct GgufExportSummary {
  std::string arch;  // general.architecture
  size_t num_tensors = 0;
  std::string size_label;  // general.size_label ("596M", "128x1.8B")
  uint64_t bytes = 0;      // the file's size
};

// llama-quantize's mixes (llama_ftype LLAMA_FTYPE_MOSTLY_Q2_K, _Q3_K_M, _Q4_K_M, _Q5_K_M, _IQ4_XS):
// each weight matrix's type chosen as llama.cpp's llama_tensor_get_type chooses it without an
// importance matrix (src/llama-quant.cpp): by its role (attn_v, ffn_down, attn_output, the output
// head or the tied embedding), its layer and the model's GQA ratio and expert count.
enum class GgufMix { kNone, kQ2_K, kQ3_K_M, kQ4_K_M, kQ5_K_M, kIQ4_XS };

// What `ditto export-gguf --outtype` asks for.
//  - type kNone ("auto"): every tensor keeps the checkpoint's dtype.
//  - mix kNone: every weight matrix in `type` (llama-quantize --pure).
//  - a mix: `type` is its default (Q2_K, Q3_K, Q4_K, Q5_K, IQ4_XS) and each matrix may take another.
// Either way a matrix whose rows the chosen type's blocks do not divide falls back as llama.cpp's
// tensor_type_fallback does (IQ4_XS -> IQ4_NL, Q2_K and Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0), and keeps the checkpoint's dtype where 32 does not divide them either (llama.cpp
// writes F16 there, or refuses a 32-value type).
struct GgufOuttype {
  QuantType type = QuantType::kNone;
  GgufMix mix = GgufMix::kNone;
  GgufOuttype() = default;
  GgufOuttype(QuantType t) : type(t) {}  // NOLINT(google-explicit-constructor): a plain type is pure
  GgufOuttype(QuantType t, GgufMix m) : type(t), mix(m) {}
};

// Writes the Hugging Face model directory `model_dir` as GGUF to `output` (replaced if it exists);
// `name` is general.name. Throws Error(kInvalidArgument) naming the file, key or tensor for an
// architecture, config, tokenizer or checkpoint the converter cannot write (before `output` is
// created where it can), or when `output` is one of the model's own files; Error(kNotFound) for a
// missing config.json, tokenizer.json or tensor.
// `outtype`: GgufOuttype below. Quantized weights are kernels/quant.h quantize_row's (plain
// round-to-nearest, not llama-quantize's search); norm weights, biases, routers and rope_freqs stay
// F32, as llama.cpp's converter keeps them.
GgufExportSummary export_gguf(const std::string& model_dir, const std::string& output, const std::string& name,
                              const GgufOuttype& outtype);
GgufExportSummary export_gguf(const std::string& model_dir, const std::string& output, const std::string& name);

// "auto"; the pure types "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q4_k", "q5_k", "q6_k",
// "q3_k"; llama-quantize's mixes by its names "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "iq4_xs".
// Error(kInvalidArgument) naming --outtype and listing the names.
GgufOuttype parse_gguf_outtype(const std::string& outtype);

}  // namespace ditto
