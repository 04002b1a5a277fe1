// The API's request path on arbitrary bytes, as `ditto serve` takes a request: the first byte picks
// /v1/completions or /v1/chat/completions, the rest is the body. It is parsed as JSON (depth-
// bounded), checked field by field (parse_api_request), then each prompt goes through the front
// door (InputProcessor::process: the real Qwen3 chat template and tokenizer, vocabulary and context
// checks, max_tokens resolution, sampling-parameter validation, KV-cache fit) — everything a
// request meets before the engine. Any input must become engine requests or throw ditto::Error
// (the server's 400).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json_input.h"
#include "engine/input_processor.h"
#include "fuzz_real_files.h"
#include "server/openai_api.h"

namespace {

const ditto::InputProcessor& front_door() {
  static const ditto::InputLimits limits{.vocab_size = 151936,
                                         .max_model_len = 4096,
                                         .max_model_len_is_model_limit = false,
                                         .max_logprobs = 20,
                                         .block_size = 16,
                                         .num_kv_blocks = 512};
  static const ditto::InputProcessor p(limits, &ditto::fuzz::qwen3_tokenizer(), &ditto::fuzz::qwen3_chat_template());
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)front_door();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ditto::ApiEndpoint endpoint =
      data[0] % 2 == 0 ? ditto::ApiEndpoint::kCompletions : ditto::ApiEndpoint::kChatCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const auto json = ditto::parse_json_input<nlohmann::ordered_json>(body, "request body");
    const ditto::ApiRequest r = ditto::parse_api_request(endpoint, json, front_door().limits().max_logprobs);
    for (const ditto::PromptInput& prompt : r.prompts)
      (void)front_door().process(prompt, r.params, ditto::max_tokens_rule(r), r.max_tokens_field);
  } catch (const ditto::Error&) {
  }
  return 0;
}
