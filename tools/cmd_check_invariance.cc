// `ditto check-invariance`: runs every contract row the engine covers, in one process, on a set
// of prompts, and compares each request's output bit for bit with the same request run alone.
// Prints: row, cases, tokens compared, mismatches. Exit status 1 on any mismatch.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/philox.h"
#include "engine/llm_engine.h"
#include "engine/speculative.h"
#include "generate_jsonl.h"
#include "model/causal_lm.h"
#include "model_options.h"

namespace ditto {
namespace {

struct CheckOptions {
  ModelOptions model;
  std::string prompts_file;  // optional JSONL of prompts ("prompt" / "prompt_token_ids" lines)
  int64_t num_prompts = 64;
  int64_t min_prompt_tokens = 1;
  int64_t max_prompt_tokens = 600;
  int64_t max_tokens = 64;
  uint64_t seed = 0;
  bool json = false;
  std::string inject_fault;  // "" or "batch-size": a deliberately batch-dependent test double
  std::string draft_model;   // the speculative row's draft ("": the model itself)
};

struct Case {
  PromptInput prompt;
  SamplingParams params;
};

// The prompt set: random token ids of lengths spread over [min, max], a third of them sharing a
// common prefix (partial prefix-cache hits); parameters cycle through greedy, seeded sampling with
// n = 2 and 3, top-k/top-p/min-p, penalties, with logprobs on some.
std::vector<Case> make_cases(const CheckOptions& o, int64_t vocab, const std::vector<PromptInput>& given) {
  std::vector<Case> cases;
  auto rand = [&](uint64_t i, uint64_t j) {
    return philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(j), 0x43484b49u, 0},
                         {static_cast<uint32_t>(o.seed), static_cast<uint32_t>(o.seed >> 32)})[0];
  };
  const int64_t n = given.empty() ? o.num_prompts : static_cast<int64_t>(given.size());
  std::vector<int32_t> shared;
  for (int64_t j = 0; j < std::min<int64_t>(o.max_prompt_tokens / 2, 200); ++j)
    shared.push_back(static_cast<int32_t>(rand(1u << 30, static_cast<uint64_t>(j)) % vocab));
  for (int64_t i = 0; i < n; ++i) {
    Case c;
    if (!given.empty()) {
      c.prompt = given[static_cast<size_t>(i)];
    } else {
      const int64_t span = o.max_prompt_tokens - o.min_prompt_tokens + 1;
      const int64_t len = o.min_prompt_tokens + static_cast<int64_t>(rand(static_cast<uint64_t>(i), 1u << 20) % span);
      std::vector<int32_t> ids;
      if (i % 3 == 1)
        ids.assign(shared.begin(), shared.begin() + std::min<int64_t>(len, static_cast<int64_t>(shared.size())));
      for (int64_t j = static_cast<int64_t>(ids.size()); j < len; ++j)
        ids.push_back(static_cast<int32_t>(rand(static_cast<uint64_t>(i), static_cast<uint64_t>(j)) % vocab));
      c.prompt.token_ids = ids;
    }
    SamplingParams& p = c.params;
    p.max_tokens = o.max_tokens;
    p.ignore_eos = true;  // every case produces max_tokens tokens to compare
    p.seed = 1000 + static_cast<uint64_t>(i);
    switch (i % 6) {
      case 0:
        p.temperature = 0.0f;
        p.logprobs = 1;
        break;
      case 1:
        p.temperature = 0.8f;
        p.n = 2;
        break;
      case 2:
        p.temperature = 1.0f;
        p.top_p = 0.9f;
        p.logprobs = 2;
        break;
      case 3:
        p.temperature = 0.7f;
        p.top_k = 20;
        p.repetition_penalty = 1.1f;
        break;
      case 4:
        p.temperature = 1.1f;
        p.min_p = 0.02f;
        p.presence_penalty = 0.4f;
        p.frequency_penalty = 0.2f;
        break;
      case 5:
        p.temperature = 0.9f;
        p.n = 3;
        p.logprobs = 0;
        break;
    }
    cases.push_back(c);
  }
  return cases;
}

