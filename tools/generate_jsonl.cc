#include "generate_jsonl.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "json_input.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
T field(const Json& line, const char* key, const char* type) {
  try {
    return line.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_invalid_argument(std::string("field '") + key + "' must be " + type + ", got " + line.at(key).dump());
  }
}

// Reads one input line into a prompt and its parameters. Throws Error(kInvalidArgument) naming
// the field.
void parse_line(const Json& line, PromptInput& prompt, SamplingParams& p) {
  if (!line.is_object()) throw_invalid_argument("each line must be a JSON object");
  static const std::set<std::string> known = {
      "request_id", "prompt", "prompt_token_ids", "messages", "tools", "chat_template_kwargs", "n",
      "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "seed", "stop", "stop_token_ids", "ignore_eos", "include_stop_str_in_output",
      "max_tokens", "min_tokens", "logprobs", "prompt_logprobs", "skip_special_tokens"};
  for (const auto& [key, value] : line.items())
    if (!known.contains(key)) throw_invalid_argument("unknown field '" + key + "'");
  if (line.contains("prompt")) prompt.text = field<std::string>(line, "prompt", "a string");
  if (line.contains("prompt_token_ids"))
    prompt.token_ids = field<std::vector<int32_t>>(line, "prompt_token_ids", "an array of token ids");
  if (line.contains("messages")) {
    if (!line["messages"].is_array()) throw_invalid_argument("field 'messages' must be an array");
    prompt.messages = line["messages"];
  }
  if (line.contains("tools")) prompt.tools = line["tools"];
  if (line.contains("chat_template_kwargs")) prompt.chat_template_kwargs = line["chat_template_kwargs"];
  const char* kNumber = "a number";
  const char* kInt = "an integer";
  if (line.contains("n")) p.n = field<int64_t>(line, "n", kInt);
  if (line.contains("temperature")) p.temperature = field<float>(line, "temperature", kNumber);
  if (line.contains("top_p")) p.top_p = field<float>(line, "top_p", kNumber);
  if (line.contains("top_k")) p.top_k = field<int64_t>(line, "top_k", kInt);
  if (line.contains("min_p")) p.min_p = field<float>(line, "min_p", kNumber);
  if (line.contains("presence_penalty")) p.presence_penalty = field<float>(line, "presence_penalty", kNumber);
  if (line.contains("frequency_penalty")) p.frequency_penalty = field<float>(line, "frequency_penalty", kNumber);
  if (line.contains("repetition_penalty")) p.repetition_penalty = field<float>(line, "repetition_penalty", kNumber);
  if (line.contains("seed") && !line["seed"].is_null()) p.seed = field<uint64_t>(line, "seed", "a non-negative integer");
  if (line.contains("stop")) {
    if (line["stop"].is_string()) {
      p.stop = {line["stop"].get<std::string>()};
    } else {
      p.stop = field<std::vector<std::string>>(line, "stop", "a string or an array of strings");
    }
  }
  if (line.contains("stop_token_ids")) p.stop_token_ids = field<std::vector<int32_t>>(line, "stop_token_ids", "an array of token ids");
  if (line.contains("ignore_eos")) p.ignore_eos = field<bool>(line, "ignore_eos", "a boolean");
  if (line.contains("include_stop_str_in_output"))
    p.include_stop_str_in_output = field<bool>(line, "include_stop_str_in_output", "a boolean");
  if (line.contains("max_tokens")) p.max_tokens = field<int64_t>(line, "max_tokens", kInt);
  if (line.contains("min_tokens")) p.min_tokens = field<int64_t>(line, "min_tokens", kInt);
  if (line.contains("logprobs") && !line["logprobs"].is_null()) p.logprobs = field<int64_t>(line, "logprobs", kInt);
  if (line.contains("prompt_logprobs") && !line["prompt_logprobs"].is_null())
    p.prompt_logprobs = field<int64_t>(line, "prompt_logprobs", kInt);
  if (line.contains("skip_special_tokens")) p.skip_special_tokens = field<bool>(line, "skip_special_tokens", "a boolean");
}

Json logprob_json(const SampledToken& s) {
  Json top = Json::array();
  for (const TokenLogprob& t : s.top_logprobs)
    top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}, {"rank", t.rank}});
  return {{"token_id", s.token.token_id}, {"logprob", s.token.logprob}, {"rank", s.token.rank}, {"top_logprobs", top}};
}

}  // namespace

