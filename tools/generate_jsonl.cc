#include "generate_jsonl.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/hub.h"
#include "core/error.h"
#include "core/json_input.h"
#include "engine/generation_defaults.h"
#include "engine/llm_engine.h"
#include "engine/sampling_params_json.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

// One input line: its prompt, parameters and how max_tokens is settled. Unknown fields are
// listed in `ignored` (the server's rule: vLLM ignores them too). Throws Error(kInvalidArgument)
// naming the field.
struct Line {
  PromptInput prompt;
  SamplingParams params;
  MaxTokensRule rule = MaxTokensRule::kClipToContext;
  std::vector<std::string> ignored;
};

// `defaults`: the sampling parameters of a field the line leaves out (the model's generation_config).
Line parse_line(const Json& line, const SamplingParams& defaults) {
  if (!line.is_object()) throw_invalid_argument("each line must be a JSON object");
  static const std::set<std::string> own = {"request_id",           "prompt",  "prompt_token_ids", "messages", "tools",
                                            "chat_template_kwargs", "logprobs"};
  Line l;
  l.params = defaults;
  for (const auto& [key, value] : line.items())
    if (!own.contains(key) && !sampling_params_keys().contains(key)) l.ignored.push_back(key);
  PromptInput& prompt = l.prompt;
  if (line.contains("prompt"))
    prompt.text = read_field("prompt", [&] { return json_string(line["prompt"], "prompt"); });
  if (line.contains("prompt_token_ids"))
    prompt.token_ids =
        read_field("prompt_token_ids", [&] { return json_token_ids(line["prompt_token_ids"], "prompt_token_ids"); });
  if (line.contains("messages")) {
    if (!line["messages"].is_array()) throw_invalid_field("messages", "field 'messages' must be an array");
    prompt.messages = line["messages"].dump();
  }
  if (line.contains("tools")) prompt.tools = line["tools"].dump();
  if (line.contains("chat_template_kwargs")) prompt.chat_template_kwargs = line["chat_template_kwargs"].dump();
  const bool max_tokens_given = read_sampling_params(line, l.params);
  if (line.contains("logprobs") && !line["logprobs"].is_null())
    l.params.logprobs = read_field("logprobs", [&] { return json_int(line["logprobs"], "logprobs"); });
  // The server's rule: a max_tokens given must fit the context; without one a prompt gets vLLM's
  // 16 (cut to the context) and a chat the rest of the context.
  l.rule = max_tokens_given  ? MaxTokensRule::kAsGiven
           : prompt.messages ? MaxTokensRule::kRestOfContext
                             : MaxTokensRule::kClipToContext;
  return l;
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
    Json oj = {
        {"index", c.index}, {"text", c.text}, {"token_ids", c.token_ids}, {"cumulative_logprob", c.cumulative_logprob}};
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

size_t run_generate_jsonl(const EngineArgs& engine_args, const JsonlOptions& o) {
  std::ifstream file;
  if (o.prompts != "-") {
    if (std::filesystem::is_directory(o.prompts))
      throw_invalid_argument("--prompts: '" + o.prompts + "' is a directory");
    file.open(o.prompts);
    if (!file) throw_invalid_argument("--prompts: cannot open '" + o.prompts + "': " + std::strerror(errno));
  }
  std::istream& in = o.prompts == "-" ? std::cin : file;
  // What the front door will apply (InputProcessor::default_sampling_params), read before the
  // model loads so that a bad line or configuration is reported without waiting for it.
  SamplingParams defaults;
  model_generation_defaults(resolve_model_path(engine_args.model), engine_args.generation_config).apply(defaults);
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  std::vector<MaxTokensRule> rules;
  std::vector<std::optional<std::string>> line_errors;
  std::vector<std::string> request_ids;
  std::vector<size_t> line_numbers;  // file line of each request (blank lines are skipped)
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Line l;
    std::string rid = std::to_string(prompts.size());
    const std::string where = "line " + std::to_string(number);
    try {
      const Json line = parse_json_input<Json>(text, where);  // its errors start with `where`
      try {
        if (line.is_object() && line.contains("request_id")) rid = json_string(line["request_id"], "request_id");
        l = parse_line(line, defaults);
        for (const std::string& key : l.ignored)
          std::fprintf(stderr, "ditto generate: %s: ignoring unknown field '%s'\n", where.c_str(), key.c_str());
        line_errors.emplace_back();
      } catch (const Error& e) {
        line_errors.emplace_back(where + ": " + e.what());
      }
    } catch (const Error& e) {
      line_errors.emplace_back(e.what());
    }
    prompts.push_back(std::move(l.prompt));
    params.push_back(l.params);
    rules.push_back(l.rule);
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
      throw_invalid_argument("--output: cannot write '" + o.output +
                             "' (a directory, or its directory does not exist)");
  }

  // Lines that failed to parse do not reach the engine.
  std::vector<PromptInput> good_prompts;
  std::vector<SamplingParams> good_params;
  std::vector<MaxTokensRule> good_rules;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (line_errors[i]) continue;
    good_prompts.push_back(prompts[i]);
    good_params.push_back(params[i]);
    good_rules.push_back(rules[i]);
  }
  LLMEngine llm(engine_args);
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
  size_t failed = 0;
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
      if (r.error) ++failed;
      out << result_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    out.flush();
  };
  std::vector<size_t> line_of(good_prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    if (engine_index[i] != SIZE_MAX) line_of[engine_index[i]] = i;
  if (!good_prompts.empty())
    llm.generate(
        good_prompts, good_params, true,
        [&](size_t k, const GenerateResult& r) {
          ready[line_of[k]] = r;
          flush_ready();
        },
        nullptr, good_rules);
  flush_ready();
  out.flush();
  if (!out) throw_invalid_argument("--output: writing failed: " + std::string(std::strerror(errno)));
  return failed;
}

}  // namespace ditto
