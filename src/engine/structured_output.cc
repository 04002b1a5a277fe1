#include "engine/structured_output.h"

#include <llguidance.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

// llguidance's marker byte before a special token's name (toktrie's SPECIAL_TOKEN_MARKER): no text
// the grammar matches starts with 0xFF, so special tokens are allowed only where the grammar names
// them (EOS, through tok_eos).
constexpr char kSpecialTokenMarker = '\xff';

// llguidance's tokenize callback: the ids of `bytes` as the model's tokenizer encodes them, without
// special tokens added. Must not throw across the C boundary: text it cannot encode gives no ids
// (llguidance then falls back to the vocabulary's bytes).
size_t tokenize_bytes(const void* user_data, const uint8_t* bytes, size_t bytes_len, uint32_t* output_tokens,
                      size_t output_tokens_len) {
  try {
    const auto& tokenizer = *static_cast<const Tokenizer*>(user_data);
    const std::vector<int32_t> ids =
        tokenizer.encode(std::string_view(reinterpret_cast<const char*>(bytes), bytes_len), false);
    for (size_t i = 0; i < std::min(ids.size(), output_tokens_len); ++i)
      output_tokens[i] = static_cast<uint32_t>(ids[i]);
    return ids.size();
  } catch (...) {
    return 0;
  }
}

std::string field_of(const std::string& kind) { return "structured_outputs." + kind; }

[[noreturn]] void refuse(const std::string& kind, const std::string& why) {
  throw_invalid_field(field_of(kind), field_of(kind) + ": " + why);
}

// The depth of the deepest array or object in `j` (1 for a flat object), stopping past `limit`.
int json_depth(const nlohmann::ordered_json& j, int limit) {
  if (!j.is_structured()) return 0;
  if (limit <= 0) return 1;
  int deepest = 0;
  for (const auto& child : j) deepest = std::max(deepest, json_depth(child, limit - 1));
  return 1 + deepest;
}

// Refuses an object schema with more than kMaxOptionalProperties properties that are not
// "required": llguidance's grammar for an object lets each optional property be followed by any
// later one, so its compile time grows with their square (10,000 took 13 s on 2 cores) and past
// about 450 no mask fits its per-token limits. Counted before compiling, so the refusal is at
// once. `j` is within kMaxJsonDepth (checked before).
void check_optional_properties(const nlohmann::ordered_json& j, const std::string& kind) {
  if (!j.is_structured()) return;
  if (j.is_object() && j.contains("properties") && j["properties"].is_object()) {
    const auto& properties = j["properties"];
    std::set<std::string> required;
    if (j.contains("required") && j["required"].is_array())
      for (const auto& name : j["required"])
        if (name.is_string() && properties.contains(name.get<std::string>())) required.insert(name.get<std::string>());
    const size_t optional = properties.size() - required.size();
    if (optional > StructuredOutputGrammar::kMaxOptionalProperties)
      refuse(kind, "an object of the schema has " + std::to_string(optional) +
                       " optional properties (not in \"required\"); the grammar engine takes at most " +
                       std::to_string(StructuredOutputGrammar::kMaxOptionalProperties) +
                       " per object (its cost grows with their square)");
  }
  for (const auto& child : j) check_optional_properties(child, kind);
}

// vLLM's disable_additional_properties: every schema object that lists properties and says nothing
// of others takes none. `j` is within kMaxJsonDepth (checked before).
void close_objects(nlohmann::ordered_json& j) {
  if (!j.is_structured()) return;
  if (j.is_object() && j.contains("properties") && !j.contains("additionalProperties"))
    j["additionalProperties"] = false;
  for (auto& child : j) close_objects(child);
}

// The JSON Schema text llguidance compiles for a json or json_object constraint (keys kept in their
// order: llguidance emits an object's properties in the order the schema lists them), with vLLM's
// white-space and additionalProperties options as llguidance's "x-guidance" options.
std::string json_schema_text(const StructuredOutputsParams& p) {
  const std::string kind = p.kind();
  nlohmann::ordered_json schema;
  if (p.json_object) {
    schema = {{"type", "object"}};
  } else {
    try {
      schema = nlohmann::ordered_json::parse(*p.json);
    } catch (const nlohmann::json::exception& e) {
      refuse(kind, std::string("not valid JSON: ") + e.what());
    }
    if (json_depth(schema, StructuredOutputGrammar::kMaxJsonDepth + 1) > StructuredOutputGrammar::kMaxJsonDepth)
      refuse(kind,
             "the schema is nested deeper than " + std::to_string(StructuredOutputGrammar::kMaxJsonDepth) + " levels");
    if (!schema.is_object() && !schema.is_boolean())
      refuse(kind, std::string("a JSON Schema is an object or a boolean, got ") + schema.type_name());
    check_optional_properties(schema, kind);
    if (schema.is_object() && schema.contains("x-guidance"))
      refuse(kind, "the schema sets \"x-guidance\", which is the grammar engine's own key");
  }
  if (p.disable_additional_properties) close_objects(schema);
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  if (p.disable_any_whitespace) {
    options["whitespace_flexible"] = false;
    options["item_separator"] = ",";
    options["key_separator"] = ":";
  }
  if (p.whitespace_pattern) options["whitespace_pattern"] = *p.whitespace_pattern;
  if (!options.empty()) {
    if (schema.is_boolean())
      schema = schema.get<bool>() ? nlohmann::ordered_json::object() : nlohmann::ordered_json{{"not", {}}};
    schema["x-guidance"] = options;
  }
  return schema.dump();
}

}  // namespace

