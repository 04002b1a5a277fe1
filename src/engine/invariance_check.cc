#include "engine/invariance_check.h"

#include <algorithm>
#include <bit>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "engine/beam_search.h"
#include "engine/llm_engine.h"
#include "engine/output_diff.h"
#include "engine/pooling_invariance_check.h"
#include "engine/speculative.h"
#include "engine/structured_output.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

struct Case {
  PromptInput prompt;
  SamplingParams params;
};

// The given prompts, or random token ids of lengths spread over [min, max], a third of them
// sharing a common prefix (partial prefix-cache hits); Philox-drawn, so the same seed gives the
// same set on any machine.
std::vector<Case> make_cases(const InvarianceCheckOptions& o, int64_t vocab) {
  auto rand = [&](uint64_t i, uint64_t j) {
    return philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(j), 0x43484b49u, 0},
                         {static_cast<uint32_t>(o.seed), static_cast<uint32_t>(o.seed >> 32)})[0];
  };
  const int64_t n = o.prompts.empty() ? o.num_prompts : static_cast<int64_t>(o.prompts.size());
  std::vector<int32_t> shared;
  for (int64_t j = 0; j < std::min<int64_t>(o.max_prompt_tokens / 2, 200); ++j)
    shared.push_back(static_cast<int32_t>(rand(1u << 30, static_cast<uint64_t>(j)) % vocab));
  std::vector<Case> cases;
  for (int64_t i = 0; i < n; ++i) {
    Case c{.prompt = {}, .params = contract_sampling_params(i)};
    c.params.max_tokens = o.max_tokens;
    c.params.ignore_eos = true;  // every case runs to max_tokens or a stop token id
    if (!c.params.seed) c.params.seed = 1000 + static_cast<uint64_t>(i);
    if (!o.prompts.empty()) {
      c.prompt = o.prompts[static_cast<size_t>(i)];
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
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

StructuredOutputsParams contract_structured_outputs(int64_t k) {
  StructuredOutputsParams so;
  switch (k % 6) {
    case 0:
      so.json = R"({"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
        "ok": {"type": "boolean"}}, "required": ["id", "tags", "ok"], "additionalProperties": false})";
      break;
    case 1: so.regex = "[a-z]{2,6}( [0-9]{1,3}){1,3}"; break;
    case 2: so.choice = std::vector<std::string>{"alpha", "beta", "gamma delta"}; break;
    case 3:
      so.json_object = true;
      so.disable_any_whitespace = true;
      break;
    case 4: so.grammar = "start: \"(\" expr \")\"\nexpr: NUMBER (\"+\" NUMBER)*\nNUMBER: /[0-9]{1,3}/\n"; break;
    default:
      so.json = R"({"type": "array", "minItems": 2, "maxItems": 4, "items": {"anyOf": [
        {"type": "string", "pattern": "^[A-Z][a-z]{1,8}$"}, {"type": "number", "minimum": -5, "maximum": 5}]}})";
      break;
  }
  return so;
}

bool constrained_case(int64_t i) {
  const int64_t kind = i % 7;
  return i % 2 == 0 && (kind == 0 || kind == 1 || kind == 2 || kind == 6);
}

namespace {

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

// What the engine did in its last generate(), for a row's note.
std::string engine_note(const LLMEngine& engine) {
  const LLM::Stats& s = engine.last_stats();
  std::string note = std::to_string(s.steps) + " steps";
  if (s.preemptions > 0) note += ", " + std::to_string(s.preemptions) + " preemptions";
  if (s.prefix_hit_tokens > 0) note += ", " + std::to_string(s.prefix_hit_tokens) + " prefix-cache hit tokens";
  if (engine.args().speculative_config.enabled())
    note += ", " + std::to_string(s.spec_decode_num_accepted_tokens) + " of " +
            std::to_string(s.spec_decode_num_draft_tokens) + " guesses accepted";
  return note;
}

// The rows, each against the reference outputs of the cases run alone.
class Checker {
 public:
  Checker(const EngineArgs& base, const InvarianceCheckOptions& o)
      : o_(o),
        base_(base),
        llm_(base),
        fault_(o.inject_batch_size_fault ? EngineConfig::LogitsHook(batch_size_fault) : nullptr),
        rng_(o.seed) {
    for (Case& c : make_cases(o, llm_.model().config().vocab_size)) {
      prompts_.push_back(std::move(c.prompt));
      params_.push_back(std::move(c.params));
    }
    for (size_t i = 0; i < prompts_.size(); ++i) identity_.push_back(i);
    // Structured outputs join the mix when the model has a tokenizer (the grammar engine needs the
    // vocabulary's bytes): every row below then covers constrained requests beside unconstrained
    // ones and ones of other constraints.
    if (llm_.has_tokenizer() && !llm_.eos_token_ids().empty())
      for (size_t i = 0; i < params_.size(); ++i)
        if (constrained_case(static_cast<int64_t>(i)))
          params_[i].structured_outputs = contract_structured_outputs(static_cast<int64_t>(i) / 2);
  }

