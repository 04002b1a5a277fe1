// `ditto bench`: the machine's limits and the model's speed, measured in the same run, and their
// ratio. Decode at batch 1 streams every weight once per token, so its bound is
// read bandwidth ÷ decode_weight_bytes(); decode_roofline_ratio says how close the engine gets.
//
// Methods (src/bench/): read bandwidth and FMA peak as machine_limits.h describes, each the best
// of a measurement right before the phase it judges, one pass before each of its runs and a
// measurement right after (FMA peak with prefill, bandwidth with decode), so that a limit samples
// the same moments of a shared machine as its phase's fastest run. Prefill and decode as
// model_speed.h describes: after one warm-up run, up to --repeat timed runs per phase, the fastest
// reported (a phase stops repeating once it has used 20 s, so slow kernels still finish), the
// median beside it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.h"
#include "bench/model_bench.h"
#include "bench/offline_bench.h"
#include "bench/speculative_bench.h"
#include "checkpoint/hub.h"
#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/progress.h"
#include "kernels/kernel_tuning.h"
#include "model_options.h"
#include "parallel/tensor_parallel.h"

namespace ditto {
namespace {

struct BenchOptions {
  ModelOptions model;
  int64_t prompt_tokens = 0;  // 0: 512 (model scenario) or 256 (offline)
  int64_t decode_tokens = 128;
  uint64_t seed = 0;
  int repeat = 3;
  bool json = false;
  bool quiet = false;  // no progress bars (loading, runs)
  bool decode_after_prompt = false;
  // --scenario offline: many requests through the batching engine.
  std::string scenario = "model";
  int64_t num_requests = 64;
  int64_t output_tokens = 128;
  // --scenario speculative: the configuration compared with plain decoding ("": the default ngram
  // one, bench/speculative_bench.h), the scenario's subject rather than an engine setting.
  std::string speculative_config;
  float temperature = 0.0f;
};

constexpr int64_t kMaxTokens = int64_t{1} << 20;
constexpr int kMaxRepeat = 100;

// Flag errors before the (slow) load; the context-length check needs the config (ModelSpeedBench).
void check_flags(const BenchOptions& o) {
  auto in_range = [](const char* flag, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw_invalid_argument(std::string(flag) + " " + std::to_string(v) + " is out of range [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
  };
  in_range("--prompt-tokens", o.prompt_tokens, 1, kMaxTokens);
  in_range("--decode-tokens", o.decode_tokens, 0, kMaxTokens);
  in_range("--repeat", o.repeat, 1, kMaxRepeat);
}

// The offline scenario's numbers as one JSON object.
nlohmann::ordered_json offline_json(const std::string& dir, int threads, const EngineArgs& args,
                                    const OfflineBenchOptions& o, const OfflineBenchResult& r, int64_t weights,
                                    int64_t rss) {
  return {
      {"scenario", "offline"},
      {"model", dir},
      {"isa", std::string(isa_name(active_isa()))},
      {"threads", threads},
      {"num_requests", o.num_requests},
      {"prompt_tokens", o.prompt_tokens},
      {"output_tokens", o.output_tokens},
      {"max_num_batched_tokens", args.max_num_batched_tokens},
      {"long_prefill_token_threshold", r.long_prefill_token_threshold},
      {"kv_cache_bytes", args.kv_cache_memory},
      {"seconds", r.seconds},
      {"engine_steps", r.engine_steps},
      {"preemptions", r.preemptions},
      {"generated_tokens", r.generated_tokens},
      {"generated_tokens_per_s", r.generated_tokens_per_s},
      {"total_tokens_per_s", (r.generated_tokens + o.num_requests * o.prompt_tokens) / r.seconds},
      {"batch1_decode_tokens_per_s", r.batch1_decode_tokens_per_s},
      {"throughput_ratio_to_batch1_decode", r.generated_tokens_per_s / r.batch1_decode_tokens_per_s},
      {"weight_bytes", weights},
      {"peak_rss_bytes", rss},
      {"peak_rss_over_weights_plus_kv", static_cast<double>(rss) / static_cast<double>(weights + args.kv_cache_memory)},
  };
}

// The offline scenario's numbers as three lines, from offline_json's object.
void print_offline_table(const nlohmann::ordered_json& j) {
  const auto num = [&](const char* key) { return j[key].get<double>(); };
  const auto count = [&](const char* key) { return static_cast<long long>(j[key].get<int64_t>()); };
  std::printf("offline: %lld requests x (%lld prompt + %lld output tokens) in %.1f s, %lld steps, %lld preemptions\n",
              count("num_requests"), count("prompt_tokens"), count("output_tokens"), num("seconds"),
              count("engine_steps"), count("preemptions"));
  std::printf("generated        %10.2f tokens/s (%.2fx batch-1 decode at %.2f tokens/s)\n",
              num("generated_tokens_per_s"), num("throughput_ratio_to_batch1_decode"),
              num("batch1_decode_tokens_per_s"));
  std::printf("peak RSS         %10.1f MB = %.3f x (weights %.1f MB + KV cache %.1f MB)\n",
              count("peak_rss_bytes") / 1e6, num("peak_rss_over_weights_plus_kv"), count("weight_bytes") / 1e6,
              count("kv_cache_bytes") / 1e6);
}

// --scenario offline (src/bench/offline_bench.h): --num-requests random prompts of --prompt-tokens
// (default 256) tokens, each generating --output-tokens tokens, all submitted at once, against
// batch-1 decode of the same model; with the process's peak RSS against weights + KV cache.
void run_offline(const BenchOptions& o) {
  const OfflineBenchOptions options{.num_requests = o.num_requests,
                                    .prompt_tokens = o.prompt_tokens > 0 ? o.prompt_tokens : 256,
                                    .output_tokens = o.output_tokens,
                                    .seed = o.seed};
  check_offline_options(options);  // before the (slow) load
  const EngineArgs& args = o.model.engine;
  const std::string dir = resolve_model_path(args.model);
  LoadedModel lm = load_model(o.model);
  const OfflineBenchResult r = measure_offline_throughput(*lm.model, args, options);
  const int64_t rss = peak_rss_bytes();
  const nlohmann::ordered_json j =
      offline_json(dir, lm.pool->num_threads(), args, options, r, lm.model->load_stats().weight_bytes, rss);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    print_offline_table(j);
  }
}

// The speculative scenario's numbers as one JSON object: per workload, tokens/s off and on, their
// ratio, the guesses accepted, and the effective weight bytes/s against the read bandwidth.
nlohmann::ordered_json speculative_json(const SpeculativeBenchResult& r, float temperature, int64_t max_tokens) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const SpeculativeWorkloadResult& w : r.workloads) {
    const SpeculationStats& s = w.speculation;
    rows.push_back({{"workload", w.workload},
                    {"prompts", w.prompts},
                    {"decode_tokens", w.decode_tokens},
                    {"decode_tokens_per_s_off", w.decode_tokens_per_s_off},
                    {"decode_tokens_per_s_on", w.decode_tokens_per_s_on},
                    {"speedup", w.decode_tokens_per_s_on / w.decode_tokens_per_s_off},
                    {"spec_decode_num_drafts", s.num_drafts},
                    {"spec_decode_num_draft_tokens", s.num_draft_tokens},
                    {"spec_decode_num_accepted_tokens", s.num_accepted_tokens},
                    {"acceptance_rate", s.acceptance_rate()},
                    {"effective_bytes_per_s_on", w.effective_bytes_per_s_on},
                    {"effective_bytes_per_s_on_over_read_bandwidth", w.effective_bytes_per_s_on / r.read_bandwidth}});
  }
  return {{"scenario", "speculative"},
          {"model", r.model_dir},
          {"isa", std::string(isa_name(active_isa()))},
          {"speculative_config", r.speculative_config},
          {"temperature", temperature},
          {"max_tokens", max_tokens},
          {"decode_weight_bytes", r.decode_weight_bytes},
          {"read_bandwidth_gbps", r.read_bandwidth / 1e9},
          {"workloads", rows}};
}

