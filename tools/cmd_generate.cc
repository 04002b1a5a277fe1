// `ditto generate`: greedy generation, all prompts in one batch. Prompts are token ids, text
// (tokenized with the model's tokenizer) or chat conversations (rendered with its chat template).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "generate_jsonl.h"
#include "core/json_input.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "kernels/softmax.h"
#include "model/generation_config.h"
#include "model/hub.h"
#include "model_options.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::vector<std::string> prompt_token_ids;  // "1,2,3" each
  std::vector<std::string> prompts;           // text each
  std::vector<std::string> chats;             // JSON array of messages each
  std::string chat_template_kwargs = "{}";    // JSON object passed to the template
  std::string tools;                          // JSON array of tool schemas ("" = none)
  int64_t max_tokens = 16;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool json = false;
  // Engine mode: JSON lines in and out, any sampling parameters, continuous batching.
  std::string prompts_file;
  std::string output = "-";
  std::string kv_cache_memory = "2GiB";
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  bool no_prefix_caching = false;
};


struct Sequence {
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  size_t prompt_len = 0;
  std::vector<int32_t> blocks;
  size_t computed = 0;                  // tokens whose K/V are in the cache
  const char* finish_reason = nullptr;  // set when finished: "stop" or "length"
};

nlohmann::ordered_json parse_json_flag(const std::string& text, const std::string& flag) {
  return parse_json_input<nlohmann::ordered_json>(text, flag);
}

// Every prompt as token ids. Text prompts get the tokenizer's special tokens (e.g. Llama's
// <|begin_of_text|>), as Hugging Face's tokenizer(text) and vLLM do; rendered chats already hold
// them, so they are encoded without (as apply_chat_template(tokenize=True) does).
std::vector<std::vector<int32_t>> prompt_ids(const GenerateOptions& o, const std::string& dir,
                                             const Tokenizer* tokenizer) {
  const int kinds = !o.prompt_token_ids.empty() + !o.prompts.empty() + !o.chats.empty();
  if (kinds != 1)
    throw_invalid_argument("give prompts as exactly one of --prompt-token-ids, --prompt or --chat (each may repeat)");
  std::vector<std::vector<int32_t>> out;
  // Errors name the prompt: a batch may hold many.
  const auto in_prompt = [&](size_t i, auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      throw Error(e.code(), "prompt " + std::to_string(i) + ": " + e.what());
    }
  };
  for (const std::string& p : o.prompt_token_ids)
    in_prompt(out.size(), [&] { out.push_back(parse_token_ids(p, "--prompt-token-ids")); });
  for (const std::string& p : o.prompts)
    in_prompt(out.size(), [&] { out.push_back(tokenizer->encode(p, /*add_special_tokens=*/true)); });
  if (!o.chats.empty()) {
    const ChatTemplate chat_template = ChatTemplate::load(dir);
    const auto kwargs = parse_json_flag(o.chat_template_kwargs, "--chat-template-kwargs");
    if (!kwargs.is_object()) throw_invalid_argument("--chat-template-kwargs: expected a JSON object");
    const auto tools = o.tools.empty() ? nlohmann::ordered_json(nullptr) : parse_json_flag(o.tools, "--tools");
    for (const std::string& c : o.chats) {
      in_prompt(out.size(), [&] {
        const auto messages = parse_json_flag(c, "--chat");
        const std::string text = chat_template.render(messages, tools, /*add_generation_prompt=*/true, kwargs);
        out.push_back(tokenizer->encode(text, /*add_special_tokens=*/false));
      });
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].empty()) throw_invalid_argument("prompt " + std::to_string(i) + " has no tokens");
  return out;
}

