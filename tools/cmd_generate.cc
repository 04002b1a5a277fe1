// `ditto generate`: greedy generation from token-id prompts, all prompts in one batch.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "kernels/softmax.h"
#include "model/generation_config.h"
#include "model/hub.h"
#include "model_options.h"

namespace ditto {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::vector<std::string> prompts;
  int64_t max_tokens = 16;
  bool ignore_eos = false;
  bool json = false;
};

struct Sequence {
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  size_t prompt_len = 0;
  std::vector<int32_t> blocks;
  const char* finish_reason = nullptr;  // set when finished: "stop" or "length"
};

void run_generate(const GenerateOptions& o) {
  LoadedModel lm = load_model(o.model);
  const CausalLM& model = *lm.model;
  const int64_t vocab = model.config().vocab_size;
  const std::vector<int64_t> eos = o.ignore_eos ? std::vector<int64_t>{}
                                                : eos_token_ids(resolve_model_path(o.model.model), model.config());
  std::vector<Sequence> seqs;
  int64_t num_blocks = 0;
  for (const std::string& p : o.prompts) {
    Sequence s;
    s.tokens = parse_token_ids(p, "--prompt-token-ids");
    s.prompt_len = s.tokens.size();
    num_blocks += (static_cast<int64_t>(s.prompt_len) + o.max_tokens + o.model.block_size - 1) / o.model.block_size;
    seqs.push_back(std::move(s));
  }
  ModelRunner runner(model, num_blocks, o.model.block_size);
  BlockAllocator allocator(num_blocks);
  for (Sequence& s : seqs)
    s.blocks = allocator.allocate_for_tokens(static_cast<int64_t>(s.prompt_len) + o.max_tokens, o.model.block_size);

  // Step 0 runs every prompt; each later step runs one token per unfinished sequence.
  for (bool first = true;; first = false) {
    std::vector<SequenceStep> steps;
    std::vector<Sequence*> running;
    for (Sequence& s : seqs) {
      if (s.finish_reason != nullptr) continue;
      const size_t start = first ? 0 : s.tokens.size() - 1;
      steps.push_back(SequenceStep{std::span<const int32_t>(s.tokens).subspan(start), static_cast<int32_t>(start),
                                   s.blocks, false});
      running.push_back(&s);
    }
    if (running.empty()) break;
    const std::vector<float> logits = runner.step(steps);
    for (size_t i = 0; i < running.size(); ++i) {
      Sequence& s = *running[i];
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
    const std::vector<int32_t> out(seqs[i].tokens.begin() + static_cast<std::ptrdiff_t>(seqs[i].prompt_len),
                                   seqs[i].tokens.end());
    if (o.json) {
      nlohmann::json j = {{"prompt_index", i}, {"token_ids", out}, {"finish_reason", seqs[i].finish_reason}};
      std::printf("%s\n", j.dump().c_str());
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
  CLI::App* cmd = app.add_subcommand("generate", "Greedy generation from token-id prompts (one output line per prompt)");
  add_model_options(cmd, o->model);
  cmd->add_option("--prompt-token-ids", o->prompts, "Prompt as comma-separated token ids; repeat for a batch")
      ->required()
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--max-tokens", o->max_tokens, "Maximum number of tokens to generate per prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  cmd->add_flag("--json", o->json, "One JSON object per prompt: prompt_index, token_ids, finish_reason");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace ditto