// The speculative scenario's numbers as a table, from speculative_json's object.
void print_speculative_table(const nlohmann::ordered_json& j) {
  std::printf("model            %s (%.1f MB of weights per decode step)\n", j["model"].get<std::string>().c_str(),
              j["decode_weight_bytes"].get<int64_t>() / 1e6);
  std::printf("speculation      %s\n", j["speculative_config"].get<std::string>().c_str());
  std::printf("read bandwidth   %10.2f GB/s\n", j["read_bandwidth_gbps"].get<double>());
  std::printf("%-12s %8s %10s %10s %8s %16s %16s\n", "workload", "tokens", "off tok/s", "on tok/s", "on/off",
              "accepted", "on bytes/s / bw");
  for (const auto& row : j["workloads"]) {
    const std::string accepted = std::to_string(row["spec_decode_num_accepted_tokens"].get<int64_t>()) + "/" +
                                 std::to_string(row["spec_decode_num_draft_tokens"].get<int64_t>());
    std::printf("%-12s %8lld %10.2f %10.2f %8.3f %16s %16.3f\n", row["workload"].get<std::string>().c_str(),
                static_cast<long long>(row["decode_tokens"].get<int64_t>()),
                row["decode_tokens_per_s_off"].get<double>(), row["decode_tokens_per_s_on"].get<double>(),
                row["speedup"].get<double>(), accepted.c_str(),
                row["effective_bytes_per_s_on_over_read_bandwidth"].get<double>());
  }
}