std::string escape_regex(const std::string& text) {
  static constexpr std::string_view kMeta = "\\.+*?()|[]{}^$#&-~";
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    if (kMeta.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer, int64_t vocab_size, std::vector<int32_t> eos_token_ids)
    : tokenizer_(tokenizer), vocab_size_(vocab_size), eos_token_ids_(std::move(eos_token_ids)) {
  if (vocab_size_ < tokenizer.vocab_size())
    throw_invalid_argument("structured outputs: the model's vocab_size " + std::to_string(vocab_size_) +
                           " is smaller than the tokenizer's " + std::to_string(tokenizer.vocab_size()));
  if (eos_token_ids_.empty())
    throw_invalid_argument("structured outputs need an end-of-sequence token, and this model names none");
  for (int32_t id : eos_token_ids_)
    if (id < 0 || id >= vocab_size_)
      throw_invalid_argument("structured outputs: EOS id " + std::to_string(id) + " is outside the vocabulary");
  std::vector<uint32_t> lens(static_cast<size_t>(vocab_size_));
  std::string bytes;
  for (int64_t id = 0; id < vocab_size_; ++id) {
    std::string b;
    if (id < tokenizer.vocab_size()) {
      const auto t = static_cast<int32_t>(id);
      if (tokenizer.is_special(t)) {
        b = kSpecialTokenMarker + tokenizer.id_to_token(t).value_or("");
      } else {
        b = tokenizer.token_bytes(t);
      }
    }
    lens[static_cast<size_t>(id)] = static_cast<uint32_t>(b.size());
    bytes += b;
  }
  std::vector<uint32_t> extra(eos_token_ids_.begin() + 1, eos_token_ids_.end());
  LlgTokenizerInitV2 init = {};
  init.struct_size = sizeof(init);
  init.vocab_size = static_cast<uint32_t>(vocab_size_);
  init.tok_eos = static_cast<uint32_t>(eos_token_ids_.front());
  init.token_lens = lens.data();
  init.token_bytes = reinterpret_cast<const uint8_t*>(bytes.data());
  init.tokenize_assumes_string = true;  // Tokenizer::encode takes UTF-8 text
  init.tokenize_fn = &tokenize_bytes;
  init.tokenize_user_data = &tokenizer_;
  init.tok_eos_extra = extra.empty() ? nullptr : extra.data();
  init.tok_eos_extra_count = static_cast<uint32_t>(extra.size());
  char message[1024] = {};
  handle_ = llg_new_tokenizer_v2(&init, message, sizeof(message));
  if (handle_ == nullptr)
    throw_invalid_argument(std::string("structured outputs: the grammar engine refused the vocabulary: ") + message);
}

GrammarVocabulary::~GrammarVocabulary() { llg_free_tokenizer(handle_); }

std::shared_ptr<const StructuredOutputGrammar> StructuredOutputGrammar::compile(
    const StructuredOutputsParams& params, std::shared_ptr<const GrammarVocabulary> vocab) {
  DITTO_CHECK(vocab != nullptr && params.num_kinds() == 1) << "structured outputs compiled unvalidated";
  const std::string kind = params.kind();
  std::string type;
  std::string data;
  if (params.json || params.json_object) {
    type = "json";
    data = json_schema_text(params);
  } else if (params.regex) {
    type = "regex";
    data = *params.regex;
  } else if (params.choice) {
    type = "regex";
    for (size_t i = 0; i < params.choice->size(); ++i) data += (i ? "|" : "") + escape_regex((*params.choice)[i]);
    data = "(" + data + ")";
  } else if (params.grammar) {
    if (params.grammar->find("::=") != std::string::npos)
      refuse(kind,
             "this is a GBNF grammar (it has \"::=\"); the grammar engine (llguidance) reads Lark syntax: write "
             "rules as `name: ...` (docs/STRUCTURED_OUTPUTS.md)");
    type = "lark";
    data = *params.grammar;
  } else {
    refuse(kind,
           "structural tags are not supported yet; use json (a JSON Schema) or grammar (Lark) "
           "(docs/STRUCTURED_OUTPUTS.md)");
  }
  if (data.find('\0') != std::string::npos) refuse(kind, "holds a NUL character");
  if (data.size() > kMaxConstraintBytes)
    refuse(kind, "is too big: " + std::to_string(data.size()) + " bytes, at most " +
                     std::to_string(kMaxConstraintBytes) + " (a constraint this large takes seconds to compile)");
  LlgConstraintInit init;
  llg_constraint_init_set_defaults(&init, vocab->handle());
  init.log_buffer_level = 0;
  init.log_stderr_level = 0;
  LlgMatcher* m = llg_new_matcher(&init, type.c_str(), data.c_str());
  if (m == nullptr) refuse(kind, "the grammar engine could not compile it");
  if (llg_matcher_is_error(m)) {
    const char* e = llg_matcher_get_error(m);
    std::string why = e != nullptr ? e : "the grammar engine could not compile it";
    llg_free_matcher(m);
    refuse(kind, why);
  }
  // The first mask, computed now: a constraint too large for the grammar engine's limits fails
  // here, refused with the reason, rather than ending every choice at its first token.
  std::vector<uint32_t> first(vocab->mask_words());
  if (llg_matcher_compute_mask_into(m, first.data(), first.size() * sizeof(uint32_t)) != 0 || llg_matcher_is_error(m)) {
    const char* e = llg_matcher_get_error(m);
    std::string why = e != nullptr ? e : "the grammar engine could not compute its first token mask";
    llg_free_matcher(m);
    refuse(kind, why);
  }
  std::shared_ptr<StructuredOutputGrammar> g(new StructuredOutputGrammar());
  g->vocab_ = std::move(vocab);
  g->kind_ = kind;
  g->prototype_ = m;
  return g;
}

StructuredOutputGrammar::~StructuredOutputGrammar() { llg_free_matcher(prototype_); }

std::unique_ptr<GrammarMatcher> StructuredOutputGrammar::new_matcher() const {
  LlgMatcher* m = llg_clone_matcher(prototype_);
  DITTO_CHECK(m != nullptr) << "llguidance could not clone a matcher";
  return std::make_unique<GrammarMatcher>(vocab_, m);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const GrammarVocabulary> vocab, LlgMatcher* handle)
    : vocab_(std::move(vocab)), handle_(handle) {}

GrammarMatcher::~GrammarMatcher() { llg_free_matcher(handle_); }

bool GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
  DITTO_CHECK(mask.size() == vocab_->mask_words()) << "a grammar mask of " << mask.size() << " words";
  if (!llg_matcher_is_error(handle_) &&
      llg_matcher_compute_mask_into(handle_, mask.data(), mask.size() * sizeof(uint32_t)) == 0)
    return true;
  std::fill(mask.begin(), mask.end(), 0u);
  return false;
}

