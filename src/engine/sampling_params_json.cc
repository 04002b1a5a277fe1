#include "engine/sampling_params_json.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_input.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// One vLLM field ditto refuses, and when its value asks for nothing (the field's no-op).
struct UnimplementedField {
  const char* name;
  bool (*inert)(const Json& value);
  const char* what;  // what it asks for, in the refusal
};

bool is_null(const Json& v) { return v.is_null(); }
bool is_false(const Json& v) { return v.is_null() || v == false; }
bool is_true(const Json& v) { return v.is_null() || v == true; }
bool is_one(const Json& v) { return v.is_null() || (v.is_number() && v.get<double>() == 1.0); }
bool is_empty(const Json& v) { return v.is_null() || ((v.is_array() || v.is_object()) && v.empty()); }
bool is_null_or_minus_one(const Json& v) { return v.is_null() || (v.is_number_integer() && v.get<int64_t>() == -1); }
bool is_zero(const Json& v) { return v.is_null() || (v.is_number() && v.get<double>() == 0.0); }

const std::vector<UnimplementedField>& unimplemented_fields() {
  static const std::vector<UnimplementedField> fields = {
      {"use_beam_search", is_false, "beam search"},
      {"length_penalty", is_one, "beam search's length penalty"},
      {"logits_processors", is_empty, "custom logits processors"},
      {"vllm_xargs", is_empty, "custom logits processors' arguments"},
      {"thinking_token_budget", is_null_or_minus_one, "a thinking budget"},
      {"prompt_embeds", is_null, "prompt embeddings"},
      {"mm_processor_kwargs", is_empty, "multimodal inputs"},
      {"spaces_between_special_tokens", is_true, "no spaces between special tokens"},
      {"multi_modal_data", is_empty, "multimodal inputs"},
      {"media_io_kwargs", is_empty, "multimodal inputs"},
      {"max_repetition_pattern_size", is_zero, "stopping on repeated token patterns"},
      {"min_repetition_pattern_size", is_zero, "stopping on repeated token patterns"},
      {"repetition_min_count", is_zero, "stopping on repeated token patterns"},
      {"packed_top_logprobs", is_false, "top logprobs packed in base64"},
      {"return_top_k_logprobs", is_false, "top logprobs packed in base64"},
      {"stream_interval", is_one, "a chunk every stream_interval tokens"},
      {"repetition_detection", is_empty, "stopping on repeated token patterns"},
      {"watermarking", is_empty, "watermarked sampling"},
      {"kv_transfer_params", is_empty, "disaggregated serving's KV transfer"},
      {"ec_transfer_params", is_empty, "disaggregated serving's encoder-cache transfer"},
  };
  return fields;
}

int64_t count(const Json& body, const char* key) {
  return read_field(key, [&] { return json_int(body[key], key); });
}

// OpenAI's logit_bias: {"token id": bias, ...}, each bias clamped to [-100, 100] (vLLM's rule). Keys
// that are not token ids are all named in one error (as vLLM reports them).
std::map<int32_t, float> read_logit_bias(const Json& v) {
  if (!v.is_object()) throw_invalid_field("logit_bias", "field 'logit_bias' must be an object of token id → bias");
  std::map<int32_t, float> out;
  std::string bad_keys;
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    const Json& bias = item.value();
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
      bad_keys += (bad_keys.empty() ? "'" : ", '") + key + "'";
      continue;
    }
    const float b = read_field("logit_bias", [&] { return json_float(bias, "logit_bias[" + key + "]"); });
    out[id] = std::clamp(b, -100.0f, 100.0f);
  }
  if (!bad_keys.empty())
    throw_invalid_field("logit_bias",
                        "logit_bias keys must be token ids (non-negative integers); not token ids: " + bad_keys);
  return out;
}

// A JSON Schema given as an object (or a boolean schema) or as its JSON text, as text.
std::string schema_text(const Json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() || v.is_boolean()) return v.dump();
  throw_invalid_field(
      field, "field '" + field + "' must be a JSON Schema (an object, or its JSON text), got " + json_excerpt(v));
}

std::string string_field(const Json& v, const std::string& field) {
  return read_field(field, [&] { return json_string(v, field); });
}

// The grammar engine a request may name (vLLM's backend / guided_decoding_backend): ditto has one.
void check_backend(const Json& v, const std::string& field) {
  const std::string b = string_field(v, field);
  if (b != "auto" && b != "guidance" && b != "llguidance")
    throw_invalid_field(field, "field '" + field + "' is \"" + b +
                                   "\"; ditto's structured outputs use llguidance (\"guidance\" or \"auto\")");
}