Json result_json(const GenerateResult& r) {
  const RequestOutput& o = r.output;
  if (r.error) return {{"request_id", o.request_id}, {"error", *r.error}};
  Json j = {{"request_id", o.request_id}};
  if (!o.prompt.empty()) j["prompt"] = o.prompt;
  j["prompt_token_ids"] = o.prompt_token_ids;
  j["seed"] = o.seed;
  if (!o.prompt_logprobs.empty()) {
    Json pl = Json::array();
    for (const auto& e : o.prompt_logprobs) pl.push_back(e ? logprob_json(*e) : Json(nullptr));
    j["prompt_logprobs"] = pl;
  }
  Json outs = Json::array();
  for (const CompletionOutput& c : o.outputs) {
    Json oj = {{"index", c.index}, {"text", c.text}, {"token_ids", c.token_ids},
               {"cumulative_logprob", c.cumulative_logprob}};
    if (!c.logprobs.empty()) {
      Json lps = Json::array();
      for (const SampledToken& s : c.logprobs) lps.push_back(logprob_json(s));
      oj["logprobs"] = lps;
    }
    oj["finish_reason"] = c.finish_reason;
    if (c.stop_string) {
      oj["stop_reason"] = *c.stop_string;
    } else if (c.stop_token_id) {
      oj["stop_reason"] = *c.stop_token_id;
    } else {
      oj["stop_reason"] = nullptr;
    }
    outs.push_back(oj);
  }
  j["outputs"] = outs;
  return j;
}

void run_generate_jsonl(const LLMOptions& llm_options, const JsonlOptions& o) {
  std::ifstream file;
  if (o.prompts != "-") {
    file.open(o.prompts);
    if (!file) throw_invalid_argument("--prompts: cannot open '" + o.prompts + "': " + std::strerror(errno));
  }
  std::istream& in = o.prompts == "-" ? std::cin : file;
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  std::vector<std::optional<std::string>> line_errors;
  std::vector<std::string> request_ids;
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    PromptInput prompt;
    SamplingParams p;
    std::string rid = std::to_string(prompts.size());
    const std::string where = "line " + std::to_string(number);
    try {
      const Json line = parse_json_input<Json>(text, where);  // its errors start with `where`
      try {
        if (line.is_object() && line.contains("request_id")) rid = field<std::string>(line, "request_id", "a string");
        parse_line(line, prompt, p);
        line_errors.emplace_back();
      } catch (const Error& e) {
        line_errors.emplace_back(where + ": " + e.what());
      }
    } catch (const Error& e) {
      line_errors.emplace_back(e.what());
    }
    prompts.push_back(std::move(prompt));
    params.push_back(p);
    request_ids.push_back(rid);
  }
  std::ofstream out_file;
  if (o.output != "-") {
    out_file.open(o.output);
    if (!out_file) throw_invalid_argument("--output: cannot open '" + o.output + "': " + std::strerror(errno));
  }
  std::ostream& out = o.output == "-" ? std::cout : out_file;

  // Lines that failed to parse do not reach the engine.
  std::vector<PromptInput> good_prompts;
  std::vector<SamplingParams> good_params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (line_errors[i]) continue;
    good_prompts.push_back(prompts[i]);
    good_params.push_back(params[i]);
  }
  LLM llm(llm_options);
  std::vector<GenerateResult> results = good_prompts.empty() ? std::vector<GenerateResult>{}
                                                             : llm.generate(good_prompts, good_params, true);
  size_t next = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateResult r;
    if (line_errors[i]) {
      r.error = line_errors[i];
    } else {
      r = std::move(results[next++]);
      if (r.error) {  // "prompt K: ..." names the engine's index; name the line instead
        const size_t colon = r.error->find(": ");
        r.error = "line " + std::to_string(i + 1) + (colon == std::string::npos ? ": " + *r.error : r.error->substr(colon));
      }
    }
    r.output.request_id = request_ids[i];
    out << result_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  out.flush();
  if (!out) throw_invalid_argument("--output: writing failed: " + std::string(std::strerror(errno)));
}

}  // namespace ditto