  std::vector<InvarianceRow> run() {
    if (o_.pooling_only) {
      if (!llm_.pooler().pooling)
        throw_invalid_argument(
            "check-invariance --pooling-only: the model does not pool (give --runner pooling or "
            "--task embed|score)");
      make_traffic();
      return pooling_rows();
    }
    run_alone();
    structured_outputs_row();
    order_rows();
    for (int64_t budget : {16, 64, 8192})
      check_with("max_num_batched_tokens " + std::to_string(budget), identity_,
                 [&](EngineArgs& a) { a.max_num_batched_tokens = budget; });
    prefix_cache_rows();
    preemption_row();
    speculative_rows();
    llm_.set_engine_args(base_);
    process_rows();
    rescore_row();
    logprobs_mode_rows();
    beam_search_row();
    if (llm_.pooler().pooling)
      for (InvarianceRow& r : pooling_rows()) rows_.push_back(std::move(r));
    return std::move(rows_);
  }

  // The pooling rows (pooling_invariance_check.h), beside this check's random generation traffic.
  std::vector<InvarianceRow> pooling_rows() {
    std::vector<PromptInput> traffic_prompts;
    std::vector<SamplingParams> traffic_params;
    for (const Case& c : traffic_) {
      traffic_prompts.push_back(c.prompt);
      traffic_params.push_back(c.params);
    }
    llm_.set_engine_args(base_);
    return check_pooling_invariance(llm_, base_, prompts_, traffic_prompts, traffic_params, o_.seed, fault_);
  }

 private:
  // Reference: every request alone (batch of one), roomy cache, default budget, computed whole
  // (the prefix cache emptied before each).
  void run_alone() {
    for (size_t i = 0; i < prompts_.size(); ++i) {
      llm_.reset_prefix_cache();
      std::vector<GenerateResult> r = llm_.generate({prompts_[i]}, {params_[i]}, {}, fault_);
      if (r[0].error) throw_invalid_argument("prompt " + std::to_string(i) + ": " + *r[0].error);
      alone_.push_back(std::move(r[0]));
    }
  }

