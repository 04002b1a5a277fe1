// The Hugging Face converter: writes a llama.cpp GGUF file that ditto runs as the Hugging Face model
// directory the same model would have (`ditto export-hf`), so that a trainer (PyTorch, transformers)
// and ditto load one set of float weights — the GGUF converter's way in reverse (checkpoint/gguf_export.h).
//
// What it writes into the directory:
//  - config.json: the keys gguf_model_config parses (gguf_config_json, checkpoint/gguf_model.h) plus
//    torch_dtype, indent 2.
//  - model.safetensors: every tensor of for_each_tensor(config) (architecture/model_tensors.h) by its
//    Hugging Face name and shape, dequantized as ditto dequantizes it (kernels/quant.h
//    dequantize_row_f32: exact for formats without a min, one rounding for those with one), with
//    llama's q/k rows put back in Hugging Face order (llama_permuted_row, as the loader does) and a
//    unit-offset norm (Gemma's 1 + w) written as w = stored − 1 in float32; then stored as float32
//    (exactly those values) or bfloat16 (each rounded to nearest even). Streamed a row at a time.
//  - tokenizer.json and tokenizer_config.json: the tokenizer ditto builds from the file's
//    tokenizer.ggml.* keys (tokenizer/gguf_vocab.h hf_tokenizer_from_gguf), so the directory encodes
//    every text as the GGUF does; the chat template and special tokens in tokenizer_config.json.
//  - generation_config.json: bos_token_id and llama.cpp's end-of-generation ids as eos_token_id (what
//    ditto stops on for the GGUF); no sampling defaults, as ditto reads none from a GGUF file.
// Refused, naming the key or tensor: a file ditto cannot load (gguf_model_config's errors), llama3
// RoPE scaling (rope_freqs.weight: the divisors, not config.json's rope_scaling keys, are all the file
// keeps), no tokenizer. The directory is created if needed; config.json is removed first and
// written last, so a half-written directory never looks complete.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ditto {

struct HfExportSummary {
  std::string architecture;  // config.json's architectures[0] ("LlamaForCausalLM")
  size_t num_tensors = 0;
  uint64_t num_parameters = 0;
  uint64_t safetensors_bytes = 0;  // model.safetensors's size
};

// Writes the GGUF file `gguf_path` as a Hugging Face model directory `out_dir` of weights in `dtype`
// (kF32 or kBF16). Error(kNotFound) for a missing file; kInvalidArgument naming the file, key or
// tensor for what cannot be exported (above), for dtype kF16, or when `out_dir` is a file.
HfExportSummary export_hf(const std::string& gguf_path, const std::string& out_dir, DType dtype);

// "bfloat16" -> kBF16, "float32" -> kF32; Error(kInvalidArgument) naming --dtype otherwise.
DType parse_hf_export_dtype(const std::string& name);

}  // namespace ditto
