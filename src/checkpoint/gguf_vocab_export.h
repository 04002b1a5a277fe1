// A Hugging Face tokenizer written into a GGUF file's tokenizer.* keys, as llama.cpp's
// convert_hf_to_gguf.py writes it for a byte-level BPE tokenizer (conversion/base.py
// get_vocab_base, gguf-py/gguf/vocab.py SpecialVocab): tokenizer "gpt2", tokens padded to
// vocab_size with "[PAD<i>]", token types, merges, the pre-tokenizer named by its split regex,
// special ids and add_*_token flags as SpecialVocab reads them, the chat template. The vocabulary
// itself (and GGUF -> Hugging Face) is tokenizer/gguf_vocab.h's.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf_writer.h"
#include "tokenizer/gguf_vocab.h"

namespace ditto {

// Reads `dir`'s tokenizer.json, tokenizer_config.json (and chat_template.jinja / chat_template.json
// when it has no chat_template); `config` (config.json) supplies special token ids neither names.
// Throws Error(kNotFound) without tokenizer.json, Error(kInvalidArgument) naming the file for a
// tokenizer GGUF cannot hold (not byte-level BPE, an unknown pre-tokenizer regex, ids outside
// vocab_size) or a malformed one.
GgufVocab read_gguf_vocab(const std::string& dir, const nlohmann::json& config, int64_t vocab_size);

// Writes the tokenizer.* keys, in the converter's order.
void add_gguf_vocab(GgufWriter& w, const GgufVocab& v);

}  // namespace ditto