// vLLM's structured_outputs object (StructuredOutputsParams' fields).
StructuredOutputsParams read_structured_outputs_object(const Json& v) {
  const std::string f = "structured_outputs";
  if (!v.is_object()) throw_invalid_field(f, "field 'structured_outputs' must be an object, got " + json_excerpt(v));
  StructuredOutputsParams so;
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    const Json& x = item.value();
    const std::string name = f + "." + key;
    if (x.is_null()) continue;
    if (key == "json") {
      so.json = schema_text(x, name);
    } else if (key == "regex") {
      so.regex = string_field(x, name);
    } else if (key == "choice") {
      so.choice = read_field(name, [&] { return json_strings(x, name); });
    } else if (key == "grammar") {
      so.grammar = string_field(x, name);
    } else if (key == "json_object") {
      so.json_object = read_field(name, [&] { return json_bool(x, name); });
    } else if (key == "structural_tag") {
      so.structural_tag = x.is_string() ? x.get<std::string>() : x.dump();
    } else if (key == "disable_any_whitespace") {
      so.disable_any_whitespace = read_field(name, [&] { return json_bool(x, name); });
    } else if (key == "disable_additional_properties") {
      so.disable_additional_properties = read_field(name, [&] { return json_bool(x, name); });
    } else if (key == "whitespace_pattern") {
      so.whitespace_pattern = string_field(x, name);
    } else if (key == "disable_fallback") {
      read_field(name, [&] { return json_bool(x, name); });  // one engine, no fallback: either value holds
    } else if (key == "backend" || key == "_backend") {
      check_backend(x, name);
    } else {
      throw_invalid_field(name, "unknown field '" + name +
                                    "' (structured_outputs takes json, regex, choice, grammar, json_object, "
                                    "structural_tag, disable_any_whitespace, disable_additional_properties, "
                                    "whitespace_pattern, disable_fallback)");
    }
  }
  return so;
}

// structured_outputs, or vLLM's older guided_* fields (and structural_tag), into params; at most
// one way per request.
void read_structured_outputs(const Json& body, SamplingParams& p) {
  if (present(body, "structured_outputs"))
    p.structured_outputs = read_structured_outputs_object(body["structured_outputs"]);
  StructuredOutputsParams guided;
  std::string first;
  auto note = [&](const char* key) {
    if (first.empty()) first = key;
  };
  if (present(body, "guided_json")) {
    guided.json = schema_text(body["guided_json"], "guided_json");
    note("guided_json");
  }
  if (present(body, "guided_regex")) {
    guided.regex = string_field(body["guided_regex"], "guided_regex");
    note("guided_regex");
  }
  if (present(body, "guided_choice")) {
    guided.choice = read_field("guided_choice", [&] { return json_strings(body["guided_choice"], "guided_choice"); });
    note("guided_choice");
  }
  if (present(body, "guided_grammar")) {
    guided.grammar = string_field(body["guided_grammar"], "guided_grammar");
    note("guided_grammar");
  }
  if (present(body, "structural_tag")) {
    const Json& t = body["structural_tag"];
    guided.structural_tag = t.is_string() ? t.get<std::string>() : t.dump();
    note("structural_tag");
  }
  if (present(body, "guided_whitespace_pattern"))
    guided.whitespace_pattern = string_field(body["guided_whitespace_pattern"], "guided_whitespace_pattern");
  if (present(body, "guided_decoding_backend"))
    check_backend(body["guided_decoding_backend"], "guided_decoding_backend");
  if (first.empty()) {
    if (guided.whitespace_pattern && !p.structured_outputs)
      throw_invalid_field("guided_whitespace_pattern", "guided_whitespace_pattern needs guided_json");
    if (guided.whitespace_pattern) p.structured_outputs->whitespace_pattern = guided.whitespace_pattern;
    return;
  }
  if (p.structured_outputs) throw_invalid_field(first, "give structured_outputs or " + first + ", not both");
  if (guided.num_kinds() > 1)
    throw_invalid_field(first,
                        "give one of guided_json, guided_regex, guided_choice, guided_grammar and "
                        "structural_tag, got " +
                            std::to_string(guided.num_kinds()));
  p.structured_outputs = std::move(guided);
}

}  // namespace

void refuse_unimplemented_fields(const Json& body, const std::set<std::string>& honoured) {
  for (const UnimplementedField& f : unimplemented_fields())
    if (body.contains(f.name) && !f.inert(body[f.name]) && !honoured.contains(f.name))
      throw_invalid_field(f.name, std::string("field '") + f.name + "' (" + f.what +
                                      ") is not supported by ditto yet; the request is refused rather than "
                                      "answered without it (README: the server section lists what is supported)");
}

