// Comparing request outputs bit for bit, for the engine tests: token ids, float32 logprobs (as
// bit patterns), top logprobs, ranks, cumulative logprobs and prompt logprobs.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include "ditto/request_output.h"

namespace ditto {

// One sampled or scored token and its top logprobs, bit for bit.
inline bool same_entry(const SampledToken& a, const SampledToken& b) {
  if (a.token.token_id != b.token.token_id || a.token.rank != b.token.rank ||
      std::bit_cast<uint32_t>(a.token.logprob) != std::bit_cast<uint32_t>(b.token.logprob) ||
      a.top_logprobs.size() != b.top_logprobs.size())
    return false;
  for (size_t i = 0; i < a.top_logprobs.size(); ++i)
    if (a.top_logprobs[i].token_id != b.top_logprobs[i].token_id ||
        std::bit_cast<uint32_t>(a.top_logprobs[i].logprob) != std::bit_cast<uint32_t>(b.top_logprobs[i].logprob))
      return false;
  return true;
}

// Every field the invariance contract covers, bit for bit. Returns "" or the first field that
// differs ("prompt_logprobs[17]", "choice 1 token_ids", ...).
inline std::string diff(const RequestOutput& a, const RequestOutput& b) {
  if (a.outputs.size() != b.outputs.size()) return "number of choices";
  if (a.prompt_logprobs.size() != b.prompt_logprobs.size()) return "prompt_logprobs size";
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i)
    if (a.prompt_logprobs[i].has_value() != b.prompt_logprobs[i].has_value() ||
        (a.prompt_logprobs[i] && !same_entry(*a.prompt_logprobs[i], *b.prompt_logprobs[i])))
      return "prompt_logprobs[" + std::to_string(i) + "]";
  for (size_t c = 0; c < a.outputs.size(); ++c) {
    const CompletionOutput& x = a.outputs[c];
    const CompletionOutput& y = b.outputs[c];
    if (x.token_ids != y.token_ids) return "choice " + std::to_string(c) + " token_ids";
    if (x.finish_reason != y.finish_reason) return "choice " + std::to_string(c) + " finish_reason";
    if (std::bit_cast<uint64_t>(x.cumulative_logprob) != std::bit_cast<uint64_t>(y.cumulative_logprob))
      return "choice " + std::to_string(c) + " cumulative_logprob";
    if (x.logprobs.size() != y.logprobs.size()) return "choice " + std::to_string(c) + " logprobs size";
    for (size_t t = 0; t < x.logprobs.size(); ++t)
      if (!same_entry(x.logprobs[t], y.logprobs[t]))
        return "choice " + std::to_string(c) + " logprobs[" + std::to_string(t) + "]";
  }
  return "";
}

}  // namespace ditto
