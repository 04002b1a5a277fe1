#include "engine/model_files.h"

#include <algorithm>

#include "checkpoint/generation_config.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "core/error.h"
#include "tokenizer/gguf_vocab.h"

namespace ditto {
namespace {

HfTokenizerFiles gguf_tokenizer_files(const std::string& gguf_path) {
  const std::unique_ptr<GgufFile> g = GgufFile::open(gguf_path);
  if (g->find("tokenizer.ggml.tokens") == nullptr)
    throw_not_found(gguf_path + ": no tokenizer (metadata 'tokenizer.ggml.tokens' is missing)");
  return hf_tokenizer_from_gguf(gguf_vocab(*g), gguf_path);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path) {
  if (!is_gguf_file(model_path)) return Tokenizer::load(model_path);
  const HfTokenizerFiles files = gguf_tokenizer_files(model_path);
  return Tokenizer::from_json(files.tokenizer_json, model_path, files.tokenizer_config);
}

ChatTemplate load_chat_template(const std::string& model_path) {
  if (!is_gguf_file(model_path)) return ChatTemplate::load(model_path);
  const HfTokenizerFiles files = gguf_tokenizer_files(model_path);
  if (!files.tokenizer_config.contains("chat_template"))
    throw_not_found(model_path + ": no chat template (metadata 'tokenizer.chat_template' is missing)");
  return ChatTemplate::from_config(files.tokenizer_config, model_path + " (tokenizer.chat_template)");
}

std::vector<int64_t> model_eos_token_ids(const std::string& model_path, const ModelConfig& config) {
  if (!is_gguf_file(model_path)) return eos_token_ids(model_path, config);
  if (GgufFile::open(model_path)->find("tokenizer.ggml.tokens") == nullptr) return config.eos_token_ids;
  std::vector<int64_t> ids;
  for (int32_t id : gguf_tokenizer_files(model_path).eos_token_ids)
    if (id < config.vocab_size) ids.push_back(id);
  return ids;
}

}  // namespace ditto