// --scenario speculative (src/bench/speculative_bench.h): batch-1 decode with --speculative-config
// on ÷ off, on a copying and a non-copying workload, with their outputs compared token for token.
void run_speculative(const BenchOptions& o) {
  const SpeculativeBenchResult r =
      measure_speculative_speed(o.model.engine, {.speculative_config = o.speculative_config,
                                                 .max_tokens = o.output_tokens,
                                                 .temperature = o.temperature,
                                                 .repeat = o.repeat});
  const nlohmann::ordered_json j = speculative_json(r, o.temperature, o.output_tokens);
  if (o.json) {
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_speculative_table(j);
  }
}

// The decode step budget of the fastest decode run: milliseconds per step by phase, the share of
// the step, and the rate at which the weight phases read their bytes against the read bandwidth
// (what a GEMV achieves inside the step). pool_wait lies inside the other phases; "other" is the
// step's time outside every phase (the bench loop, the engine's bookkeeping between phases).
nlohmann::ordered_json decode_step_budget_json(const StepBudget& b, const CausalLM& model, double bandwidth) {
  const double steps = static_cast<double>(std::max<int64_t>(b.steps, 1));
  const double step_ms = 1e3 * b.run_seconds / steps;
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  double inside = 0;
  for (size_t i = 0; i < b.seconds.size(); ++i) {
    const auto phase = static_cast<StepPhase>(i);
    if (phase != StepPhase::kPoolWait) inside += b.seconds[i];
    const double ms = 1e3 * b.seconds[i] / steps;
    phases[step_phase_name(phase)] = {{"ms_per_step", ms},
                                      {"share", step_ms > 0 ? ms / step_ms : 0.0},
                                      {"calls_per_step", static_cast<double>(b.calls[i]) / steps}};
  }
  const double other_ms = 1e3 * (b.run_seconds - inside) / steps;
  phases["other"] = {{"ms_per_step", other_ms}, {"share", step_ms > 0 ? other_ms / step_ms : 0.0}};
  // Bytes/s while reading weights ÷ the read bandwidth: the decoder's linear layers, the LM head.
  const auto rate_ratio = [&](double bytes, StepPhase phase) {
    const double seconds = b.seconds[static_cast<size_t>(phase)] / steps;
    return seconds > 0 ? bytes / seconds / bandwidth : 0.0;
  };
  const auto head_bytes = static_cast<double>(model.lm_head_weight_bytes());
  const auto layer_bytes = static_cast<double>(model.decode_weight_bytes()) - head_bytes;
  return {{"steps", b.steps},
          {"step_ms", step_ms},
          {"phases", phases},
          {"weights_read_bandwidth_ratio", rate_ratio(layer_bytes, StepPhase::kWeights)},
          {"lm_head_read_bandwidth_ratio", rate_ratio(head_bytes, StepPhase::kLmHead)}};
}

