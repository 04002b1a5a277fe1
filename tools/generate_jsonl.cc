#include "generate_jsonl.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hub.h"
#include "core/error.h"
#include "core/json_input.h"
#include "ditto/llm.h"
#include "engine/generation_defaults.h"
#include "engine/sampling_params_json.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

// One input line: its prompt, parameters and how max_tokens is settled. vLLM fields that would
// change the result and that ditto lacks are refused (refuse_unimplemented_fields); unknown
// fields are listed in `ignored` (the server's rule: vLLM ignores them too). Throws Error(kInvalidArgument)
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
  static const std::set<std::string> own = {"request_id",
                                            "prompt",
                                            "prompt_token_ids",
                                            "messages",
                                            "tools",
                                            "chat_template_kwargs",
                                            "logprobs",
                                            "add_generation_prompt",
                                            "continue_final_message",
                                            "add_special_tokens"};
  // The server's request fields that would change the result and that a line cannot carry: refused
  // naming the field unless at their no-op value (the server section of the README has them).
  static const std::set<std::string> server_only = {"response_format", "best_of",       "suffix",   "echo",
                                                    "tool_choice",     "chat_template", "documents"};
  Line l;
  l.params = defaults;
  for (const auto& [key, value] : line.items()) {
    if (server_only.contains(key) && !value.is_null() && value != false &&
        !(key == "tool_choice" && (value == "none" || value == "auto")) &&
        !(key == "response_format" && value.is_object() && value.value("type", "") == "text") &&
        !(key == "best_of" && value.is_number_integer() && value == line.value("n", 1)))
      throw_invalid_field(key, "field '" + key +
                                   "' is the server's (ditto serve); generate --prompts lines cannot "
                                   "carry it, and the line is refused rather than run without it");
    if (!own.contains(key) && !server_only.contains(key) && !sampling_params_keys().contains(key) &&
        !unimplemented_field_keys().contains(key))
      l.ignored.push_back(key);
  }
  refuse_unimplemented_fields(line);
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
  for (const auto& [key, target] : {std::pair{"add_generation_prompt", &prompt.add_generation_prompt},
                                    std::pair{"continue_final_message", &prompt.continue_final_message},
                                    std::pair{"add_special_tokens", &prompt.add_special_tokens}})
    if (line.contains(key) && !line[key].is_null())
      *target = read_field(key, [&, key = key] { return json_bool(line[key], key); });
  // On a chat line, add_special_tokens is vLLM's chat field: special tokens on top of the template's.
  if (prompt.messages && line.contains("add_special_tokens") && !line["add_special_tokens"].is_null()) {
    prompt.chat_add_special_tokens = prompt.add_special_tokens;
    prompt.add_special_tokens = true;
  }
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
    } else if (c.finish_message) {  // finish_reason "error": why
      oj["stop_reason"] = *c.finish_message;
    } else {
      oj["stop_reason"] = nullptr;
    }
    if (c.routed_experts) {  // vLLM's array as nested lists [tokens][MoE layers][num_experts_per_tok]
      const RoutedExperts& re = *c.routed_experts;
      Json rows = Json::array();
      for (int64_t t = 0; t < re.num_tokens; ++t) {
        Json layers = Json::array();
        for (int64_t m = 0; m < re.num_moe_layers; ++m) {
          const auto at = re.expert_ids.begin() + (t * re.num_moe_layers + m) * re.num_experts_per_tok;
          layers.push_back(std::vector<uint16_t>(at, at + re.num_experts_per_tok));
        }
        rows.push_back(std::move(layers));
      }
      oj["routed_experts"] = std::move(rows);
    }
    outs.push_back(oj);
  }
  j["outputs"] = outs;
  return j;
}

