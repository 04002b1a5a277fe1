#include "engine/pooling_invariance_check.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/output_diff.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

std::string pooling_id(size_t k) { return std::string("pooling ") + std::to_string(k); }

class PoolingChecker {
 public:
  PoolingChecker(LLMEngine& llm, const EngineArgs& base, const std::vector<PromptInput>& prompts,
                 const std::vector<PromptInput>& traffic_prompts, const std::vector<SamplingParams>& traffic_params,
                 uint64_t seed, EngineConfig::LogitsHook fault)
      : llm_(llm),
        base_(base),
        prompts_(prompts),
        traffic_prompts_(traffic_prompts),
        traffic_params_(traffic_params),
        rng_(seed),
        fault_(std::move(fault)) {
    const PoolerConfig& pooler = llm.pooler();
    for (size_t i = 0; i < prompts_.size(); ++i) {
      PoolingParams p;
      if (pooler.task == PoolingTask::kEmbed && i % 3 == 1) p.dimensions = std::max<int64_t>(1, pooler.hidden_size / 4);
      if (i % 3 == 2) p.use_activation = false;  // raw embedding, or the reranker's logit difference
      if (i % 5 == 4) p.truncate_prompt_tokens = 100;
      params_.push_back(p);
      identity_.push_back(i);
    }
  }

  std::vector<InvarianceRow> run() {
    for (size_t i = 0; i < prompts_.size(); ++i) {  // the reference: each alone, computed whole
      llm_.reset_prefix_cache();
      std::vector<GenerateResult> r = pool({i});
      if (r[0].error) throw_invalid_argument("prompt " + std::to_string(i) + " (pooling): " + *r[0].error);
      alone_.push_back(std::move(r[0].output));
    }
    const std::string kind = std::string("pooling (") + pooling_task_name(llm_.pooler().task) + ")";
    check(kind + ": batch of 1 vs all " + std::to_string(prompts_.size()) + " at once", identity_);
    std::vector<size_t> shuffled = identity_;
    std::shuffle(shuffled.begin(), shuffled.end(), rng_);
    check(kind + ": shuffled order", shuffled);
    beside_generation_row(kind, shuffled);
    for (int64_t budget : {16, 64})
      check_with(kind + ": max_num_batched_tokens " + std::to_string(budget), shuffled, [&](EngineArgs& a) {
        a.max_num_batched_tokens = budget;
        a.long_prefill_token_threshold = budget;
      });
    std::vector<size_t> twice = identity_;
    twice.insert(twice.end(), identity_.begin(), identity_.end());
    check_with(kind + ": prefix cache cold, warm and partial hits", twice, [](EngineArgs& a) { a.max_num_seqs = 4; });
    check(kind + ": prefix cache kept from the previous call", identity_, /*warm=*/true);
    preemption_row(kind);
    llm_.set_engine_args(base_);
    EngineArgs one = base_;
    one.threads = base_.threads == 1 ? 2 : 1;
    {
      LLMEngine other(one);
      check(kind + ": threads " + std::to_string(base_.threads) + " vs " + std::to_string(one.threads), identity_,
            false, &other);
    }
    if (base_.tensor_parallel_size > 1) {
      EngineArgs whole_args = base_;
      whole_args.tensor_parallel_size = 1;
      LLMEngine whole(whole_args);
      check(kind + ": tensor-parallel size " + std::to_string(base_.tensor_parallel_size) + " vs one process",
            identity_, false, &whole);
    }
    return std::move(rows_);
  }

 private:
  std::vector<GenerateResult> pool(const std::vector<size_t>& order, LLMEngine* other = nullptr) {
    std::vector<PromptInput> ps;
    std::vector<PoolingParams> pp;
    for (size_t i : order) {
      ps.push_back(prompts_[i]);
      pp.push_back(params_[i]);
    }
    GenerateOptions options;
    options.pooling = pp;
    return (other ? *other : llm_).generate(ps, {SamplingParams{}}, options, fault_);
  }

  void add_row(const std::string& name, const std::vector<size_t>& order, const std::vector<RequestOutput>& got,
               const std::string& note) {
    InvarianceRow row{.name = name, .note = note};
    for (size_t k = 0; k < order.size(); ++k) {
      ++row.cases;
      row.tokens += static_cast<int64_t>(alone_[order[k]].prompt_token_ids.size());
      if (!diff(got[k], alone_[order[k]]).empty()) {
        ++row.mismatches;
        row.first_divergence.push_back(first_divergence(got[k], alone_[order[k]]));
      }
    }
    rows_.push_back(std::move(row));
  }