// The decode GEMVs' prefetch distances chosen at load (kernels/kernel_tuning.h), with the weight
// bytes/s each candidate read.
nlohmann::ordered_json prefetch_tuning_json() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PrefetchTuning& t : last_prefetch_tuning()) {
    nlohmann::ordered_json trials = nlohmann::ordered_json::array();
    for (const PrefetchTrial& trial : t.trials)
      trials.push_back({{"bytes", trial.bytes}, {"gbps", trial.bytes_per_s / 1e9}});
    out.push_back({{"weights", t.weights},
                   {"chosen_bytes", t.chosen_bytes},
                   {"from_environment", t.from_environment},
                   {"trials", trials}});
  }
  return out;
}

void print_prefetch_tuning(const nlohmann::ordered_json& tuning) {
  for (const auto& t : tuning) {
    std::string trials;
    for (const auto& trial : t["trials"]) {
      char item[64];
      std::snprintf(item, sizeof(item), " %lld: %.1f", static_cast<long long>(trial["bytes"].get<int64_t>()),
                    trial["gbps"].get<double>());
      trials += item;
    }
    std::printf("gemv prefetch    %s weights %lld bytes ahead (%s)\n", t["weights"].get<std::string>().c_str(),
                static_cast<long long>(t["chosen_bytes"].get<int64_t>()),
                t["from_environment"].get<bool>() ? "set by the environment"
                                                  : ("measured at load, GB/s per distance:" + trials).c_str());
  }
}

void print_decode_step_budget(const nlohmann::ordered_json& budget) {
  if (budget.is_null()) return;
  std::printf("decode step       %9.3f ms       (fastest run, %lld steps)\n", budget["step_ms"].get<double>(),
              static_cast<long long>(budget["steps"].get<int64_t>()));
  for (const auto& [name, phase] : budget["phases"].items()) {
    const bool nested = name == step_phase_name(StepPhase::kPoolWait);
    std::printf("  %-15s %9.3f ms %5.1f %%%s\n", name.c_str(), phase["ms_per_step"].get<double>(),
                100 * phase["share"].get<double>(), nested ? "  (inside the phases above: waiting for threads)" : "");
  }
  std::printf("  weights read at %.3f of the read bandwidth, lm_head at %.3f\n",
              budget["weights_read_bandwidth_ratio"].get<double>(),
              budget["lm_head_read_bandwidth_ratio"].get<double>());
}

