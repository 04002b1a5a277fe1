#include "engine/model_files.h"

#include <algorithm>

#include "core/error.h"
#include "model/generation_config.h"
#include "model/gguf_model.h"
#include "model/gguf_reader.h"
#include "model/gguf_vocab.h"

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
  const std::unique_ptr<GgufFile> g = GgufFile::open(model_path);
  std::vector<int64_t> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const std::optional<int64_t> id = g->get_int(key);
        id && *id < config.vocab_size && std::find(ids.begin(), ids.end(), *id) == ids.end())
      ids.push_back(*id);
  return ids;
}

}  // namespace ditto
