#include "generate_jsonl.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_input.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

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
  if (line.contains("prompt")) prompt.text = json_string(line["prompt"], "prompt");
  if (line.contains("prompt_token_ids")) prompt.token_ids = json_token_ids(line["prompt_token_ids"], "prompt_token_ids");
  if (line.contains("messages")) {
    if (!line["messages"].is_array()) throw_invalid_argument("field 'messages' must be an array");
    prompt.messages = line["messages"];
  }
  if (line.contains("tools")) prompt.tools = line["tools"];
  if (line.contains("chat_template_kwargs")) prompt.chat_template_kwargs = line["chat_template_kwargs"];
  if (line.contains("n")) p.n = json_int(line["n"], "n", -kMaxJsonCount, kMaxJsonCount);
  for (const auto& [key, target] : {std::pair{"temperature", &p.temperature}, std::pair{"top_p", &p.top_p},
                                    std::pair{"min_p", &p.min_p}, std::pair{"presence_penalty", &p.presence_penalty},
                                    std::pair{"frequency_penalty", &p.frequency_penalty},
                                    std::pair{"repetition_penalty", &p.repetition_penalty}})
    if (line.contains(key)) *target = json_float(line[key], key);
  if (line.contains("top_k")) p.top_k = json_int(line["top_k"], "top_k", -kMaxJsonCount, kMaxJsonCount);
  if (line.contains("seed") && !line["seed"].is_null()) p.seed = json_seed(line["seed"], "seed");
  if (line.contains("stop")) p.stop = json_strings(line["stop"], "stop");
  if (line.contains("stop_token_ids")) p.stop_token_ids = json_token_ids(line["stop_token_ids"], "stop_token_ids");
  for (const auto& [key, target] : {std::pair{"ignore_eos", &p.ignore_eos},
                                    std::pair{"include_stop_str_in_output", &p.include_stop_str_in_output},
                                    std::pair{"skip_special_tokens", &p.skip_special_tokens}})
    if (line.contains(key)) *target = json_bool(line[key], key);
  if (line.contains("max_tokens")) p.max_tokens = json_int(line["max_tokens"], "max_tokens", -kMaxJsonCount, kMaxJsonCount);
  if (line.contains("min_tokens")) p.min_tokens = json_int(line["min_tokens"], "min_tokens", -kMaxJsonCount, kMaxJsonCount);
  if (line.contains("logprobs") && !line["logprobs"].is_null())
    p.logprobs = json_int(line["logprobs"], "logprobs", -kMaxJsonCount, kMaxJsonCount);
  if (line.contains("prompt_logprobs") && !line["prompt_logprobs"].is_null())
    p.prompt_logprobs = json_int(line["prompt_logprobs"], "prompt_logprobs", -kMaxJsonCount, kMaxJsonCount);
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
    if (std::filesystem::is_directory(o.prompts)) throw_invalid_argument("--prompts: '" + o.prompts + "' is a directory");
    file.open(o.prompts);
    if (!file) throw_invalid_argument("--prompts: cannot open '" + o.prompts + "': " + std::strerror(errno));
  }
  std::istream& in = o.prompts == "-" ? std::cin : file;
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  std::vector<std::optional<std::string>> line_errors;
  std::vector<std::string> request_ids;
  std::vector<size_t> line_numbers;  // file line of each request (blank lines are skipped)
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
        if (line.is_object() && line.contains("request_id")) rid = json_string(line["request_id"], "request_id");
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
    line_numbers.push_back(number);
  }
  if (in.bad()) throw_invalid_argument("--prompts: reading '" + o.prompts + "' failed: " + std::strerror(errno));
  // The output file is opened once the model has loaded, so a bad model leaves an existing file
  // alone; its directory is checked now, so a bad path fails before the load.
  if (o.output != "-") {
    const std::filesystem::path path(o.output);
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    if (std::filesystem::is_directory(path) || !std::filesystem::is_directory(dir))
      throw_invalid_argument("--output: cannot write '" + o.output + "' (a directory, or its directory does not exist)");
  }

  // Lines that failed to parse do not reach the engine.
  std::vector<PromptInput> good_prompts;
  std::vector<SamplingParams> good_params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (line_errors[i]) continue;
    good_prompts.push_back(prompts[i]);
    good_params.push_back(params[i]);
  }
  LLM llm(llm_options);
  // Lines are written in input order as soon as every earlier request is done, so a long run
  // shows its progress in the file and an interrupted one keeps what finished. The file is
  // opened once the model has loaded (a bad model leaves an existing file alone).
  std::ofstream out_file;
  if (o.output != "-") {
    out_file.open(o.output);
    if (!out_file) throw_invalid_argument("--output: cannot open '" + o.output + "': " + std::strerror(errno));
  }
  std::ostream& out = o.output == "-" ? std::cout : out_file;
  std::vector<size_t> engine_index(prompts.size(), SIZE_MAX);  // input line → index into good_prompts
  for (size_t i = 0, k = 0; i < prompts.size(); ++i)
    if (!line_errors[i]) engine_index[i] = k++;
  std::vector<std::optional<GenerateResult>> ready(prompts.size());
  size_t written = 0;
  auto flush_ready = [&] {
    for (; written < prompts.size(); ++written) {
      GenerateResult r;
      if (line_errors[written]) {
        r.error = line_errors[written];
      } else if (ready[written]) {
        r = std::move(*ready[written]);
        ready[written].reset();
        if (r.error) {  // "prompt K: ..." names the engine's index; name the line instead
          const size_t colon = r.error->find(": ");
          r.error = "line " + std::to_string(line_numbers[written]) +
                    (colon == std::string::npos ? ": " + *r.error : r.error->substr(colon));
        }
      } else {
        break;  // an earlier request is still running
      }
      r.output.request_id = request_ids[written];
      out << result_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    out.flush();
  };
  std::vector<size_t> line_of(good_prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    if (engine_index[i] != SIZE_MAX) line_of[engine_index[i]] = i;
  if (!good_prompts.empty())
    llm.generate(good_prompts, good_params, true, [&](size_t k, const GenerateResult& r) {
      ready[line_of[k]] = r;
      flush_ready();
    });
  flush_ready();
  out.flush();
  if (!out) throw_invalid_argument("--output: writing failed: " + std::string(std::strerror(errno)));
}

}  // namespace ditto
