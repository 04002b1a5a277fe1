#include "engine/sampling_params_json.h"

#include <utility>

#include "core/error.h"
#include "core/json_input.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

int64_t count(const Json& body, const char* key) {
  return read_field(key, [&] { return json_int(body[key], key); });
}

}  // namespace

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
                                             "prompt_logprobs"};
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
  if (present(body, "seed")) p.seed = read_field("seed", [&] { return json_seed(body["seed"], "seed"); });
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
  const bool max_tokens_given = present(body, "max_tokens");
  if (max_tokens_given) p.max_tokens = count(body, "max_tokens");
  return max_tokens_given;
}

}  // namespace ditto