const std::set<std::string>& unimplemented_field_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k;
    for (const UnimplementedField& f : unimplemented_fields()) k.insert(f.name);
    return k;
  }();
  return keys;
}

const std::set<std::string>& sampling_params_keys() {
  static const std::set<std::string> keys = {"n",
                                             "temperature",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "repetition_penalty",
                                             "seed",
                                             "stop",
                                             "stop_token_ids",
                                             "ignore_eos",
                                             "include_stop_str_in_output",
                                             "skip_special_tokens",
                                             "max_tokens",
                                             "min_tokens",
                                             "prompt_logprobs",
                                             "logit_bias",
                                             "allowed_token_ids",
                                             "bad_words",
                                             "truncate_prompt_tokens",
                                             "truncation_side",
                                             "cache_salt",
                                             "structured_outputs",
                                             "guided_json",
                                             "guided_regex",
                                             "guided_choice",
                                             "guided_grammar",
                                             "structural_tag",
                                             "guided_decoding_backend",
                                             "guided_whitespace_pattern",
                                             "logprob_token_ids"};
  return keys;
}

bool read_sampling_params(const Json& body, SamplingParams& p) {
  if (present(body, "n")) p.n = count(body, "n");
  for (const auto& [key, target] :
       {std::pair{"temperature", &p.temperature}, std::pair{"top_p", &p.top_p}, std::pair{"min_p", &p.min_p},
        std::pair{"presence_penalty", &p.presence_penalty}, std::pair{"frequency_penalty", &p.frequency_penalty},
        std::pair{"repetition_penalty", &p.repetition_penalty}})
    if (present(body, key)) *target = read_field(key, [&, key = key] { return json_float(body[key], key); });
  if (present(body, "top_k")) p.top_k = count(body, "top_k");
  if (present(body, "seed"))
    if (const auto seed = read_field("seed", [&] { return json_seed(body["seed"], "seed"); })) p.seed = *seed;
  if (present(body, "stop")) p.stop = read_field("stop", [&] { return json_strings(body["stop"], "stop"); });
  if (present(body, "stop_token_ids"))
    p.stop_token_ids =
        read_field("stop_token_ids", [&] { return json_token_ids(body["stop_token_ids"], "stop_token_ids"); });
  for (const auto& [key, target] :
       {std::pair{"ignore_eos", &p.ignore_eos}, std::pair{"include_stop_str_in_output", &p.include_stop_str_in_output},
        std::pair{"skip_special_tokens", &p.skip_special_tokens}})
    if (present(body, key)) *target = read_field(key, [&, key = key] { return json_bool(body[key], key); });
  if (present(body, "min_tokens")) p.min_tokens = count(body, "min_tokens");
  if (present(body, "prompt_logprobs")) p.prompt_logprobs = count(body, "prompt_logprobs");
  if (present(body, "logit_bias")) p.logit_bias = read_logit_bias(body["logit_bias"]);
  if (present(body, "allowed_token_ids"))
    p.allowed_token_ids =
        read_field("allowed_token_ids", [&] { return json_token_ids(body["allowed_token_ids"], "allowed_token_ids"); });
  if (present(body, "bad_words")) {
    if (!body["bad_words"].is_array()) throw_invalid_field("bad_words", "field 'bad_words' must be a list of strings");
    p.bad_words = read_field("bad_words", [&] { return json_strings(body["bad_words"], "bad_words"); });
  }
  if (present(body, "truncate_prompt_tokens")) p.truncate_prompt_tokens = count(body, "truncate_prompt_tokens");
  if (present(body, "truncation_side"))
    p.truncation_side =
        read_field("truncation_side", [&] { return json_string(body["truncation_side"], "truncation_side"); });
  if (body.contains("cache_salt") && !body["cache_salt"].is_null()) {
    if (!body["cache_salt"].is_string())
      throw_invalid_field("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.");
    p.cache_salt = body["cache_salt"].get<std::string>();
  }
  if (present(body, "logprob_token_ids"))
    p.logprob_token_ids =
        read_field("logprob_token_ids", [&] { return json_token_ids(body["logprob_token_ids"], "logprob_token_ids"); });
  read_structured_outputs(body, p);
  const bool max_tokens_given = present(body, "max_tokens");
  if (max_tokens_given) p.max_tokens = count(body, "max_tokens");
  return max_tokens_given;
}

}  // namespace ditto