// The bits a request's output is compared by: its JSON (floats round-trip float32/float64 exactly),
// without the request id.
std::string fingerprint(const GenerateResult& r) {
  nlohmann::ordered_json j = result_json(r);
  j.erase("request_id");
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t tokens_of(const GenerateResult& r) {
  int64_t n = 0;
  for (const CompletionOutput& c : r.output.outputs) n += static_cast<int64_t>(c.token_ids.size());
  return n;
}

// The negative control's test double: nudges every logit by an amount that depends on how many
// sequences share the engine step — exactly the dependence the contract forbids.
void batch_size_fault(float* logits, int64_t vocab, int64_t batch) {
  for (int64_t i = 0; i < vocab; ++i) logits[i] += 1e-3f * static_cast<float>(batch % 7) * static_cast<float>(i % 3);
}

struct Row {
  std::string name;
  int64_t cases = 0;
  int64_t tokens = 0;
  int64_t mismatches = 0;
  std::string note{};
  int64_t guesses = 0;  // speculative rows: tokens guessed, and accepted
  int64_t accepted = 0;
};

void run_check(const CheckOptions& o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  if (o.num_prompts < 1) throw_invalid_argument("--num-prompts must be at least 1");
  if (o.min_prompt_tokens < 1 || o.max_prompt_tokens < o.min_prompt_tokens)
    throw_invalid_argument("--min-prompt-tokens / --max-prompt-tokens: need 1 <= min <= max");
  if (!o.inject_fault.empty() && o.inject_fault != "batch-size")
    throw_invalid_argument("--inject-fault: the only fault is 'batch-size', got '" + o.inject_fault + "'");
  EngineArgs base = o.model.engine;
  if (base.threads == 0) base.threads = 2;
  LLMEngine llm(base);
  const EngineConfig::LogitsHook fault = o.inject_fault.empty() ? nullptr : EngineConfig::LogitsHook(batch_size_fault);
  std::vector<PromptInput> given;
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) throw_invalid_argument("--prompts: cannot open '" + o.prompts_file + "'");
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      PromptInput p;
      if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
        p.text = j["prompt"].get<std::string>();
      } else if (j.is_object() && j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) {
        p.token_ids = j["prompt_token_ids"].get<std::vector<int32_t>>();
      } else {
        throw_invalid_argument("--prompts line " + std::to_string(number) +
                               ": expected {\"prompt\": ...} or {\"prompt_token_ids\": [...]}");
      }
      given.push_back(p);
    }
    if (given.empty()) throw_invalid_argument("--prompts: no prompts in '" + o.prompts_file + "'");
  }
  const int64_t vocab = llm.model().config().vocab_size;
  const std::vector<Case> cases = make_cases(o, vocab, given);
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  for (const Case& c : cases) {
    prompts.push_back(c.prompt);
    params.push_back(c.params);
  }
  const size_t n = cases.size();
  // Reference: every request alone (batch of one), roomy cache, default budget.
  std::vector<std::string> alone(n);
  std::vector<GenerateResult> alone_results(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<GenerateResult> r = llm.generate({prompts[i]}, {params[i]}, false, nullptr, fault);
    if (r[0].error) throw_invalid_argument("prompt " + std::to_string(i) + ": " + *r[0].error);
    alone[i] = fingerprint(r[0]);
    alone_results[i] = std::move(r[0]);
  }
  // Longest prompt as tokenized (text prompts from --prompts included): sizes the preemption row.
  int64_t max_prompt = 0;
  for (const GenerateResult& r : alone_results)
    max_prompt = std::max(max_prompt, static_cast<int64_t>(r.output.prompt_token_ids.size()));

  std::vector<Row> rows;
  // Runs `order` of the cases (plus extra requests after them, not compared) and compares.
  auto check = [&](const std::string& name, const std::vector<size_t>& order,
                   const std::vector<PromptInput>& extra_prompts = {},
                   const std::vector<SamplingParams>& extra_params = {}, LLMEngine* with = nullptr) {
    LLMEngine& engine = with ? *with : llm;
    std::vector<PromptInput> ps;
    std::vector<SamplingParams> pp;
    for (size_t i : order) {
      ps.push_back(prompts[i]);
      pp.push_back(params[i]);
    }
    ps.insert(ps.end(), extra_prompts.begin(), extra_prompts.end());
    pp.insert(pp.end(), extra_params.begin(), extra_params.end());
    const std::vector<GenerateResult> got = engine.generate(ps, pp, false, nullptr, fault);
    Row row{name};
    for (size_t k = 0; k < order.size(); ++k) {
      ++row.cases;
      row.tokens += tokens_of(got[k]);
      if (got[k].error || fingerprint(got[k]) != alone[order[k]]) ++row.mismatches;
    }
    const LLM::Stats& s = engine.last_stats();
    row.note = std::to_string(s.steps) + " steps";
    if (s.preemptions > 0) row.note += ", " + std::to_string(s.preemptions) + " preemptions";
    if (s.prefix_hit_tokens > 0) row.note += ", " + std::to_string(s.prefix_hit_tokens) + " prefix-cache hit tokens";
    if (engine.args().speculative_config.enabled())
      row.note += ", " + std::to_string(s.spec_decode_num_accepted_tokens) + " of " +
                  std::to_string(s.spec_decode_num_draft_tokens) + " guesses accepted";
    row.guesses = s.spec_decode_num_draft_tokens;
    row.accepted = s.spec_decode_num_accepted_tokens;
    rows.push_back(row);
  };

  std::vector<size_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = i;
  std::mt19937_64 rng(o.seed);
  check("batch of 1 vs all " + std::to_string(n) + " at once", identity);
  std::vector<size_t> shuffled = identity;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  check("shuffled order", shuffled);
  // Random co-running traffic: other requests mixed in, not compared.
  std::vector<PromptInput> extra;
  std::vector<SamplingParams> extra_params;
  std::vector<size_t> mixed_order;
  {
    for (size_t k = 0; k < n; ++k) {
      PromptInput p;
      std::vector<int32_t> ids(1 + rng() % static_cast<uint64_t>(o.max_prompt_tokens));
      for (int32_t& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
      p.token_ids = ids;
      extra.push_back(p);
      SamplingParams q;
      q.temperature = static_cast<float>(rng() % 10) / 8.0f;
      q.max_tokens = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(o.max_tokens * 2));
      q.seed = rng();
      extra_params.push_back(q);
    }
    mixed_order = shuffled;
    std::shuffle(mixed_order.begin(), mixed_order.end(), rng);
    check("with random co-running traffic", mixed_order, extra, extra_params);
  }
  for (int64_t budget : {16, 64, 8192}) {
    EngineArgs lo = base;
    lo.max_num_batched_tokens = budget;
    llm.set_engine_args(lo);
    check("max_num_batched_tokens " + std::to_string(budget), identity);
  }
  {  // prefix cache: every prompt twice, the copies admitted after the originals computed
    EngineArgs lo = base;
    lo.max_num_seqs = 4;
    llm.set_engine_args(lo);
    std::vector<size_t> twice = identity;
    twice.insert(twice.end(), identity.begin(), identity.end());
    check("prefix cache cold, warm and partial hits", twice);
    lo.enable_prefix_caching = false;
    llm.set_engine_args(lo);
    check("prefix caching off", identity);
  }
  {  // a KV cache just big enough for the largest request: preemption
    EngineArgs lo = base;
    const ModelConfig& mc = llm.model().config();
    const int64_t need = (max_prompt + o.max_tokens + lo.block_size - 1) / lo.block_size + 2;
    lo.kv_cache_memory = need * mc.num_hidden_layers * 2 * lo.block_size * mc.num_key_value_heads * mc.head_dim * 2;
    llm.set_engine_args(lo);
    check("KV cache of " + std::to_string(need) + " blocks (preemption)", identity);
  }
  {  // speculative decoding, beside the co-running traffic: each proposer's guesses verified
    EngineArgs lo = base;
    lo.speculative_config = parse_speculative_config(
        R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
    llm.set_engine_args(lo);
    check("speculative decoding on vs off (ngram)", mixed_order, extra, extra_params);
    lo.speculative_config = SpeculativeConfig{.method = "draft_model",
                                              .model = o.draft_model.empty() ? o.model.engine.model : o.draft_model,
                                              .num_speculative_tokens = 3};
    llm.set_engine_args(lo);
    check("speculative decoding on vs off (draft model)", mixed_order, extra, extra_params);
  }
  llm.set_engine_args(base);
  {
    EngineArgs one = base;
    one.threads = base.threads == 1 ? 2 : 1;
    LLMEngine other(one);
    check("threads " + std::to_string(base.threads) + " vs " + std::to_string(one.threads), identity, {}, {}, &other);
  }
  if (base.tensor_parallel_size > 1) {  // the whole model in this process (rank 0) against the split one
    EngineArgs one = base;
    one.tensor_parallel_size = 1;
    LLMEngine whole(one);
    check("tensor-parallel size " + std::to_string(base.tensor_parallel_size) + " vs one process", identity, {}, {},
          &whole);
  }
  {  // decode logprobs vs re-scoring the finished sequence with prompt_logprobs
    Row row{"decode logprob vs re-scored prompt logprob"};
    std::vector<PromptInput> rescore;
    std::vector<std::pair<size_t, size_t>> which;  // (case, choice)
    for (size_t i = 0; i < n; ++i) {
      if (!params[i].logprobs) continue;
      const RequestOutput& out = alone_results[i].output;
      for (size_t c = 0; c < out.outputs.size(); ++c) {
        PromptInput p;
        std::vector<int32_t> ids = out.prompt_token_ids;
        ids.insert(ids.end(), out.outputs[c].token_ids.begin(), out.outputs[c].token_ids.end());
        if (static_cast<int64_t>(ids.size()) >= llm.model().config().max_position_embeddings) continue;
        p.token_ids = ids;
        rescore.push_back(p);
        which.emplace_back(i, c);
      }
    }
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.max_tokens = 1;
    sp.prompt_logprobs = 0;
    const std::vector<GenerateResult> got =
        rescore.empty() ? std::vector<GenerateResult>{} : llm.generate(rescore, {sp}, false, nullptr, fault);
    for (size_t k = 0; k < got.size(); ++k) {
      const RequestOutput& out = alone_results[which[k].first].output;
      const CompletionOutput& c = out.outputs[which[k].second];
      ++row.cases;
      for (size_t t = 0; t < c.token_ids.size(); ++t) {
        ++row.tokens;
        const auto& e = got[k].output.prompt_logprobs.at(out.prompt_token_ids.size() + t);
        if (!e || e->token.token_id != c.token_ids[t] ||
            std::bit_cast<uint32_t>(e->token.logprob) != std::bit_cast<uint32_t>(c.logprobs.at(t).token.logprob))
          ++row.mismatches;
      }
    }
    rows.push_back(row);
  }

  int64_t total = 0;
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      j.push_back({{"row", r.name},
                   {"cases", r.cases},
                   {"tokens_compared", r.tokens},
                   {"mismatches", r.mismatches},
                   {"note", r.note}});
      if (r.guesses > 0) {
        j.back()["spec_decode_num_draft_tokens"] = r.guesses;
        j.back()["spec_decode_num_accepted_tokens"] = r.accepted;
      }
      total += r.mismatches;
    }
    std::printf("%s\n", nlohmann::ordered_json({{"rows", j}, {"mismatches", total}}).dump().c_str());
  } else {
    std::printf("%-46s %6s %10s %11s  %s\n", "row", "cases", "tokens", "mismatches", "note");
    for (const Row& r : rows) {
      std::printf("%-46s %6lld %10lld %11lld  %s\n", r.name.c_str(), static_cast<long long>(r.cases),
                  static_cast<long long>(r.tokens), static_cast<long long>(r.mismatches), r.note.c_str());
      total += r.mismatches;
    }
    std::printf("%s: %lld mismatches\n", total == 0 ? "PASS" : "FAIL", static_cast<long long>(total));
  }
  if (total > 0) throw_error(ErrorCode::kInternal, "check-invariance: " + std::to_string(total) + " mismatches");
}

}  // namespace