bool GrammarMatcher::accept(int32_t token) {
  // A complete constraint allows only EOS (fill_mask), which llguidance's stopped matcher would
  // refuse to consume.
  const auto& eos = vocab_->eos_token_ids();
  if (llg_matcher_is_stopped(handle_) && !llg_matcher_is_error(handle_) &&
      std::find(eos.begin(), eos.end(), token) != eos.end())
    return true;
  return token >= 0 && token < vocab_->vocab_size() &&
         llg_matcher_consume_token(handle_, static_cast<uint32_t>(token)) == 0 && !llg_matcher_is_error(handle_);
}

bool GrammarMatcher::rollback(int64_t n) {
  return n == 0 || llg_matcher_rollback(handle_, static_cast<size_t>(n)) == 0;
}

int64_t GrammarMatcher::valid_prefix(std::span<const int32_t> tokens) {
  if (tokens.empty() || llg_matcher_is_error(handle_)) return 0;
  std::vector<uint32_t> ids(tokens.begin(), tokens.end());
  const int32_t n = llg_matcher_validate_tokens(handle_, ids.data(), ids.size());
  return n < 0 ? 0 : n;
}

bool GrammarMatcher::is_stopped() const { return llg_matcher_is_stopped(handle_); }

bool GrammarMatcher::failed() const { return llg_matcher_is_error(handle_); }

std::string GrammarMatcher::error() const {
  const char* e = llg_matcher_get_error(handle_);
  return e != nullptr ? e : "";
}

}  // namespace ditto