  void check(const std::string& name, const std::vector<size_t>& order, bool warm = false, LLMEngine* other = nullptr) {
    LLMEngine& engine = other ? *other : llm_;
    if (!warm) engine.reset_prefix_cache();
    std::vector<GenerateResult> got = pool(order, other);
    std::vector<RequestOutput> outputs;
    for (GenerateResult& g : got) outputs.push_back(g.error ? RequestOutput{} : std::move(g.output));
    const LLM::Stats& s = engine.last_stats();
    std::string note = std::to_string(s.steps) + " steps";
    if (s.preemptions > 0) note += ", " + std::to_string(s.preemptions) + " preemptions";
    if (s.prefix_hit_tokens > 0) note += ", " + std::to_string(s.prefix_hit_tokens) + " prefix-cache hit tokens";
    add_row(name, order, outputs, note);
  }

  template <typename Edit>
  void check_with(const std::string& name, const std::vector<size_t>& order, Edit edit) {
    EngineArgs a = base_;
    edit(a);
    llm_.set_engine_args(a);
    check(name, order);
  }

  // Pooling and generation requests interleaved in one engine's steps (the server's case).
  void beside_generation_row(const std::string& name_prefix, const std::vector<size_t>& order,
                             const std::string& name_suffix = "") {
    std::unique_ptr<Engine> engine = llm_.make_engine(fault_);
    const InputProcessor& door = llm_.input_processor();
    size_t next_traffic = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      EngineRequest r = door.process_pooling(prompts_[order[k]], params_[order[k]]);
      r.request_id = pooling_id(k);
      engine->add(std::move(r));
      if (next_traffic < traffic_prompts_.size()) {
        EngineRequest g =
            door.process(traffic_prompts_[next_traffic], traffic_params_[next_traffic], MaxTokensRule::kClipToContext);
        g.request_id = "generation " + std::to_string(next_traffic++);
        engine->add(std::move(g));
      }
    }
    std::map<std::string, RequestOutput> done;
    while (engine->has_unfinished())
      for (RequestOutput& o : engine->step()) done[o.request_id] = std::move(o);
    std::vector<RequestOutput> got;
    for (size_t k = 0; k < order.size(); ++k) got.push_back(std::move(done[pooling_id(k)]));
    std::string note = std::to_string(engine->num_steps()) + " steps";
    if (const int64_t p = engine->scheduler().num_preemptions(); p > 0)
      note += ", " + std::to_string(p) + " preemptions";
    add_row(name_prefix + ": beside " + std::to_string(next_traffic) + " generation requests in the same steps" +
                name_suffix,
            order, got, note);
  }

  // A KV cache just big enough for the longest request, pooling or generation: the generations'
  // growth preempts the prefills running beside them.
  void preemption_row(const std::string& kind) {
    int64_t longest = 0;
    for (const RequestOutput& r : alone_) longest = std::max(longest, static_cast<int64_t>(r.prompt_token_ids.size()));
    const InputProcessor& door = llm_.input_processor();
    for (size_t t = 0; t < traffic_prompts_.size(); ++t) {
      const EngineRequest g = door.process(traffic_prompts_[t], traffic_params_[t], MaxTokensRule::kClipToContext);
      longest = std::max(longest, static_cast<int64_t>(g.prompt_token_ids.size()) + g.params.max_tokens);
    }
    const ModelConfig& mc = llm_.model().config();
    const int64_t block = base_.block_size;
    const int64_t need = (longest + block - 1) / block + 2;
    EngineArgs a = base_;
    a.kv_cache_memory = need * mc.num_hidden_layers * 2 * block * mc.num_key_value_heads * mc.head_dim * 2;
    a.max_num_batched_tokens = 32;
    a.long_prefill_token_threshold = 32;
    llm_.set_engine_args(a);
    beside_generation_row(kind, identity_, ", a KV cache of " + std::to_string(need) + " blocks (preemption)");
  }

  LLMEngine& llm_;
  const EngineArgs& base_;
  const std::vector<PromptInput>& prompts_;
  const std::vector<PromptInput>& traffic_prompts_;
  const std::vector<SamplingParams>& traffic_params_;
  std::mt19937_64 rng_;
  EngineConfig::LogitsHook fault_;
  std::vector<PoolingParams> params_;
  std::vector<size_t> identity_;
  std::vector<RequestOutput> alone_;
  std::vector<InvarianceRow> rows_;
};

}  // namespace

std::vector<InvarianceRow> check_pooling_invariance(LLMEngine& llm, const EngineArgs& base,
                                                    const std::vector<PromptInput>& prompts,
                                                    const std::vector<PromptInput>& traffic_prompts,
                                                    const std::vector<SamplingParams>& traffic_params, uint64_t seed,
                                                    const EngineConfig::LogitsHook& fault) {
  return PoolingChecker(llm, base, prompts, traffic_prompts, traffic_params, seed, fault).run();
}

}  // namespace ditto