void add_check_invariance_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd =
      app.add_subcommand("check-invariance",
                         "Run every contract row the engine covers (batch 1 vs N, order, co-running traffic, chunked "
                         "prefill budgets, prefix cache, preemption, speculative decoding, threads, tensor-parallel "
                         "size, decode vs re-scored logprobs) and compare "
                         "outputs bit for bit; exit 1 on any mismatch");
  add_model_options(cmd, o->model);
  cmd->add_option("--prompts", o->prompts_file,
                  "JSON lines of {\"prompt\"} or {\"prompt_token_ids\"} (default: random token ids)");
  cmd->add_option("--num-prompts", o->num_prompts, "Random prompts to generate")->capture_default_str();
  cmd->add_option("--min-prompt-tokens", o->min_prompt_tokens, "Shortest random prompt")->capture_default_str();
  cmd->add_option("--max-prompt-tokens", o->max_prompt_tokens, "Longest random prompt")->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens generated per choice")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object instead of the table");
  cmd->add_option("--draft-model", o->draft_model,
                  "Draft model of the speculative-decoding row (same vocabulary; default: the model itself)");
  cmd->add_option("--inject-fault", o->inject_fault,
                  "Negative control: 'batch-size' nudges logits by the step's batch size, which the "
                  "harness must report as mismatches");
  cmd->callback([o] { run_check(*o); });
}

}  // namespace ditto
