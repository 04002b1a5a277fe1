// `ditto generate`: greedy generation, all prompts in one batch. Prompts are token ids, text
// (tokenized with the model's tokenizer) or chat conversations (rendered with its chat template).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/json_input.h"
#include "core/progress.h"
#include "ditto/llm.h"
#include "generate_jsonl.h"
#include "model_options.h"

namespace ditto {
namespace {

struct GenerateCommandOptions {
  ModelOptions model;
  std::vector<std::string> prompt_token_ids;  // "1,2,3" each
  std::vector<std::string> prompts;           // text each
  std::vector<std::string> chats;             // JSON array of messages each
  std::string chat_template_kwargs = "{}";    // JSON object passed to the template
  std::string tools;                          // JSON array of tool schemas ("" = none)
  // Sampling (vLLM's names) of the flag mode: greedy unless --temperature is given — a choice of
  // this command's flags, so that `ditto generate --prompt` is reproducible without a seed. The
  // lines of --prompts start from the model's defaults instead (--generation-config), as the
  // server's requests and Python's do.
  SamplingParams sampling = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  uint64_t seed = 0;
  bool json = false;
  bool quiet = false;  // no progress bars (loading, prefill, requests)
  // Engine mode: JSON lines in and out, any sampling parameters per line.
  std::string prompts_file;
  std::string output = "-";
};

nlohmann::ordered_json parse_json_flag(const std::string& text, const std::string& flag) {
  return parse_json_input<nlohmann::ordered_json>(text, flag);
}

// Every prompt flag as a PromptInput, in the order the kinds are listed (one kind per run).
std::vector<PromptInput> prompt_inputs(const GenerateCommandOptions& o) {
  const int kinds = !o.prompt_token_ids.empty() + !o.prompts.empty() + !o.chats.empty();
  if (kinds != 1)
    throw_invalid_argument("give prompts as exactly one of --prompt-token-ids, --prompt or --chat (each may repeat)");
  std::vector<PromptInput> out;
  for (const std::string& p : o.prompt_token_ids)
    out.push_back(PromptInput{.token_ids = parse_token_ids(p, "--prompt-token-ids")});
  for (const std::string& p : o.prompts) out.push_back(PromptInput{.text = p});
  if (!o.chats.empty()) {
    const auto kwargs = parse_json_flag(o.chat_template_kwargs, "--chat-template-kwargs");
    if (!kwargs.is_object()) throw_invalid_argument("--chat-template-kwargs: expected a JSON object");
    const std::string tools = o.tools.empty() ? "" : parse_json_flag(o.tools, "--tools").dump();
    for (const std::string& c : o.chats) {
      PromptInput in;
      in.messages = parse_json_flag(c, "--chat").dump();
      in.tools = tools;
      in.chat_template_kwargs = kwargs.dump();
      out.push_back(std::move(in));
    }
  }
  return out;
}

void run_generate(const GenerateCommandOptions& o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  enable_progress_bars(!o.quiet);
  if (!o.prompts_file.empty()) {
    if (!o.prompt_token_ids.empty() || !o.prompts.empty() || !o.chats.empty())
      throw_invalid_argument(
          "--prompts reads every request from a JSON-lines file; do not combine it with "
          "--prompt, --prompt-token-ids or --chat");
    const size_t failed = run_generate_jsonl(o.model.engine, {o.prompts_file, o.output, o.seed, o.quiet});
    if (failed > 0) throw_invalid_argument(std::to_string(failed) + " request(s) failed; their lines hold the errors");
    return;
  }
  const std::vector<PromptInput> prompts = prompt_inputs(o);
  SamplingParams params = o.sampling;
  params.seed = o.seed;  // fixed (0 unless --seed): the same command gives the same text
  LLM llm(o.model.engine);
  if (o.model.report_memory) report_load(llm.model_info());
  const bool has_tokenizer = llm.model_info().has_tokenizer;
  // Every prompt through the front door and the engine, all in one batch; a given --max-tokens
  // must fit the context (the server's rule), the default is cut to it.
  GenerateOptions options;
  options.max_tokens_rules.assign(prompts.size(), MaxTokensRule::kAsGiven);
  options.progress_bar = !o.quiet;  // a long prompt's prefill, then the requests done
  const std::vector<GenerateResult> results = llm.generate(prompts, {params}, options);
  for (const GenerateResult& r : results)
    if (r.error) throw_invalid_argument(*r.error);
  for (size_t i = 0; i < results.size(); ++i) {
    const CompletionOutput& c = results[i].output.outputs.at(0);
    if (o.json) {
      nlohmann::ordered_json j = {{"prompt_index", i}, {"token_ids", c.token_ids}, {"finish_reason", c.finish_reason}};
      if (has_tokenizer) j["text"] = c.text;
      j["seed"] = results[i].output.seed;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (has_tokenizer) {
      std::printf("%s\n", c.text.c_str());
    } else {
      std::string line;
      for (size_t k = 0; k < c.token_ids.size(); ++k) line += (k ? "," : "") + std::to_string(c.token_ids[k]);
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate through the batching engine. With --prompts: one JSON request per line with any sampling "
      "parameters, one RequestOutput per line. With --prompt / --prompt-token-ids / --chat: the sampling flags "
      "(greedy by default), one line per prompt (text, or token ids; --json: token_ids, text, finish_reason, seed). "
      "Exits 1 when any request failed.");
  add_model_options(cmd, o->model);
  cmd->add_option("--prompt-token-ids", o->prompt_token_ids, "Prompt as comma-separated token ids; repeat for a batch")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--prompt", o->prompts, "Prompt text, tokenized with the model's tokenizer; repeat for a batch")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--chat", o->chats,
                  "Conversation as a JSON array of messages ({\"role\", \"content\"}), rendered with the model's "
                  "chat template and a generation prompt; repeat for a batch")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tools", o->tools, "JSON array of tool (function) schemas passed to the chat template as `tools`");
  cmd->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                  "JSON object of extra chat-template variables, e.g. {\"enable_thinking\": false}")
      ->capture_default_str();
  SamplingParams& sp = o->sampling;
  cmd->add_option("--max-tokens", sp.max_tokens, "Maximum number of tokens to generate per prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--min-tokens", sp.min_tokens, "Tokens to generate before EOS or a stop token may end a prompt");
  cmd->add_option("--temperature", sp.temperature, "Sampling temperature; 0 is greedy")->capture_default_str();
  cmd->add_option("--top-p", sp.top_p, "Nucleus sampling: keep the most likely tokens with this mass");
  cmd->add_option("--top-k", sp.top_k, "Keep the k most likely tokens (0 or -1: off)");
  cmd->add_option("--min-p", sp.min_p, "Drop tokens below min_p times the most likely one's probability");
  cmd->add_option("--presence-penalty", sp.presence_penalty, "Penalty for tokens already generated, once");
  cmd->add_option("--frequency-penalty", sp.frequency_penalty, "Penalty per occurrence in the output");
  cmd->add_option("--repetition-penalty", sp.repetition_penalty, "Divides (or multiplies) seen tokens' logits");
  cmd->add_option("--seed", o->seed,
                  "Sampling seed of every --prompt (--json reports it); with --prompts, line k without a seed "
                  "gets the top 53 bits of SplitMix64(seed + k), as Python's LLM(seed=...) does")
      ->capture_default_str();
  cmd->add_option("--stop", sp.stop, "Stop string; repeat for several")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--ignore-eos", sp.ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  cmd->add_flag("!--no-skip-special-tokens", sp.skip_special_tokens, "Keep special tokens in the output text");
  cmd->add_flag("--json", o->json, "One JSON object per prompt: prompt_index, token_ids, finish_reason, text, seed");
  cmd->add_flag("--quiet", o->quiet, "No progress bars on stderr (they appear only on a terminal)");
  cmd->add_option("--prompts", o->prompts_file,
                  "JSON-lines file of requests ('-': stdin): each line a prompt (\"prompt\", \"prompt_token_ids\" "
                  "or \"messages\") and any sampling parameter by vLLM's name (temperature, top_p, seed, n, stop, "
                  "logprobs, ...). Runs the batching engine; writes one RequestOutput per line");
  cmd->add_option("--output", o->output, "Where --prompts writes its JSON lines ('-': stdout)")->capture_default_str();
  add_engine_flags(cmd, o->model.engine,
                   {"kv_cache_memory", "max_num_batched_tokens", "long_prefill_token_threshold", "max_num_seqs",
                    "max_model_len", "max_logprobs", "logprobs_mode", "enable_prefix_caching", "speculative_config",
                    "generation_config", "enable_return_routed_experts"});
  // Per-prompt flags belong to the flag mode (--prompts lines carry their own); mixing them is a
  // usage error rather than a silently ignored flag.
  CLI::Option* prompts = cmd->get_option("--prompts");
  for (const char* name :
       {"--prompt", "--prompt-token-ids", "--chat", "--tools", "--chat-template-kwargs", "--max-tokens", "--min-tokens",
        "--temperature", "--top-p", "--top-k", "--min-p", "--presence-penalty", "--frequency-penalty",
        "--repetition-penalty", "--stop", "--ignore-eos", "--no-skip-special-tokens", "--json", "--report-memory"})
    prompts->excludes(cmd->get_option(name));
  cmd->get_option("--output")->needs(prompts);
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace ditto