  // Each constrained case's outputs (alone) walked through a fresh matcher of its constraint: every
  // token allowed where it stands, and no choice ended for want of an allowed token. (The other
  // rows compare these outputs, bit for bit, under every condition.)
  void structured_outputs_row() {
    InvarianceRow row{.name = "structured outputs: each output satisfies its constraint"};
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].structured_outputs) continue;
      const auto grammar =
          StructuredOutputGrammar::compile(*params_[i].structured_outputs, llm_.input_processor().grammar_vocabulary());
      for (const CompletionOutput& c : alone_[i].output.outputs) {
        ++row.cases;
        row.tokens += static_cast<int64_t>(c.token_ids.size());
        auto m = grammar->new_matcher();
        bool ok = c.finish_reason != "error";
        for (int32_t t : c.token_ids) ok = ok && m->accept(t);
        if (!ok) ++row.mismatches;
      }
    }
    if (row.cases == 0) row.note = "no constrained cases: the model has no tokenizer";
    rows_.push_back(std::move(row));
  }

  // Runs `order` of the cases (then `extra` requests, not compared) on `engine` and compares. The
  // prefix cache starts empty (the LLMEngine keeps it between calls), so each row tests only what
  // it names, unless `warm`: then it holds what the previous call left.
  void check(const std::string& name, const std::vector<size_t>& order, const std::vector<Case>& extra = {},
             LLMEngine* other = nullptr, bool warm = false) {
    LLMEngine& engine = other ? *other : llm_;
    if (!warm) engine.reset_prefix_cache();
    std::vector<PromptInput> ps;
    std::vector<SamplingParams> pp;
    for (size_t i : order) {
      ps.push_back(prompts_[i]);
      pp.push_back(params_[i]);
    }
    for (const Case& c : extra) {
      ps.push_back(c.prompt);
      pp.push_back(c.params);
    }
    const std::vector<GenerateResult> got = engine.generate(ps, pp, {}, fault_);
    InvarianceRow row{.name = name, .note = engine_note(engine)};
    for (size_t k = 0; k < order.size(); ++k) {
      ++row.cases;
      row.tokens += tokens_of(got[k]);
      if (got[k].error || !diff(got[k].output, alone_[order[k]].output).empty()) ++row.mismatches;
    }
    row.spec_decode_num_draft_tokens = engine.last_stats().spec_decode_num_draft_tokens;
    row.spec_decode_num_accepted_tokens = engine.last_stats().spec_decode_num_accepted_tokens;
    rows_.push_back(std::move(row));
  }

  // check() under engine arguments `edit` makes from the base ones.
  template <typename Edit>
  void check_with(const std::string& name, const std::vector<size_t>& order, Edit edit,
                  const std::vector<Case>& extra = {}) {
    EngineArgs a = base_;
    edit(a);
    llm_.set_engine_args(a);
    check(name, order, extra);
  }

  // All at once, shuffled, and among random co-running requests (not compared).
  void order_rows() {
    check("batch of 1 vs all " + std::to_string(prompts_.size()) + " at once", identity_);
    std::vector<size_t> shuffled = identity_;
    std::shuffle(shuffled.begin(), shuffled.end(), rng_);
    check("shuffled order", shuffled);
    make_traffic();
    mixed_order_ = shuffled;
    std::shuffle(mixed_order_.begin(), mixed_order_.end(), rng_);
    check("with random co-running traffic", mixed_order_, traffic_);
  }

  // Random generation requests to co-run beside the compared ones (not compared themselves).
  void make_traffic() {
    const int64_t vocab = llm_.model().config().vocab_size;
    for (size_t k = 0; k < prompts_.size(); ++k) {
      Case c;
      std::vector<int32_t> ids(1 + rng_() % static_cast<uint64_t>(o_.max_prompt_tokens));
      for (int32_t& t : ids) t = static_cast<int32_t>(rng_() % static_cast<uint64_t>(vocab));
      c.prompt.token_ids = ids;
      c.params.temperature = static_cast<float>(rng_() % 10) / 8.0f;
      c.params.max_tokens = 1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(o_.max_tokens * 2));
      c.params.seed = rng_();
      traffic_.push_back(std::move(c));
    }
  }

  // Every prompt twice, the copies admitted after the originals computed; then caching off.
  void prefix_cache_rows() {
    std::vector<size_t> twice = identity_;
    twice.insert(twice.end(), identity_.begin(), identity_.end());
    check_with("prefix cache cold, warm and partial hits", twice, [](EngineArgs& a) { a.max_num_seqs = 4; });
    // The same engine again (LLM::generate keeps it): every prompt's full blocks are cached.
    check("prefix cache kept from the previous generate() call", identity_, {}, nullptr, /*warm=*/true);
    check_with("prefix caching off", identity_, [](EngineArgs& a) {
      a.max_num_seqs = 4;
      a.enable_prefix_caching = false;
    });
  }

  // A KV cache just big enough for the largest request: preemption.
  void preemption_row() {
    int64_t max_prompt = 0;  // the longest prompt as tokenized (text prompts included)
    for (const GenerateResult& r : alone_)
      max_prompt = std::max(max_prompt, static_cast<int64_t>(r.output.prompt_token_ids.size()));
    const ModelConfig& mc = llm_.model().config();
    const int64_t block = base_.block_size;
    const int64_t need = (max_prompt + o_.max_tokens + block - 1) / block + 2;
    check_with("KV cache of " + std::to_string(need) + " blocks (preemption)", identity_, [&](EngineArgs& a) {
      a.kv_cache_memory = need * mc.num_hidden_layers * 2 * block * mc.num_key_value_heads * mc.head_dim * 2;
    });
  }

  // Speculative decoding beside the co-running traffic: each proposer's guesses verified.
  void speculative_rows() {
    check_with(
        "speculative decoding on vs off (ngram)", mixed_order_,
        [](EngineArgs& a) {
          a.speculative_config = parse_speculative_config(
              R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
        },
        traffic_);
    const std::string draft = o_.draft_model.empty() ? base_.model : o_.draft_model;
    check_with(
        "speculative decoding on vs off (draft model)", mixed_order_,
        [&](EngineArgs& a) {
          a.speculative_config =
              SpeculativeConfig{.method = "draft_model", .model = draft, .num_speculative_tokens = 3};
        },
        traffic_);
  }

  // Another thread count in another engine; the whole model in this process against the split one.
  void process_rows() {
    EngineArgs one = base_;
    one.threads = base_.threads == 1 ? 2 : 1;
    {
      LLMEngine other(one);
      check("threads " + std::to_string(base_.threads) + " vs " + std::to_string(one.threads), identity_, {}, &other);
    }
    if (base_.tensor_parallel_size > 1) {
      EngineArgs whole_args = base_;
      whole_args.tensor_parallel_size = 1;
      LLMEngine whole(whole_args);
      check("tensor-parallel size " + std::to_string(base_.tensor_parallel_size) + " vs one process", identity_, {},
            &whole);
    }
  }

  // Decode logprobs vs the finished sequence re-scored with prompt_logprobs.
  void rescore_row() {
    InvarianceRow row{.name = "decode logprob vs re-scored prompt logprob"};
    std::vector<PromptInput> rescore;
    std::vector<std::pair<size_t, size_t>> which;  // (case, choice)
    for (size_t i = 0; i < prompts_.size(); ++i) {
      if (!params_[i].logprobs) continue;
      const RequestOutput& out = alone_[i].output;
      for (size_t c = 0; c < out.outputs.size(); ++c) {
        std::vector<int32_t> ids = out.prompt_token_ids;
        ids.insert(ids.end(), out.outputs[c].token_ids.begin(), out.outputs[c].token_ids.end());
        if (static_cast<int64_t>(ids.size()) >= llm_.model().config().max_position_embeddings) continue;
        rescore.push_back(PromptInput{.token_ids = std::move(ids)});
        which.emplace_back(i, c);
      }
    }
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.max_tokens = 1;
    sp.prompt_logprobs = 0;
    const std::vector<GenerateResult> got =
        rescore.empty() ? std::vector<GenerateResult>{} : llm_.generate(rescore, {sp}, {}, fault_);
    for (size_t k = 0; k < got.size(); ++k) {
      const RequestOutput& out = alone_[which[k].first].output;
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
    rows_.push_back(std::move(row));
  }

  // Per logprobs_mode other than raw_logprobs: the cases with logprobs all at once, shuffled, then
  // each finished choice re-scored as it was sampled (GenerateOptions::rescore_from). The tokens
  // must be those of raw_logprobs alone (a mode changes what is reported, never what is drawn) and
  // each decode entry the re-scored one, bit for bit.
  void logprobs_mode_rows() {
    std::vector<size_t> order;
    for (size_t i = 0; i < prompts_.size(); ++i)
      if (params_[i].logprobs) order.push_back(i);
    std::shuffle(order.begin(), order.end(), rng_);
    for (LogprobsMode mode :
         {LogprobsMode::kRawLogits, LogprobsMode::kProcessedLogprobs, LogprobsMode::kProcessedLogits}) {
      EngineArgs a = base_;
      a.logprobs_mode = mode;
      llm_.set_engine_args(a);
      InvarianceRow row{.name = std::string("logprobs_mode ") + logprobs_mode_name(mode) + ": decode vs re-scored"};
      std::vector<PromptInput> ps;
      std::vector<SamplingParams> pp;
      for (size_t i : order) {
        ps.push_back(prompts_[i]);
        pp.push_back(params_[i]);
      }
      const std::vector<GenerateResult> got = llm_.generate(ps, pp, {}, fault_);
      std::vector<PromptInput> rescore;
      std::vector<SamplingParams> rescore_params;
      GenerateOptions options;
      std::vector<std::pair<size_t, size_t>> which;  // (index in order, choice)
      for (size_t k = 0; k < got.size(); ++k) {
        const RequestOutput& out = got[k].output;
        const RequestOutput& ref = alone_[order[k]].output;
        ++row.cases;
        bool same = !got[k].error && out.outputs.size() == ref.outputs.size();
        for (size_t c = 0; same && c < out.outputs.size(); ++c)
          same = out.outputs[c].token_ids == ref.outputs[c].token_ids;
        if (!same) {
          ++row.mismatches;
          continue;
        }
        for (size_t c = 0; c < out.outputs.size(); ++c) {
          std::vector<int32_t> ids = out.prompt_token_ids;
          ids.insert(ids.end(), out.outputs[c].token_ids.begin(), out.outputs[c].token_ids.end());
          if (static_cast<int64_t>(ids.size()) >= llm_.model().config().max_position_embeddings) continue;
          SamplingParams sp = params_[order[k]];
          sp.n = 1;
          sp.max_tokens = std::max<int64_t>(1, sp.min_tokens);  // min_tokens stays: it shapes the rows
          sp.prompt_logprobs = 0;
          sp.truncate_prompt_tokens.reset();
          rescore.push_back(PromptInput{.token_ids = std::move(ids)});
          rescore_params.push_back(std::move(sp));
          options.rescore_from.push_back(static_cast<int64_t>(out.prompt_token_ids.size()));
          which.emplace_back(k, c);
        }
      }
      const std::vector<GenerateResult> scored =
          rescore.empty() ? std::vector<GenerateResult>{} : llm_.generate(rescore, rescore_params, options, fault_);
      for (size_t r = 0; r < scored.size(); ++r) {
        const RequestOutput& out = got[which[r].first].output;
        const CompletionOutput& c = out.outputs[which[r].second];
        if (scored[r].error) {
          row.mismatches += static_cast<int64_t>(c.token_ids.size());
          continue;
        }
        for (size_t t = 0; t < c.token_ids.size(); ++t) {
          ++row.tokens;
          const auto& e = scored[r].output.prompt_logprobs.at(out.prompt_token_ids.size() + t);
          if (!e || e->token.token_id != c.token_ids[t] ||
              std::bit_cast<uint32_t>(e->token.logprob) != std::bit_cast<uint32_t>(c.logprobs.at(t).token.logprob) ||
              e->token.rank != c.logprobs.at(t).token.rank)
            ++row.mismatches;
        }
      }
      rows_.push_back(std::move(row));
    }
    llm_.set_engine_args(base_);
  }

  // Beam search (vLLM's, width 3, sampled candidates at temperature 0.7): each of the first cases'
  // prompts searched alone, then all of them in one search — whose steps batch every prompt's
  // beams together — compared beam by beam: tokens, cumulative logprob and every entry's bits.
  void beam_search_row() {
    InvarianceRow row{.name = "beam search: alone vs all prompts at once"};
    BeamSearchParams bp;
    bp.beam_width = 3;
    bp.max_tokens = std::min<int64_t>(o_.max_tokens, 8);
    bp.temperature = 0.7f;
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < std::min<size_t>(alone_.size(), 6); ++i)
      prompts.push_back(alone_[i].output.prompt_token_ids);
    if (static_cast<int64_t>(2 * bp.beam_width) > llm_.args().max_logprobs) return;  // no room for the row
    llm_.set_engine_args(base_);
    const std::vector<BeamSearchOutput> together = beam_search_on(llm_, prompts, bp, o_.seed, fault_);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<BeamSearchOutput> alone = beam_search_on(llm_, {prompts[i]}, bp, o_.seed, fault_);
      ++row.cases;
      const auto& a = alone[0].sequences;
      const auto& b = together[i].sequences;
      bool same = a.size() == b.size();
      for (size_t k = 0; same && k < a.size(); ++k) {
        row.tokens += static_cast<int64_t>(a[k].tokens.size()) - a[k].num_prompt_tokens;
        same = a[k].tokens == b[k].tokens &&
               std::bit_cast<uint64_t>(a[k].cum_logprob) == std::bit_cast<uint64_t>(b[k].cum_logprob) &&
               a[k].logprobs.size() == b[k].logprobs.size();
        for (size_t t = 0; same && t < a[k].logprobs.size(); ++t)
          same = std::bit_cast<uint32_t>(a[k].logprobs[t].token.logprob) ==
                 std::bit_cast<uint32_t>(b[k].logprobs[t].token.logprob);
      }
      if (!same) ++row.mismatches;
    }
    rows_.push_back(std::move(row));
  }

  const InvarianceCheckOptions& o_;
  const EngineArgs base_;
  LLMEngine llm_;
  const EngineConfig::LogitsHook fault_;
  std::mt19937_64 rng_;
  std::vector<PromptInput> prompts_;
  std::vector<SamplingParams> params_;
  std::vector<size_t> identity_;
  std::vector<GenerateResult> alone_;  // by case
  std::vector<Case> traffic_;          // co-running requests, not compared
  std::vector<size_t> mixed_order_;
  std::vector<InvarianceRow> rows_;
};

}  // namespace