// The model scenario's numbers as one JSON object.
nlohmann::ordered_json model_json(const BenchOptions& o, const std::string& dir, const CausalLM& model, int threads,
                                  const ModelBenchResult& r) {
  const TensorParallelGroup* tp = TensorParallelGroup::current();
  const auto weight_bytes = static_cast<double>(model.decode_weight_bytes());
  const double roofline = r.read_bandwidth / weight_bytes;  // decode tokens/s bound
  nlohmann::ordered_json j = {
      {"model", dir},
      {"isa", std::string(isa_name(active_isa()))},
      {"threads", threads},
      {"tensor_parallel_size", tp ? tp->size() : 1},
      {"num_hidden_layers", model.config().num_hidden_layers},
      {"decode_weight_bytes", model.decode_weight_bytes()},
      {"prompt_tokens", o.prompt_tokens},
      {"decode_tokens", o.decode_tokens},
      {"decode_start_position", o.decode_after_prompt ? o.prompt_tokens : 0},
      {"seed", o.seed},
      {"read_bandwidth_gbps", r.read_bandwidth / 1e9},
      {"fma_gflops", r.fma_peak / 1e9},
      {"bf16_dot_gflops", r.bf16_dot_peak / 1e9},
      {"bf16_dot_instruction", r.bf16_dot_instruction ? "vdpbf16ps" : "fma"},
      {"gemv_prefetch", prefetch_tuning_json()},
      {"prefill_gflops", r.prefill_flops_per_s / 1e9},
      {"prefill_fma_peak_ratio", r.prefill_flops_per_s / r.fma_peak},
      {"prefill_bf16_dot_peak_ratio", r.prefill_flops_per_s / r.bf16_dot_peak},
      {"prefill_tokens_per_s", o.prompt_tokens / r.prefill.best_seconds},
      {"prefill_tokens_per_s_median", o.prompt_tokens / r.prefill.median_seconds},
      {"prefill_runs", r.prefill.runs},
      {"prefill_seconds", r.prefill.best_seconds},
      {"prefill_seconds_median", r.prefill.median_seconds},
      {"decode_roofline_tokens_per_s", roofline},
  };
  if (tp) j["tensor_parallel_prefill_bytes_received_per_token"] = r.tensor_parallel_prefill_bytes_per_token;
  if (o.decode_tokens > 0) {
    if (tp) j["tensor_parallel_decode_bytes_received_per_token"] = r.tensor_parallel_decode_bytes_per_token;
    const double decode_tokens_per_s = o.decode_tokens / r.decode.best_seconds;
    j["decode_tokens_per_s"] = decode_tokens_per_s;
    j["decode_tokens_per_s_median"] = o.decode_tokens / r.decode.median_seconds;
    j["decode_runs"] = r.decode.runs;
    j["decode_roofline_ratio"] = decode_tokens_per_s / roofline;
    j["decode_step_budget"] = decode_step_budget_json(r.decode_budget, model, r.read_bandwidth);
  }
  return j;
}

// The model scenario's numbers as a table, from model_json's object.
void print_model_table(const nlohmann::ordered_json& j) {
  const auto num = [&](const char* key) { return j[key].get<double>(); };
  const auto count = [&](const char* key) { return static_cast<long long>(j[key].get<int64_t>()); };
  std::printf("model            %s (%lld layers, %.1f MB of weights per decode step)\n",
              j["model"].get<std::string>().c_str(), count("num_hidden_layers"), num("decode_weight_bytes") / 1e6);
  std::printf("isa, threads     %s, %lld\n", j["isa"].get<std::string>().c_str(), count("threads"));
  if (j.contains("tensor_parallel_prefill_bytes_received_per_token"))
    std::printf("tensor parallel  %lld ranks; rank 0 receives %.0f bytes per prefill token, %.0f per decode token\n",
                count("tensor_parallel_size"), num("tensor_parallel_prefill_bytes_received_per_token"),
                j.value("tensor_parallel_decode_bytes_received_per_token", 0.0));
  std::printf("read bandwidth   %10.2f GB/s\n", num("read_bandwidth_gbps"));
  std::printf("fma peak         %10.2f GFLOP/s\n", num("fma_gflops"));
  std::printf("bf16 dot peak    %10.2f GFLOP/s   (%s)\n", num("bf16_dot_gflops"),
              j["bf16_dot_instruction"] == "vdpbf16ps" ? "vdpbf16ps" : "float32 fma");
  print_prefetch_tuning(j["gemv_prefetch"]);
  std::printf("prefill          %10.2f tokens/s   (%lld-token prompt; best of %lld, median %.2f)\n",
              num("prefill_tokens_per_s"), count("prompt_tokens"), count("prefill_runs"),
              num("prefill_tokens_per_s_median"));
  std::printf("prefill compute  %10.2f GFLOP/s    (%.3f of the fma peak, %.3f of the bf16 dot peak)\n",
              num("prefill_gflops"), num("prefill_fma_peak_ratio"), num("prefill_bf16_dot_peak_ratio"));
  std::printf("prompt time      %10.2f s          (best; median %.2f s)\n", num("prefill_seconds"),
              num("prefill_seconds_median"));
  if (!j.contains("decode_tokens_per_s")) return;
  std::printf(
      "decode           %10.2f tokens/s   (%lld steps at batch 1 from position %lld; best of %lld, median %.2f)\n",
      num("decode_tokens_per_s"), count("decode_tokens"), count("decode_start_position"), count("decode_runs"),
      num("decode_tokens_per_s_median"));
  std::printf("decode roofline  %10.2f tokens/s   (read bandwidth / decode weight bytes)\n",
              num("decode_roofline_tokens_per_s"));
  std::printf("decode / roofline %9.3f\n", num("decode_roofline_ratio"));
  print_decode_step_budget(j["decode_step_budget"]);
}

