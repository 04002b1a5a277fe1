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
//    gguf.SpecialVocab reads them, the chat template; sampling defaults from generation_config.json.
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

// Writes the Hugging Face model directory `model_dir` as GGUF to `output` (replaced if it exists);
// `name` is general.name. Throws Error(kInvalidArgument) naming the file, key or tensor for an
// architecture, config, tokenizer or checkpoint the converter cannot write (before `output` is
// created where it can), or when `output` is one of the model's own files; Error(kNotFound) for a
// missing config.json, tokenizer.json or tensor.
// `outtype` kNone ("auto") keeps the checkpoint's dtype; a quantized type writes every weight
// matrix in it (kernels/quant.h quantize_row: plain round-to-nearest, not llama-quantize's search),
// a K-quant falling back to Q8_0 for rows its 256-value blocks do not divide (and any type to the
// stored dtype for rows 32 does not divide); norm weights,
// biases, routers and rope_freqs stay F32, as llama.cpp's converter keeps them.
GgufExportSummary export_gguf(const std::string& model_dir, const std::string& output, const std::string& name,
                              QuantType outtype = QuantType::kNone);

// "auto" -> kNone; "q8_0", "q4_0", "q4_1", "q4_k", "q6_k". Error(kInvalidArgument) naming --outtype.
QuantType parse_gguf_outtype(const std::string& outtype);

}  // namespace ditto