SamplingParams contract_sampling_params(int64_t i) {
  SamplingParams p;
  switch (i % 7) {
    case 0: p.temperature = 0.0f; break;
    case 1:
      p.temperature = 0.8f;
      p.seed = 1000 + static_cast<uint64_t>(i);
      p.n = 2;
      p.logprobs = 0;                                    // the chosen tokens' only
      p.cache_salt = "tenant-" + std::to_string(i % 2);  // salted prefixes beside unsalted ones
      break;
    case 2:
      p.temperature = 1.0f;
      p.seed = 42;
      p.top_p = 0.9f;
      p.logprobs = 3;
      p.logit_bias = {{7, 2.5f}, {11, -100.0f}, {13, 4.0f}};
      break;
    case 3:
      p.temperature = 0.7f;
      p.seed = 5;
      p.top_k = 5;
      p.repetition_penalty = 1.2f;
      p.bad_words_token_ids = {{7}, {13, 5}, {2, 3, 4}};
      p.truncate_prompt_tokens = 100;
      if (i % 2 == 1) p.truncation_side = "right";  // keeps the first 100
      break;
    case 4:
      p.temperature = 1.2f;
      p.seed = 9;
      p.min_p = 0.05f;
      p.frequency_penalty = 0.5f;
      p.presence_penalty = 0.3f;
      p.allowed_token_ids = std::vector<int32_t>{};
      for (int32_t id = 0; id < 96; id += 3) p.allowed_token_ids->push_back(id);  // within the smallest test vocabulary
      break;
    case 5:
      p.temperature = 0.0f;
      p.logprobs = 2;
      p.prompt_logprobs = 2;
      p.min_tokens = 3;
      break;
    default:
      p.temperature = 0.9f;
      p.seed = 77;
      p.n = 3;
      p.stop_token_ids = {11, 12};
      p.logprobs = 1;
      break;
  }
  return p;
}

std::vector<InvarianceRow> check_invariance(const EngineArgs& args, const InvarianceCheckOptions& options) {
  if (options.prompts.empty() && options.num_prompts < 1)
    throw_invalid_argument("check-invariance: num_prompts must be at least 1");
  if (options.min_prompt_tokens < 1 || options.max_prompt_tokens < options.min_prompt_tokens)
    throw_invalid_argument(
        "check-invariance: min_prompt_tokens / max_prompt_tokens (--min-prompt-tokens / --max-prompt-tokens): need 1 "
        "<= min <= max");
  if (options.max_tokens < 1) throw_invalid_argument("check-invariance: max_tokens must be at least 1");
  EngineArgs base = args;
  if (base.threads == 0) base.threads = 2;
  return Checker(base, options).run();
}

}  // namespace ditto
