#include "engine/model_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/generation_config.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/gguf_vocab.h"

namespace ditto {
namespace {

HfTokenizerFiles gguf_tokenizer_files(const std::string& gguf_path) {
  // The tokenizer needs the metadata alone, so it loads from files whose tensors ditto cannot read.
  const std::unique_ptr<GgufFile> g = GgufFile::open(gguf_path, /*metadata_only=*/true);
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

ChatTemplate load_chat_template(const std::string& model_path, const std::string& chat_template) {
  std::string text = chat_template;
  std::string source = "chat_template (--chat-template)";
  if (chat_template.find_first_of("{\n") == std::string::npos) {
    std::ifstream file(chat_template, std::ios::binary);
    if (!file || std::filesystem::is_directory(chat_template))
      throw Error(ErrorCode::kNotFound,
                  "chat_template: '" + chat_template +
                      "' is no file (and, without '{' or a newline, not a template either); give a Jinja "
                      "template file or the template text",
                  "chat_template");
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    source = chat_template + " (--chat-template)";
  }
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (is_gguf_file(model_path)) {
    try {
      config = gguf_tokenizer_files(model_path).tokenizer_config;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound) throw;
    }
  } else if (const std::string path = model_path + "/tokenizer_config.json"; std::filesystem::exists(path)) {
    config = read_json_file<nlohmann::ordered_json>(path);
  }
  config["chat_template"] = text;
  return ChatTemplate::from_config(config, source);
}

std::vector<int64_t> model_eos_token_ids(const std::string& model_path, const ModelConfig& config) {
  if (!is_gguf_file(model_path)) return eos_token_ids(model_path, config);
  if (GgufFile::open(model_path, /*metadata_only=*/true)->find("tokenizer.ggml.tokens") == nullptr)
    return config.eos_token_ids;
  std::vector<int64_t> ids;
  for (int32_t id : gguf_tokenizer_files(model_path).eos_token_ids)
    if (id < config.vocab_size) ids.push_back(id);
  return ids;
}

}  // namespace ditto
