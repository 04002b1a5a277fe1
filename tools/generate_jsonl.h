// `ditto generate --prompts in.jsonl --output out.jsonl`: one request per input line (a prompt and
// any SamplingParams field, vLLM's names), one RequestOutput per output line, in input order.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ditto/llm.h"

namespace ditto {

struct JsonlOptions {
  std::string prompts;  // path, or "-" for stdin
  std::string output;   // path, or "-" (default) for stdout
  uint64_t seed = 0;    // line k without a seed gets derived_seed(seed, k) (sampling_params.h)
  bool quiet = false;   // no progress bar (it draws only on a terminal anyway)
};

// Throws Error for unreadable/unwritable files; a bad line becomes that line's {"error": ...}.
// Returns the number of lines that got an error (the command then exits non-zero).
size_t run_generate_jsonl(const EngineArgs& engine_args, const JsonlOptions& o);

// The JSON of one result: request_id, prompt, prompt_token_ids, seed, prompt_logprobs (when
// asked), outputs[{index, text, token_ids, cumulative_logprob, logprobs, finish_reason,
// stop_reason}] — or request_id and error. Floats are float32 values written as the shortest
// decimal that reads back as the same double, hence the same float32.
nlohmann::ordered_json result_json(const GenerateResult& r);

}  // namespace ditto
