// Comparing request outputs bit for bit, the way the invariance contract reads them: token ids,
// texts, float32 logprobs (as bit patterns) with their ranks and texts, top logprobs, cumulative
// logprobs (float64 bit patterns), prompt logprobs, finish and stop reasons, routed experts, the
// prompt and its token ids. The engine tests and `ditto check-invariance` use this one comparison.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "ditto/request_output.h"

namespace ditto {

// One logprob entry, bit for bit (its text and bytes included).
inline bool same_entry(const TokenLogprob& a, const TokenLogprob& b) {
  return a.token_id == b.token_id && a.rank == b.rank &&
         std::bit_cast<uint32_t>(a.logprob) == std::bit_cast<uint32_t>(b.logprob) &&
         a.decoded_token == b.decoded_token && a.bytes == b.bytes;
}

// One sampled or scored token and its top logprobs, bit for bit.
inline bool same_entry(const SampledToken& a, const SampledToken& b) {
  if (!same_entry(a.token, b.token) || a.top_logprobs.size() != b.top_logprobs.size()) return false;
  for (size_t i = 0; i < a.top_logprobs.size(); ++i)
    if (!same_entry(a.top_logprobs[i], b.top_logprobs[i])) return false;
  return true;
}

// Every field the invariance contract covers, bit for bit (request_id and seed aside: they echo
// the request — a seed drawn for a greedy request differs run to run and changes nothing;
// num_cached_tokens aside: it counts the work the prefix cache saved, which depends on load). Returns "" or the first
// field that differs ("prompt_logprobs[17]", "choice 1 token_ids", ...).
inline std::string diff(const RequestOutput& a, const RequestOutput& b) {
  if (a.prompt != b.prompt) return "prompt";
  if (a.prompt_token_ids != b.prompt_token_ids) return "prompt_token_ids";
  if (a.pooled.size() != b.pooled.size() ||
      (!a.pooled.empty() && std::memcmp(a.pooled.data(), b.pooled.data(), a.pooled.size() * sizeof(float)) != 0))
    return "pooled";
  if (a.outputs.size() != b.outputs.size()) return "number of choices";
  if (a.prompt_logprobs.size() != b.prompt_logprobs.size()) return "prompt_logprobs size";
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i)
    if (a.prompt_logprobs[i].has_value() != b.prompt_logprobs[i].has_value() ||
        (a.prompt_logprobs[i] && !same_entry(*a.prompt_logprobs[i], *b.prompt_logprobs[i])))
      return "prompt_logprobs[" + std::to_string(i) + "]";
  for (size_t c = 0; c < a.outputs.size(); ++c) {
    const CompletionOutput& x = a.outputs[c];
    const CompletionOutput& y = b.outputs[c];
    const std::string choice = "choice " + std::to_string(c);
    if (x.token_ids != y.token_ids) return choice + " token_ids";
    if (x.text != y.text) return choice + " text";
    if (x.finish_reason != y.finish_reason) return choice + " finish_reason";
    if (x.stop_token_id != y.stop_token_id || x.stop_string != y.stop_string) return choice + " stop_reason";
    if (std::bit_cast<uint64_t>(x.cumulative_logprob) != std::bit_cast<uint64_t>(y.cumulative_logprob))
      return choice + " cumulative_logprob";
    if (x.logprobs.size() != y.logprobs.size()) return choice + " logprobs size";
    for (size_t t = 0; t < x.logprobs.size(); ++t)
      if (!same_entry(x.logprobs[t], y.logprobs[t])) return choice + " logprobs[" + std::to_string(t) + "]";
    if (x.routed_experts != y.routed_experts) return choice + " routed_experts";
  }
  return "";
}

// Where two outputs diff() calls different first part: the first output token position at which a
// choice's token id or logprob entry differs (a shorter choice differs where it ends); 0 when the
// prompt side differs (prompt, its ids or logprobs, a pooled vector, the number of choices); the
// longest choice's length when only what follows the tokens differs (text, finish or stop reason,
// cumulative logprob). Meaningful only where diff(a, b) is not "".
inline int64_t first_divergence(const RequestOutput& a, const RequestOutput& b) {
  const std::string field = diff(a, b);
  if (field.rfind("choice ", 0) != 0) return 0;
  int64_t first = -1;
  int64_t longest = 0;
  for (size_t c = 0; c < a.outputs.size(); ++c) {
    const CompletionOutput& x = a.outputs[c];
    const CompletionOutput& y = b.outputs[c];
    const size_t n = std::max(x.token_ids.size(), y.token_ids.size());
    longest = std::max(longest, static_cast<int64_t>(n));
    for (size_t t = 0; t < n; ++t) {
      const bool same = t < x.token_ids.size() && t < y.token_ids.size() && x.token_ids[t] == y.token_ids[t] &&
                        (t >= x.logprobs.size() || t >= y.logprobs.size() || same_entry(x.logprobs[t], y.logprobs[t]));
      if (!same) {
        if (first < 0 || static_cast<int64_t>(t) < first) first = static_cast<int64_t>(t);
        break;
      }
    }
  }
  return first >= 0 ? first : longest;
}

}  // namespace ditto