namespace {

// One input line as read: a request for the engine, or the error that keeps it out.
struct InputLine {
  size_t number = 0;  // in the file (blank lines are skipped)
  std::string request_id;
  Line request;
  std::optional<std::string> error;  // "line N: why"
};

// Every non-blank line of `in`, in order; a line that fails to parse carries its error.
std::vector<InputLine> read_lines(std::istream& in, const SamplingParams& defaults) {
  std::vector<InputLine> lines;
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    InputLine l;
    l.number = number;
    l.request_id = std::to_string(lines.size());
    const std::string where = "line " + std::to_string(number);
    try {
      const Json line = parse_json_input<Json>(text, where);  // its errors start with `where`
      try {
        if (line.is_object() && line.contains("request_id"))
          l.request_id = json_string(line["request_id"], "request_id");
        l.request = parse_line(line, defaults);
        for (const std::string& key : l.request.ignored)
          std::fprintf(stderr, "ditto generate: %s: ignoring unknown field '%s'\n", where.c_str(), key.c_str());
      } catch (const Error& e) {
        l.error = where + ": " + e.what();
      }
    } catch (const Error& e) {
      l.error = e.what();
    }
    lines.push_back(std::move(l));
  }
  return lines;
}

// --output's directory is checked before the model loads, so a bad path fails at once; the file
// itself is opened after the load, so a bad model leaves an existing file alone.
void check_output_path(const std::string& output) {
  if (output == "-") return;
  const std::filesystem::path path(output);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (std::filesystem::is_directory(path) || !std::filesystem::is_directory(dir))
    throw_invalid_argument("--output: cannot write '" + output + "' (a directory, or its directory does not exist)");
}

// Writes one result line per input line, in input order, as soon as every earlier one is done, so
// a long run shows its progress in the file and an interrupted one keeps what finished.
class OrderedWriter {
 public:
  OrderedWriter(const std::vector<InputLine>& lines, std::ostream& out)
      : lines_(lines), out_(out), ready_(lines.size()) {}

  // Line i's result (its error, if any, names the engine's index "prompt K: ..."), then whatever
  // is ready in order.
  void put(size_t i, GenerateResult r) {
    if (r.error) {  // name the line instead
      const size_t colon = r.error->find(": ");
      r.error = "line " + std::to_string(lines_[i].number) +
                (colon == std::string::npos ? ": " + *r.error : r.error->substr(colon));
    }
    ready_[i] = std::move(r);
    flush();
  }

  // Writes the lines that are ready; lines that failed to parse are ready from the start.
  void flush() {
    for (; written_ < lines_.size(); ++written_) {
      GenerateResult r;
      if (lines_[written_].error) {
        r.error = lines_[written_].error;
      } else if (ready_[written_]) {
        r = std::move(*ready_[written_]);
        ready_[written_].reset();
      } else {
        break;  // an earlier request is still running
      }
      r.output.request_id = lines_[written_].request_id;
      if (r.error) ++failed_;
      out_ << result_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    out_.flush();
  }

  size_t failed() const { return failed_; }

 private:
  const std::vector<InputLine>& lines_;
  std::ostream& out_;
  std::vector<std::optional<GenerateResult>> ready_;
  size_t written_ = 0;
  size_t failed_ = 0;
};

}  // namespace

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
  const std::vector<InputLine> lines = read_lines(in, defaults);
  if (in.bad()) throw_invalid_argument("--prompts: reading '" + o.prompts + "' failed: " + std::strerror(errno));
  check_output_path(o.output);

  // Lines that failed to parse do not reach the engine.
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  std::vector<MaxTokensRule> rules;
  std::vector<size_t> line_of;  // engine index → input line
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].error) continue;
    prompts.push_back(lines[i].request.prompt);
    params.push_back(lines[i].request.params);
    if (!params.back().seed) params.back().seed = derived_seed(o.seed, i);  // the offline rule
    rules.push_back(lines[i].request.rule);
    line_of.push_back(i);
  }
  LLM llm(engine_args);
  std::ofstream out_file;
  if (o.output != "-") {
    out_file.open(o.output);
    if (!out_file) throw_invalid_argument("--output: cannot open '" + o.output + "': " + std::strerror(errno));
  }
  std::ostream& out = o.output == "-" ? std::cout : out_file;
  OrderedWriter writer(lines, out);
  GenerateOptions options;
  options.max_tokens_rules = std::move(rules);
  options.progress_bar = !o.quiet;
  options.return_outputs = false;
  options.on_result = [&](size_t k, GenerateResult& r) { writer.put(line_of[k], std::move(r)); };
  if (!prompts.empty()) llm.generate(prompts, params, options);
  writer.flush();
  if (!out) throw_invalid_argument("--output: writing failed: " + std::string(std::strerror(errno)));
  return writer.failed();
}

}  // namespace ditto