void run_generate(const GenerateOptions& o) {
  if (!o.prompts_file.empty()) {
    if (!o.prompt_token_ids.empty() || !o.prompts.empty() || !o.chats.empty())
      throw_invalid_argument("--prompts reads every request from a JSON-lines file; do not combine it with "
                             "--prompt, --prompt-token-ids or --chat");
    LLMOptions lo;
    lo.model = o.model.model;
    lo.threads = o.model.threads;
    lo.block_size = o.model.block_size;
    lo.kv_cache_memory = parse_size_bytes(o.kv_cache_memory, "--kv-cache-memory");
    lo.max_num_batched_tokens = o.max_num_batched_tokens;
    lo.max_num_seqs = o.max_num_seqs;
    lo.enable_prefix_caching = !o.no_prefix_caching;
    return run_generate_jsonl(lo, {o.prompts_file, o.output});
  }
  const std::string dir = resolve_model_path(o.model.model);
  // Token-id prompts need no tokenizer (a model directory may lack tokenizer.json).
  std::unique_ptr<Tokenizer> tokenizer;
  if (o.prompt_token_ids.empty()) tokenizer = Tokenizer::load(dir);
  const std::vector<std::vector<int32_t>> prompts = prompt_ids(o, dir, tokenizer.get());

  LoadedModel lm = load_model(o.model);
  const CausalLM& model = *lm.model;
  const int64_t vocab = model.config().vocab_size;
  // Stop at generation_config.json's eos_token_id (else config.json's) and the tokenizer's
  // eos_token, as vLLM does.
  std::vector<int64_t> eos;
  if (!o.ignore_eos) {
    eos = eos_token_ids(dir, model.config());
    if (tokenizer)
      for (int32_t id : tokenizer->eos_token_ids()) eos.push_back(id);
  }
  std::vector<Sequence> seqs;
  int64_t num_blocks = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (static_cast<int64_t>(prompts[i].size()) + o.max_tokens > model.config().max_position_embeddings)
      throw_invalid_argument("prompt " + std::to_string(i) + ": " + std::to_string(prompts[i].size()) +
                             " prompt tokens + --max-tokens " + std::to_string(o.max_tokens) +
                             " exceed the model's context length (max_position_embeddings = " +
                             std::to_string(model.config().max_position_embeddings) + ")");
  }
  for (const auto& p : prompts) {
    Sequence s;
    s.tokens = p;
    s.prompt_len = s.tokens.size();
    num_blocks += (static_cast<int64_t>(s.prompt_len) + o.max_tokens + o.model.block_size - 1) / o.model.block_size;
    seqs.push_back(std::move(s));
  }
  ModelRunner runner(model, num_blocks, o.model.block_size);
  BlockAllocator allocator(num_blocks);
  for (Sequence& s : seqs)
    s.blocks = allocator.allocate_for_tokens(static_cast<int64_t>(s.prompt_len) + o.max_tokens, o.model.block_size);

  // Each step runs at most kMaxTokensPerStep tokens: long prompts are prefilled in chunks, which
  // bounds memory and cannot change a bit (chunked prefill is invariant). A sequence samples its
  // next token when a step reaches the end of what it has so far.
  constexpr size_t kMaxTokensPerStep = 512;
  for (;;) {
    std::vector<SequenceStep> steps;
    std::vector<Sequence*> running;
    size_t budget = kMaxTokensPerStep;
    for (Sequence& s : seqs) {
      if (s.finish_reason != nullptr || budget == 0) continue;
      const size_t n = std::min(budget, s.tokens.size() - s.computed);
      steps.push_back(SequenceStep{std::span<const int32_t>(s.tokens).subspan(s.computed, n),
                                   static_cast<int32_t>(s.computed), s.blocks, false});
      running.push_back(&s);
      budget -= n;
    }
    if (running.empty()) break;
    const std::vector<float> logits = runner.step(steps);
    for (size_t i = 0; i < running.size(); ++i) {
      Sequence& s = *running[i];
      s.computed += steps[i].token_ids.size();
      if (s.computed < s.tokens.size()) continue;  // a prompt chunk: nothing to sample yet
      const auto next = static_cast<int32_t>(argmax_row(logits.data() + i * vocab, vocab));
      s.tokens.push_back(next);
      if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
        s.finish_reason = "stop";
      } else if (static_cast<int64_t>(s.tokens.size() - s.prompt_len) >= o.max_tokens) {
        s.finish_reason = "length";
      }
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& s = seqs[i];
    const std::vector<int32_t> out(s.tokens.begin() + static_cast<std::ptrdiff_t>(s.prompt_len), s.tokens.end());
    // The text leaves out the stop token, as vLLM's does; token_ids keep it.
    const size_t text_len = out.size() - (std::string_view(s.finish_reason) == "stop" ? 1 : 0);
    const std::string text =
        tokenizer ? tokenizer->decode(std::span<const int32_t>(out).first(text_len), o.skip_special_tokens) : "";
    if (o.json) {
      nlohmann::ordered_json j = {{"prompt_index", i}, {"token_ids", out}, {"finish_reason", s.finish_reason}};
      if (tokenizer) j["text"] = text;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (tokenizer) {
      std::printf("%s\n", text.c_str());
    } else {
      std::string line;
      for (size_t k = 0; k < out.size(); ++k) line += (k ? "," : "") + std::to_string(out[k]);
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate. With --prompts: the batching engine, one JSON request per line with any sampling "
      "parameters, one RequestOutput per line. With --prompt / --prompt-token-ids / --chat: greedy, all "
      "prompts in one batch, one line per prompt (text, or token ids; --json: token_ids, text, finish_reason).");
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
  cmd->add_option("--tools", o->tools,
                  "JSON array of tool (function) schemas passed to the chat template as `tools`");
  cmd->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                  "JSON object of extra chat-template variables, e.g. {\"enable_thinking\": false}")
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "Maximum number of tokens to generate per prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  cmd->add_flag("!--no-skip-special-tokens", o->skip_special_tokens, "Keep special tokens in the output text");
  cmd->add_flag("--json", o->json, "One JSON object per prompt: prompt_index, token_ids, text, finish_reason");
  cmd->add_option("--prompts", o->prompts_file,
                  "JSON-lines file of requests ('-': stdin): each line a prompt (\"prompt\", \"prompt_token_ids\" "
                  "or \"messages\") and any sampling parameter by vLLM's name (temperature, top_p, seed, n, stop, "
                  "logprobs, ...). Runs the batching engine; writes one RequestOutput per line");
  cmd->add_option("--output", o->output, "Where --prompts writes its JSON lines ('-': stdout)")->capture_default_str();
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory, "KV cache size for --prompts, e.g. 2GiB or 512MB")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per engine step (--prompts)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences running at once (--prompts)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Recompute shared prompt prefixes (--prompts)");
  // Each flag belongs to one mode; mixing them is a usage error rather than a silently ignored flag.
  CLI::Option* prompts = cmd->get_option("--prompts");
  for (const char* name : {"--prompt", "--prompt-token-ids", "--chat", "--tools", "--chat-template-kwargs", "--max-tokens",
                           "--ignore-eos", "--no-skip-special-tokens", "--json", "--report-memory"})
    prompts->excludes(cmd->get_option(name));
  for (const char* name : {"--output", "--kv-cache-memory", "--max-num-batched-tokens", "--max-num-seqs", "--no-prefix-caching"})
    cmd->get_option(name)->needs(prompts);
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace ditto
