// `ditto demo`: the scenario ditto exists for. Three prompts sampled at temperature 0.7 with
// seed 42, first on their own, then shuffled into a batch of 30 other requests; each output is
// printed with whether it came out identical (token ids, text, and cumulative logprob bits).
#include <algorithm>
#include <bit>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "ditto/llm.h"
#include "model_options.h"

namespace ditto {
namespace {

struct DemoOptions {
  ModelOptions model;
  int64_t max_tokens = 100;
  int64_t others = 30;
};

const char* const kPrompts[] = {"The future of AI is", "Machine learning enables", "Deep learning models can"};

int run_demo(const DemoOptions& o) {
  EngineArgs lo = o.model.engine;
  lo.kv_cache_memory = int64_t{1} << 30;
  note_random_weights("ditto demo", lo.model);
  LLM llm(lo);
  SamplingParams p;
  p.temperature = 0.7f;
  p.max_tokens = o.max_tokens;
  p.seed = 42;

  std::vector<PromptInput> alone(3);
  for (int i = 0; i < 3; ++i) alone[static_cast<size_t>(i)].text = kPrompts[i];
  const std::vector<GenerateResult> first = llm.generate(alone, {p});

  // The same three, shuffled among `others` unrelated requests with their own lengths and params.
  std::mt19937 rng(7);
  std::vector<PromptInput> batch;
  std::vector<SamplingParams> params;
  const char* const words[] = {"Once", "upon", "a", "time", "the", "engine", "batch", "invariant", "bits", "same"};
  for (int64_t k = 0; k < o.others; ++k) {
    std::string text;
    for (int w = 0, n = 1 + static_cast<int>(rng() % 40); w < n; ++w)
      text += std::string(w ? " " : "") + words[rng() % 10];
    PromptInput in;
    in.text = text;
    batch.push_back(in);
    SamplingParams q;
    q.temperature = static_cast<float>(rng() % 12) / 10.0f;
    q.top_p = 0.5f + static_cast<float>(rng() % 6) / 10.0f;
    q.max_tokens = 1 + static_cast<int64_t>(rng() % 120);
    q.seed = rng();
    q.n = 1 + static_cast<int64_t>(rng() % 2);
    params.push_back(q);
  }
  std::vector<size_t> where(3);
  for (size_t i = 0; i < 3; ++i) {
    where[i] = rng() % (batch.size() + 1);
    batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(where[i]), alone[2 - i]);
    params.insert(params.begin() + static_cast<std::ptrdiff_t>(where[i]), p);
    for (size_t j = 0; j < i; ++j)
      if (where[j] >= where[i]) ++where[j];
  }
  const std::vector<GenerateResult> second = llm.generate(batch, params, true);

  bool all = true;
  for (size_t i = 0; i < 3; ++i) {
    const CompletionOutput& a = first[i].output.outputs.at(0);
    const CompletionOutput& b = second[where[2 - i]].output.outputs.at(0);
    const bool same = a.token_ids == b.token_ids && a.text == b.text &&
                      std::bit_cast<uint64_t>(a.cumulative_logprob) == std::bit_cast<uint64_t>(b.cumulative_logprob);
    all = all && same;
    // Texts as JSON strings: random weights produce newlines and control characters.
    auto quoted = [](const std::string& t) {
      return nlohmann::json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    std::printf("prompt:    %s\n", kPrompts[i]);
    std::printf("alone:     %s\n", quoted(a.text).c_str());
    std::printf("in batch:  %s  (request %zu of %zu)\n", quoted(b.text).c_str(), where[2 - i] + 1, batch.size());
    std::printf("identical: %s\n\n", same ? "yes" : "no");
  }
  return all ? 0 : 1;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd =
      app.add_subcommand("demo",
                         "Three prompts sampled (temperature 0.7, seed 42) alone, then shuffled into a batch of other "
                         "requests: prints both outputs and whether they are identical (exit 1 if not)");
  add_model_options(cmd, o->model);
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens per output")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--others", o->others, "Unrelated requests in the second batch")
      ->check(CLI::Range(int64_t{0}, int64_t{10000}))
      ->capture_default_str();
  cmd->callback([o] {
    if (run_demo(*o) != 0) throw_error(ErrorCode::kInternal, "demo: an output changed with the batch around it");
  });
}

}  // namespace ditto