void run_model_scenario(BenchOptions o) {
  if (o.prompt_tokens == 0) o.prompt_tokens = 512;
  check_flags(o);
  const std::string dir = resolve_model_path(o.model.engine.model);
  LoadedModel lm = load_model(o.model);
  ModelSpeedOptions so;
  so.prompt_tokens = o.prompt_tokens;
  so.decode_tokens = o.decode_tokens;
  so.seed = o.seed;
  so.decode_after_prompt = o.decode_after_prompt;
  so.block_size = o.model.engine.block_size;
  so.repeat.repetitions = o.repeat;
  const ModelBenchResult r = measure_model_speed(*lm.model, lm.pool.get(), so);
  const nlohmann::ordered_json j = model_json(o, dir, *lm.model, lm.pool->num_threads(), r);
  if (o.json) {
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_model_table(j);
  }
}

void run_bench(const BenchOptions& options) {
  if (serve_as_tensor_parallel_rank(options.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  enable_progress_bars(!options.quiet);
  if (options.scenario == "offline") return run_offline(options);
  if (options.scenario == "speculative") return run_speculative(options);
  if (options.scenario != "model")
    throw_invalid_argument(
        "--scenario must be 'model' (prefill and batch-1 decode), 'offline' or 'speculative', got '" +
        options.scenario + "'");
  run_model_scenario(options);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd =
      app.add_subcommand("bench",
                         "Measure the machine's limits (read bandwidth, FMA peak) and the model's prefill and decode "
                         "speed in one run; prints decode speed as a ratio to the bandwidth roofline");
  add_model_options(cmd, o->model);
  cmd->add_option("--prompt-tokens", o->prompt_tokens,
                  "Tokens of the random prompt (prefilled in steps of 512); default 512, or 256 per request "
                  "with --scenario offline");
  cmd->add_option("--decode-tokens", o->decode_tokens, "Greedy decode steps at batch 1")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompt")->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "Timed runs per phase after one warm-up (the fastest is reported)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object instead of the table");
  cmd->add_flag("--quiet", o->quiet, "No progress bars on stderr (they appear only on a terminal)");
  cmd->add_flag("--decode-after-prompt", o->decode_after_prompt,
                "Decode right after the prompt instead of from an empty context (llama-bench's tg "
                "test starts empty, so the default compares like with like)");
  cmd->add_option("--scenario", o->scenario,
                  "'model': prefill and batch-1 decode against the machine's limits; 'offline': "
                  "--num-requests requests through the batching engine, against batch-1 decode; 'speculative': "
                  "batch-1 decode with --speculative-config on / off, on a copying and a non-copying workload")
      ->capture_default_str();
  cmd->add_option("--num-requests", o->num_requests, "Requests in the offline scenario")->capture_default_str();
  cmd->add_option("--output-tokens", o->output_tokens, "Tokens generated per request (offline, speculative)")
      ->capture_default_str();
  cmd->add_option("--speculative-config", o->speculative_config,
                  "The speculative scenario's configuration as JSON (vLLM's keys; default: ngram, "
                  "num_speculative_tokens 4, prompt_lookup_max 4)");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature of the speculative scenario (seed 0)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  // The offline scenario's engine (its KV cache defaults to 3 GiB here).
  o->model.engine.kv_cache_memory = int64_t{3} << 30;
  add_engine_flags(cmd, o->model.engine, {"kv_cache_memory", "max_num_batched_tokens", "long_prefill_token_threshold"});
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace ditto
