#include "engine/invariance_check.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <functional>
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
    for (size_t i = 0; i < prompts_.size(); ++i) work_all_ += case_work(i);
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
      add_phase("pooling rows", 1, 1.0, [this] { append_pooling_rows(); });
      run_plan();
      return std::move(rows_);
    }
    make_plan();
    run_plan();
    return std::move(rows_);
  }

  // The pooling rows (pooling_invariance_check.h), beside this check's random generation traffic.
  void append_pooling_rows() {
    std::vector<PromptInput> traffic_prompts;
    std::vector<SamplingParams> traffic_params;
    for (const Case& c : traffic_) {
      traffic_prompts.push_back(c.prompt);
      traffic_params.push_back(c.params);
    }
    llm_.set_engine_args(base_);
    for (InvarianceRow& r :
         check_pooling_invariance(llm_, base_, prompts_, traffic_prompts, traffic_params, o_.seed, fault_)) {
      r.description =
          "Each prompt's pooled output (embedding or score) under this condition, compared bit for bit with the same "
          "prompt pooled alone.";
      rows_.push_back(std::move(r));
    }
  }

 private:
  // One step of the run: `rows` rows (planned), its cost `weight` times the first batched row's.
  struct Phase {
    std::string label;
    int64_t rows = 1;
    double weight = 0.0;
    std::function<void()> run;
    bool alone = false;  // costed from the reference pass instead (phase_seconds)
  };

  // The tokens a case computes: its prompt (as given; text at ~4 bytes a token) and its choices.
  double case_work(size_t i) const {
    const PromptInput& p = prompts_[i];
    const double prompt =
        p.token_ids ? static_cast<double>(p.token_ids->size()) : static_cast<double>(p.text ? p.text->size() : 0) / 4.0;
    return prompt + static_cast<double>(std::max<int64_t>(1, params_[i].n) * o_.max_tokens);
  }

  void add_phase(std::string label, int64_t rows, double weight, std::function<void()> run, bool alone = false) {
    plan_.push_back(
        Phase{.label = std::move(label), .rows = rows, .weight = weight, .run = std::move(run), .alone = alone});
  }

  // Every phase of the run in order, with its planned rows and weight: seconds as a multiple of the
  // first batched row's (the reference pass: its own estimate). The weights are what the phases
  // cost beside that row on 2-layer test models (docs/INVARIANCE.md): more steps at small budgets,
  // the prompts twice for the prefix cache, the draft model's forward steps, full-vocabulary
  // logprobs at every position when re-scoring (the cases with logprobs, their share of the work),
  // and for most a new engine (KV cache, and a model for the thread row).
  void make_plan() {
    double logprob_work = 0.0;
    for (size_t i = 0; i < prompts_.size(); ++i)
      if (params_[i].logprobs) logprob_work += case_work(i);
    const double logprob_share = logprob_work / std::max(work_all_, 1.0);
    add_phase(
        "each case alone (reference)", 0, 0.0, [this] { run_alone(); }, /*alone=*/true);
    add_phase("structured outputs", 1, 0.0, [this] { structured_outputs_row(); });
    add_phase("batch of 1 vs all", 1, 0.0, [this] { batch_row(); });  // ran with the reference pass
    add_phase("shuffled order", 1, 1.0, [this] { shuffled_row(); });
    add_phase("with random co-running traffic", 1, 1.3, [this] { traffic_row(); });
    for (const auto& [budget, weight] : {std::pair<int64_t, double>{16, 2.2}, {64, 1.6}, {8192, 1.3}})
      add_phase("max_num_batched_tokens " + std::to_string(budget), 1, weight, [this, budget = budget] {
        check_with("max_num_batched_tokens " + std::to_string(budget),
                   "Every case in one batch whose engine steps compute at most " + std::to_string(budget) +
                       " tokens (chunked prefill), compared with the case run alone.",
                   identity_, [&](EngineArgs& a) { a.max_num_batched_tokens = budget; });
      });
    add_phase("prefix cache", 3, 5.0, [this] { prefix_cache_rows(); });
    add_phase("preemption", 1, 2.0, [this] { preemption_row(); });
    add_phase("speculative decoding", 2, 5.0, [this] {
      speculative_rows();
      llm_.set_engine_args(base_);
    });
    const double other_threads = base_.threads == 1 ? 2.0 : 1.0;
    add_phase(
        "threads", base_.tensor_parallel_size > 1 ? 2 : 1,
        1.0 + 0.75 * static_cast<double>(base_.threads) / other_threads + (base_.tensor_parallel_size > 1 ? 1.0 : 0.0),
        [this] { process_rows(); });
    add_phase("decode vs re-scored logprobs", 1, 1.5 * logprob_share, [this] { rescore_row(); });
    add_phase("logprobs modes", 3, 8.0 * logprob_share, [this] { logprobs_mode_rows(); });
    add_phase(
        "beam search", 1, 0.0, [this] { beam_search_row(); }, /*alone=*/true);
    if (llm_.pooler().pooling) add_phase("pooling rows", 1, 2.0, [this] { append_pooling_rows(); });
  }

  // The plan's estimated seconds of phase k (before calibration: weights of 1 s, for the bar only).
  // The reference pass: its cases alone and the first batch; beam search: its decode steps (7
  // searches of 3 beams, up to 8 tokens) at the reference pass's seconds per step.
  double phase_seconds(size_t k) const {
    const Phase& p = plan_[k];
    if (!p.alone) return p.weight * batch_seconds_;
    if (k == 0) return alone_seconds_ + batch_seconds_;
    const double alone_steps = static_cast<double>(prompts_.size()) * static_cast<double>(o_.max_tokens + 1);
    return alone_seconds_ * 7.0 * static_cast<double>(std::min<int64_t>(o_.max_tokens, 8)) / alone_steps;
  }

  // Reports progress within phase `current` (cases_done of cases_total).
  void report(size_t current, int64_t cases_done, int64_t cases_total, bool calibrated = false) {
    if (!o_.on_progress) return;
    double total = 0.0;
    double done = 0.0;
    int64_t rows_total = 0;
    for (size_t k = 0; k < plan_.size(); ++k) {
      total += phase_seconds(k);
      rows_total += plan_[k].rows;
      if (k < current) done += phase_seconds(k);
    }
    if (current < plan_.size()) {  // a phase of several rows: the rows it finished, then the cases of the next
      const auto rows = static_cast<double>(std::max<int64_t>(1, plan_[current].rows));
      const auto finished = static_cast<double>(rows_.size() - phase_first_row_);
      const double cases = cases_total > 0 ? static_cast<double>(cases_done) / static_cast<double>(cases_total) : 0.0;
      done += phase_seconds(current) * std::min(1.0, (finished + cases) / rows);
    }
    InvarianceProgress p;
    p.rows_done = static_cast<int64_t>(rows_.size());
    p.rows_total = std::max(rows_total, p.rows_done);
    p.phase = current < plan_.size() ? plan_[current].label : "done";
    p.cases_done = cases_done;
    p.cases_total = cases_total;
    p.fraction = total > 0 ? std::min(1.0, done / total) : 1.0;
    p.estimated_seconds = calibrated_ ? total : -1.0;
    p.calibrated = calibrated;
    o_.on_progress(p);
  }

  void run_plan() {
    for (phase_ = 0; phase_ < plan_.size(); ++phase_) {
      phase_first_row_ = rows_.size();
      report(phase_, 0, 0);
      plan_[phase_].run();
    }
    report(plan_.size(), 0, 0);
  }

  // GenerateOptions whose on_step reports the phase's requests done.
  GenerateOptions step_progress() {
    GenerateOptions options;
    if (o_.on_progress)
      options.on_step = [this](const GenerateProgress& at) {
        report(phase_, static_cast<int64_t>(at.done), static_cast<int64_t>(at.total));
        return true;
      };
    return options;
  }

  // Reference: every request alone (batch of one), roomy cache, default budget, computed whole
  // (the prefix cache emptied before each).
  // Between the first calibration_cases() and the others, every case at once (the first batched
  // row's run): the estimate is the first cases' seconds alone per token times every case's tokens,
  // plus that batch's seconds times each later phase's weight.
  void run_alone() {
    const size_t k = calibration_cases();
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < prompts_.size(); ++i) {
      report(phase_, static_cast<int64_t>(i), static_cast<int64_t>(prompts_.size()));
      llm_.reset_prefix_cache();
      std::vector<GenerateResult> r = llm_.generate({prompts_[i]}, {params_[i]}, {}, fault_);
      if (r[0].error) throw_invalid_argument("prompt " + std::to_string(i) + ": " + *r[0].error);
      alone_.push_back(std::move(r[0]));
      if (i + 1 != k) continue;
      double work = 0.0;
      for (size_t j = 0; j < k; ++j) work += case_work(j);
      alone_seconds_ = seconds_since(start) * work_all_ / std::max(work, 1.0);
      start = std::chrono::steady_clock::now();
      all_at_once_ = run_cases(identity_, {}, llm_, /*warm=*/false);
      batch_seconds_ = seconds_since(start);
      llm_.reset_prefix_cache();
      calibrated_ = true;
      report(phase_, static_cast<int64_t>(k), static_cast<int64_t>(prompts_.size()), /*calibrated=*/true);
    }
  }

  // One of each of the seven sampling kinds.
  size_t calibration_cases() const { return std::min<size_t>(prompts_.size(), 7); }

  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  // Each constrained case's outputs (alone) walked through a fresh matcher of its constraint: every
  // token allowed where it stands, and no choice ended for want of an allowed token. (The other
  // rows compare these outputs, bit for bit, under every condition.)
  void structured_outputs_row() {
    InvarianceRow row{.name = "structured outputs: each output satisfies its constraint",
                      .description =
                          "Each constrained case's output alone (JSON Schema, regex, choice, JSON object "
                          "or grammar) walked token by token through a fresh matcher of its "
                          "constraint: every token must be allowed where it stands."};
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].structured_outputs) continue;
      const auto grammar =
          StructuredOutputGrammar::compile(*params_[i].structured_outputs, llm_.input_processor().grammar_vocabulary());
      for (const CompletionOutput& c : alone_[i].output.outputs) {
        ++row.cases;
        row.tokens += static_cast<int64_t>(c.token_ids.size());
        auto m = grammar->new_matcher();
        bool ok = c.finish_reason != "error";
        size_t accepted = 0;  // tokens allowed before the first refused one
        while (ok && accepted < c.token_ids.size() && m->accept(c.token_ids[accepted])) ++accepted;
        ok = ok && accepted == c.token_ids.size();
        if (!ok) {
          ++row.mismatches;
          row.first_divergence.push_back(static_cast<int64_t>(accepted));
        }
      }
    }
    if (row.cases == 0) row.note = "no constrained cases: the model has no tokenizer";
    rows_.push_back(std::move(row));
  }

  // Runs `order` of the cases (then `extra` requests, not compared) on `engine` and compares. The
  // prefix cache starts empty (the LLMEngine keeps it between calls), so each row tests only what
  // it names, unless `warm`: then it holds what the previous call left.
  void check(const std::string& name, const std::string& what, const std::vector<size_t>& order,
             const std::vector<Case>& extra = {}, LLMEngine* other = nullptr, bool warm = false) {
    add_row(name, what, order, run_cases(order, extra, other ? *other : llm_, warm));
  }

  // What one row's generate() returned, and what the engine did.
  struct RowRun {
    std::vector<GenerateResult> got;  // by position in the order, then the extra requests
    std::string note;
    int64_t spec_decode_num_draft_tokens = 0;
    int64_t spec_decode_num_accepted_tokens = 0;
  };

  RowRun run_cases(const std::vector<size_t>& order, const std::vector<Case>& extra, LLMEngine& engine, bool warm) {
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
    RowRun run;
    run.got = engine.generate(ps, pp, step_progress(), fault_);
    run.note = engine_note(engine);
    run.spec_decode_num_draft_tokens = engine.last_stats().spec_decode_num_draft_tokens;
    run.spec_decode_num_accepted_tokens = engine.last_stats().spec_decode_num_accepted_tokens;
    return run;
  }

  // The row of `run` (order's cases first) against the outputs alone.
  void add_row(const std::string& name, const std::string& what, const std::vector<size_t>& order, const RowRun& run) {
    InvarianceRow row{.name = name, .description = what, .note = run.note};
    for (size_t k = 0; k < order.size(); ++k) {
      const GenerateResult& got = run.got[k];
      ++row.cases;
      row.tokens += tokens_of(got);
      const RequestOutput& ref = alone_[order[k]].output;
      if (got.error || !diff(got.output, ref).empty()) {
        ++row.mismatches;
        row.first_divergence.push_back(got.error ? 0 : first_divergence(got.output, ref));
      }
    }
    row.spec_decode_num_draft_tokens = run.spec_decode_num_draft_tokens;
    row.spec_decode_num_accepted_tokens = run.spec_decode_num_accepted_tokens;
    rows_.push_back(std::move(row));
  }

  // check() under engine arguments `edit` makes from the base ones.
  template <typename Edit>
  void check_with(const std::string& name, const std::string& what, const std::vector<size_t>& order, Edit edit,
                  const std::vector<Case>& extra = {}) {
    EngineArgs a = base_;
    edit(a);
    llm_.set_engine_args(a);
    check(name, what, order, extra);
  }

  // All at once, shuffled, and among random co-running requests (not compared).
  // Its batch ran amid the reference pass (run_alone), timed for the estimate.
  void batch_row() {
    add_row("batch of 1 vs all " + std::to_string(prompts_.size()) + " at once",
            "Every case submitted together in one batch, compared with the same case run alone (batch of one).",
            identity_, all_at_once_);
    all_at_once_ = RowRun{};
  }
  void shuffled_row() {
    shuffled_ = identity_;
    std::shuffle(shuffled_.begin(), shuffled_.end(), rng_);
    check("shuffled order", "Every case in one batch in a shuffled order, compared with the case run alone.",
          shuffled_);
  }
  void traffic_row() {
    make_traffic();
    mixed_order_ = shuffled_;
    std::shuffle(mixed_order_.begin(), mixed_order_.end(), rng_);
    check("with random co-running traffic",
          "Every case beside as many random requests of other lengths and sampling parameters sharing the engine "
          "steps, compared with the case run alone.",
          mixed_order_, traffic_);
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
    check_with("prefix cache cold, warm and partial hits",
               "Every prompt submitted twice, at most 4 running at once, so the copies hit the prefix cache the "
               "originals filled (prompts sharing a prefix hit partly), compared with the case run alone.",
               twice, [](EngineArgs& a) { a.max_num_seqs = 4; });
    // The same engine again (LLM::generate keeps it): every prompt's full blocks are cached.
    check("prefix cache kept from the previous generate() call",
          "Every case again on the engine whose prefix cache the previous row filled, compared with the case run "
          "alone.",
          identity_, {}, nullptr, /*warm=*/true);
    check_with("prefix caching off", "Every case with prefix caching disabled, compared with the case run alone.",
               identity_, [](EngineArgs& a) {
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
    check_with("KV cache of " + std::to_string(need) + " blocks (preemption)",
               "Every case in a KV cache just big enough for the largest request, so running requests are preempted "
               "and recomputed, compared with the case run alone.",
               identity_, [&](EngineArgs& a) {
                 a.kv_cache_memory = need * mc.num_hidden_layers * 2 * block * mc.num_key_value_heads * mc.head_dim * 2;
               });
  }

  // Speculative decoding beside the co-running traffic: each proposer's guesses verified.
  void speculative_rows() {
    check_with(
        "speculative decoding on vs off (ngram)",
        "Every case beside random traffic with n-gram speculative decoding (4 guessed tokens a step, verified), "
        "compared with the case run alone without it.",
        mixed_order_,
        [](EngineArgs& a) {
          a.speculative_config = parse_speculative_config(
              R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
        },
        traffic_);
    const std::string draft = o_.draft_model.empty() ? base_.model : o_.draft_model;
    check_with(
        "speculative decoding on vs off (draft model)",
        "Every case beside random traffic with a draft model guessing 3 tokens a step, verified, compared with the "
        "case run alone without it.",
        mixed_order_,
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
      check("threads " + std::to_string(base_.threads) + " vs " + std::to_string(one.threads),
            "Every case in one batch on another engine with " + std::to_string(one.threads) +
                " threads, compared with the case run alone on " + std::to_string(base_.threads) + ".",
            identity_, {}, &other);
    }
    if (base_.tensor_parallel_size > 1) {
      EngineArgs whole_args = base_;
      whole_args.tensor_parallel_size = 1;
      LLMEngine whole(whole_args);
      check("tensor-parallel size " + std::to_string(base_.tensor_parallel_size) + " vs one process",
            "Every case in one batch on the whole model in one process, compared with the case run alone split "
            "over the tensor-parallel ranks.",
            identity_, {}, &whole);
    }
  }

  // Decode logprobs vs the finished sequence re-scored with prompt_logprobs.
  void rescore_row() {
    InvarianceRow row{.name = "decode logprob vs re-scored prompt logprob",
                      .description =
                          "Each logprob reported while decoding a case alone, compared with the same "
                          "token's prompt logprob when the finished sequence is fed back as a prompt."};
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
        rescore.empty() ? std::vector<GenerateResult>{} : llm_.generate(rescore, {sp}, step_progress(), fault_);
    for (size_t k = 0; k < got.size(); ++k) {
      const RequestOutput& out = alone_[which[k].first].output;
      const CompletionOutput& c = out.outputs[which[k].second];
      ++row.cases;
      int64_t first = -1;
      for (size_t t = 0; t < c.token_ids.size(); ++t) {
        ++row.tokens;
        const auto& e = got[k].output.prompt_logprobs.at(out.prompt_token_ids.size() + t);
        if (!e || e->token.token_id != c.token_ids[t] ||
            std::bit_cast<uint32_t>(e->token.logprob) != std::bit_cast<uint32_t>(c.logprobs.at(t).token.logprob)) {
          ++row.mismatches;
          if (first < 0) first = static_cast<int64_t>(t);
        }
      }
      if (first >= 0) row.first_divergence.push_back(first);
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
      InvarianceRow row{.name = std::string("logprobs_mode ") + logprobs_mode_name(mode) + ": decode vs re-scored",
                        .description = std::string("With logprobs_mode ") + logprobs_mode_name(mode) +
                                       ", the cases with logprobs in one shuffled batch: their tokens compared with "
                                       "raw_logprobs' alone, and each decode logprob with the finished choice "
                                       "re-scored as it was sampled."};
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
        int64_t first = 0;  // the first token where some choice differs
        for (size_t c = 0; same && c < out.outputs.size(); ++c) {
          const std::vector<int32_t>& a = out.outputs[c].token_ids;
          const std::vector<int32_t>& b = ref.outputs[c].token_ids;
          same = a == b;
          if (!same) first = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
        }
        if (!same) {
          ++row.mismatches;
          row.first_divergence.push_back(first);
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
          row.first_divergence.push_back(0);
          continue;
        }
        int64_t first = -1;
        for (size_t t = 0; t < c.token_ids.size(); ++t) {
          ++row.tokens;
          const auto& e = scored[r].output.prompt_logprobs.at(out.prompt_token_ids.size() + t);
          if (!e || e->token.token_id != c.token_ids[t] ||
              std::bit_cast<uint32_t>(e->token.logprob) != std::bit_cast<uint32_t>(c.logprobs.at(t).token.logprob) ||
              e->token.rank != c.logprobs.at(t).token.rank) {
            ++row.mismatches;
            if (first < 0) first = static_cast<int64_t>(t);
          }
        }
        if (first >= 0) row.first_divergence.push_back(first);
      }
      rows_.push_back(std::move(row));
    }
    llm_.set_engine_args(base_);
  }

  // Beam search (vLLM's, width 3, sampled candidates at temperature 0.7): each of the first cases'
  // prompts searched alone, then all of them in one search — whose steps batch every prompt's
  // beams together — compared beam by beam: tokens, cumulative logprob and every entry's bits.
  void beam_search_row() {
    InvarianceRow row{.name = "beam search: alone vs all prompts at once",
                      .description =
                          "Beam search (width 3, sampled at temperature 0.7) on each of the first prompts "
                          "alone, compared beam by beam with one search over all of them at once."};
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
      int64_t first = 0;  // the first generated position of the beam that differs
      for (size_t k = 0; same && k < a.size(); ++k) {
        row.tokens += static_cast<int64_t>(a[k].tokens.size()) - a[k].num_prompt_tokens;
        const size_t shared = std::min(a[k].tokens.size(), b[k].tokens.size());
        size_t t = static_cast<size_t>(std::max<int64_t>(0, a[k].num_prompt_tokens));
        while (t < shared && a[k].tokens[t] == b[k].tokens[t]) ++t;
        first = static_cast<int64_t>(t) - a[k].num_prompt_tokens;
        same = a[k].tokens == b[k].tokens &&
               std::bit_cast<uint64_t>(a[k].cum_logprob) == std::bit_cast<uint64_t>(b[k].cum_logprob) &&
               a[k].logprobs.size() == b[k].logprobs.size();
        for (size_t u = 0; same && u < a[k].logprobs.size(); ++u) {
          same = std::bit_cast<uint32_t>(a[k].logprobs[u].token.logprob) ==
                 std::bit_cast<uint32_t>(b[k].logprobs[u].token.logprob);
          if (!same) first = std::min(first, static_cast<int64_t>(u));
        }
      }
      if (!same) {
        ++row.mismatches;
        row.first_divergence.push_back(first);
      }
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
  std::vector<size_t> shuffled_;
  std::vector<size_t> mixed_order_;
  std::vector<InvarianceRow> rows_;
  std::vector<Phase> plan_;
  size_t phase_ = 0;            // the phase running
  size_t phase_first_row_ = 0;  // rows_.size() when it started
  double work_all_ = 0.0;       // every case's tokens: one batched row's work
  double alone_seconds_ = 2.0;  // the reference pass's estimate (2 units until calibrated)
  double batch_seconds_ = 1.0;  // the first batched row's measured seconds (1 unit until calibrated)
  RowRun all_at_once_;          // that row's run, until batch_row() compares it
  bool calibrated_ = false;
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
