// Loading a Tokenizer: reading tokenizer.json / tokenizer_config.json and validating every
// component, so that encode() and decode() never meet a malformed file.
#include <filesystem>

#include "core/error.h"
#include "core/json_file.h"
#include "core/json_input.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

constexpr uint8_t kExists = 1;
constexpr uint8_t kSpecial = 2;

const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null_value;
  return j.contains(key) ? j[key] : null_value;
}

// A token named by tokenizer_config.json: a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> config_token(const nlohmann::json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw_invalid_argument(where + ": expected a token string, {\"content\": ...} or null");
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::filesystem::path json_path = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(json_path)) {
    throw_not_found(json_path.string() + ": not found (the model directory must hold a Hugging Face tokenizer.json)");
  }
  nlohmann::json config = nlohmann::json::object();
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (std::filesystem::is_regular_file(config_path)) config = read_json_file(config_path.string());
  return from_json(read_text_file(json_path.string()), json_path.string(), config);
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string& tokenizer_json_text, const std::string& source,
                                                const nlohmann::json& tokenizer_config) {
  const nlohmann::json j = parse_json_input<nlohmann::json>(tokenizer_json_text, source);
  if (!j.is_object()) throw_invalid_argument(source + ": expected a JSON object");
  if (!j.contains("model")) throw_invalid_argument(source + ": no \"model\"");

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->source_ = source;
  t->config_ = tokenizer_config.is_null() ? nlohmann::json::object() : tokenizer_config;
  if (!t->config_.is_object()) throw_invalid_argument("tokenizer_config.json: expected a JSON object");

  // Components, in pipeline order; each names its own place in the file in its errors.
  const std::string at = source + ": ";
  t->normalizer_ = std::make_unique<Normalizer>(Normalizer::from_json(member(j, "normalizer"), at + "normalizer"));
  t->pre_tokenizer_ =
      std::make_unique<PreTokenizer>(PreTokenizer::from_json(member(j, "pre_tokenizer"), at + "pre_tokenizer"));
  const nlohmann::json& model = j["model"];
  if (model.is_object() && model.contains("type") && model["type"] == "ditto_spm") {
    t->model_ = Spm::from_json(model, at + "model");
  } else {
    t->model_ = Bpe::from_json(model, at + "model", t->pre_tokenizer_->byte_level());
  }
  t->added_ = std::make_unique<AddedVocabulary>(
      AddedVocabulary::from_json(member(j, "added_tokens"), at + "added_tokens", *t->model_, *t->normalizer_));
  t->post_processor_ =
      std::make_unique<PostProcessor>(PostProcessor::from_json(member(j, "post_processor"), at + "post_processor"));
  t->decoder_ = std::make_unique<Decoder>(Decoder::from_json(member(j, "decoder"), at + "decoder"));

  // What each id decodes to, computed once so decode() is a concatenation.
  const int32_t limit = std::max(t->model_->id_limit(), t->added_->id_limit());
  t->token_bytes_.resize(static_cast<size_t>(limit));
  t->token_flags_.assign(static_cast<size_t>(limit), 0);
  for (int32_t id = 0; id < limit; ++id) {
    const std::string* token = nullptr;
    uint8_t flags = kExists;
    if (const AddedToken* added = t->added_->find(id)) {
      token = &added->content;
      if (added->special) flags |= kSpecial;
    } else {
      token = t->model_->id_to_token(id);
    }
    if (token == nullptr) continue;
    t->token_bytes_[id] = t->decoder_->token_bytes(*token);
    t->token_flags_[id] = flags;
  }

  // tokenizer_config.json.
  const nlohmann::json& config = t->config_;
  if (config.contains("clean_up_tokenization_spaces") && !config["clean_up_tokenization_spaces"].is_null()) {
    if (!config["clean_up_tokenization_spaces"].is_boolean()) {
      throw_invalid_argument("tokenizer_config.json: clean_up_tokenization_spaces: expected true or false");
    }
    t->clean_up_tokenization_spaces_ = config["clean_up_tokenization_spaces"].get<bool>();
  }
  if (config.contains("eos_token")) {
    const auto& eos = config["eos_token"];
    const nlohmann::json list = eos.is_array() ? eos : nlohmann::json::array({eos});
    for (size_t i = 0; i < list.size(); ++i) {
      const auto token = config_token(list[i], "tokenizer_config.json: eos_token");
      if (!token) continue;
      if (const auto id = t->token_to_id(*token)) t->eos_token_ids_.push_back(*id);
    }
  }
  if (config.contains("bos_token")) {
    if (const auto token = config_token(config["bos_token"], "tokenizer_config.json: bos_token")) {
      t->bos_token_id_ = t->token_to_id(*token);
    }
  }
  return t;
}

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = added_->token_to_id(token)) return id;
  return model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* added = added_->find(id)) return added->content;
  if (const std::string* token = model_->id_to_token(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < token_flags_.size() && (token_flags_[id] & kSpecial) != 0;
}

const std::string* Tokenizer::decoded_bytes(int32_t id, bool skip_special_tokens) const {
  if (id < 0 || static_cast<size_t>(id) >= token_flags_.size()) return nullptr;
  const uint8_t flags = token_flags_[id];
  if ((flags & kExists) == 0 || (skip_special_tokens && (flags & kSpecial) != 0)) return nullptr;
  return &token_bytes_[id];
}

}  // namespace ditto
