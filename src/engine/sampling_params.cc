#include "ditto/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"

namespace ditto {
namespace {

template <typename T>
[[noreturn]] void bad(const char* field, const std::string& rule, T value) {
  std::ostringstream os;
  os << field << " must be " << rule << ", got " << value;
  throw_invalid_field(field, os.str());
}

}  // namespace

uint64_t derived_seed(uint64_t seed, uint64_t k) {
  uint64_t x = seed + k + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (x ^ (x >> 31)) >> 11;  // 53 bits: any JSON client reads the seed back exactly
}

void SamplingParams::validate(int64_t vocab_size, int64_t max_logprobs) const {
  const int64_t top_n = std::min(vocab_size, max_logprobs);
  // vocab_size and max_logprobs are INT64_MAX when unknown (a check before the model is known).
  const std::string top_n_rule = top_n == INT64_MAX   ? "at least 0"
                                 : top_n < vocab_size ? "in [0, " + std::to_string(top_n) + "] (max_logprobs)"
                                                      : "in [0, vocab size " + std::to_string(vocab_size) + "]";
  if (n < 1 || n > kMaxN) bad("n", "in [1, " + std::to_string(kMaxN) + "]", n);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) bad("presence_penalty", "in [-2, 2]", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    bad("frequency_penalty", "in [-2, 2]", frequency_penalty);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    bad("repetition_penalty", "a finite number > 0", repetition_penalty);
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) bad("temperature", "a finite number >= 0", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p", "in (0, 1]", top_p);
  if (top_k < -1) bad("top_k", "-1, 0 (off) or a positive count", top_k);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) bad("min_p", "in [0, 1]", min_p);
  if (max_tokens < 1) bad("max_tokens", "at least 1", max_tokens);
  if (min_tokens < 0) bad("min_tokens", "at least 0", min_tokens);
  if (min_tokens > max_tokens)
    throw_invalid_field("min_tokens", "min_tokens (" + std::to_string(min_tokens) + ") must not exceed max_tokens (" +
                                          std::to_string(max_tokens) + ")");
  if (logprobs && (*logprobs < 0 || *logprobs > top_n)) bad("logprobs", top_n_rule, *logprobs);
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > top_n))
    bad("prompt_logprobs", top_n_rule, *prompt_logprobs);
  if (stop.size() > kMaxStop)
    throw_invalid_field("stop", "at most " + std::to_string(kMaxStop) + " stop strings are allowed, got " +
                                    std::to_string(stop.size()));
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) throw_invalid_field("stop", "stop[" + std::to_string(i) + "] is an empty string");
  const auto check_token = [&](const char* field, const std::string& where, int64_t id) {
    if (id < 0 || id >= vocab_size)
      throw_invalid_field(
          field, where + " = " + std::to_string(id) +
                     (vocab_size == INT64_MAX ? " must be at least 0"
                                              : " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")"));
  };
  for (size_t i = 0; i < stop_token_ids.size(); ++i)
    check_token("stop_token_ids", "stop_token_ids[" + std::to_string(i) + "]", stop_token_ids[i]);
  for (const auto& [id, bias] : logit_bias) {
    check_token("logit_bias", "logit_bias token id", id);
    if (!std::isfinite(bias))
      throw_invalid_field("logit_bias", "logit_bias[" + std::to_string(id) + "] must be a finite number");
  }
  if (allowed_token_ids) {
    if (allowed_token_ids->empty()) throw_invalid_field("allowed_token_ids", "allowed_token_ids must not be empty");
    for (size_t i = 0; i < allowed_token_ids->size(); ++i)
      check_token("allowed_token_ids", "allowed_token_ids[" + std::to_string(i) + "]", (*allowed_token_ids)[i]);
  }
  if (logprob_token_ids) {
    if (logprob_token_ids->empty())
      throw_invalid_field("logprob_token_ids", "logprob_token_ids must not be an empty list");
    if (static_cast<int64_t>(logprob_token_ids->size()) > top_n)
      throw_invalid_field("logprob_token_ids", "logprob_token_ids lists " + std::to_string(logprob_token_ids->size()) +
                                                   " ids; at most " + std::to_string(top_n) +
                                                   " (max_logprobs) are allowed");
    for (size_t i = 0; i < logprob_token_ids->size(); ++i)
      check_token("logprob_token_ids", "logprob_token_ids[" + std::to_string(i) + "]", (*logprob_token_ids)[i]);
  }
  for (size_t w = 0; w < bad_words_token_ids.size(); ++w) {
    if (bad_words_token_ids[w].empty())
      throw_invalid_field("bad_words", "bad word " + std::to_string(w) + " has no tokens");
    for (size_t i = 0; i < bad_words_token_ids[w].size(); ++i)
      check_token("bad_words", "bad word " + std::to_string(w) + " token " + std::to_string(i),
                  bad_words_token_ids[w][i]);
  }
  for (size_t i = 0; i < bad_words.size(); ++i)
    if (bad_words[i].empty())
      throw_invalid_field("bad_words", "bad_words[" + std::to_string(i) + "] is an empty string");
  if (truncation_side != "left" && truncation_side != "right")
    throw_invalid_field("truncation_side",
                        "truncation_side must be \"left\" or \"right\", got \"" + truncation_side + "\"");
  if (cache_salt && cache_salt->empty())
    throw_invalid_field("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.");
  if (truncate_prompt_tokens && *truncate_prompt_tokens < 1 && *truncate_prompt_tokens != -1)
    bad("truncate_prompt_tokens", "-1 (the context) or at least 1", *truncate_prompt_tokens);
  if (structured_outputs) {
    const StructuredOutputsParams& so = *structured_outputs;
    if (so.num_kinds() != 1)
      throw_invalid_field("structured_outputs",
                          "structured_outputs must set exactly one of json, regex, choice, grammar, json_object and "
                          "structural_tag, got " +
                              std::to_string(so.num_kinds()));
    if (so.choice && so.choice->empty())
      throw_invalid_field("structured_outputs.choice", "structured_outputs.choice must hold at least one string");
    const bool json = so.json || so.json_object;
    if (!json && (so.disable_any_whitespace || so.disable_additional_properties || so.whitespace_pattern))
      throw_invalid_field("structured_outputs",
                          "disable_any_whitespace, disable_additional_properties and whitespace_pattern apply to "
                          "json and json_object only, not to " +
                              so.kind());
  }
}

int StructuredOutputsParams::num_kinds() const {
  return static_cast<int>(json.has_value()) + static_cast<int>(regex.has_value()) +
         static_cast<int>(choice.has_value()) + static_cast<int>(grammar.has_value()) + static_cast<int>(json_object) +
         static_cast<int>(structural_tag.has_value());
}

std::string StructuredOutputsParams::kind() const {
  return json             ? "json"
         : regex          ? "regex"
         : choice         ? "choice"
         : grammar        ? "grammar"
         : json_object    ? "json_object"
         : structural_tag ? "structural_tag"
                          : "";
}

}  // namespace ditto
