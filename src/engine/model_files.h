// The tokenizer, chat template and end-of-sequence ids of a model, from whichever form it comes
// in: a Hugging Face directory (tokenizer.json, tokenizer_config.json, chat_template.jinja,
// generation_config.json) or a llama.cpp GGUF file (its tokenizer.* keys, tokenizer/gguf_vocab.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "architecture/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {

// `model_path`: a model directory or a GGUF file (checkpoint/hub.h resolve_model_path).
// Error(kNotFound) when the directory has no tokenizer.json or the GGUF file no tokenizer keys;
// Error(kInvalidArgument) naming the file and key for a malformed one.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path);

// Error(kNotFound) when the model has no chat template; kInvalidArgument when it does not parse.
ChatTemplate load_chat_template(const std::string& model_path);

// `chat_template` in place of the model's (vLLM's --chat-template): a file holding a Jinja
// template, or the template itself (text with '{' or a newline), with the model's special tokens
// (tokenizer_config.json's, or a GGUF file's). Throws Error(kNotFound, param = "chat_template")
// for a name that is neither a file nor a template, Error(kInvalidArgument) naming the file and
// line for a template that does not parse.
ChatTemplate load_chat_template(const std::string& model_path, const std::string& chat_template);

// The ids that end a sequence, as vLLM and llama.cpp stop: a directory's generation_config.json
// eos_token_id (else config.json's); for a GGUF file, llama.cpp's end-of-generation set
// (tokenizer/gguf_vocab.h HfTokenizerFiles::eos_token_ids: the eos, eot and eom ids and the tokens
// llama.cpp recognises as ending generation). The tokenizer's eos token is added by the caller.
std::vector<int64_t> model_eos_token_ids(const std::string& model_path, const ModelConfig& config);

}  // namespace ditto
