#include "bench/model_bench.h"

#include <algorithm>
#include <string>

#include "bench/machine_limits.h"
#include "core/progress.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

ModelBenchResult measure_model_speed(const CausalLM& model, ThreadPool* pool, const ModelSpeedOptions& options) {
  ModelSpeedBench bench(model, options);
  ModelBenchResult r;
  FmaPeakMeter fma(pool);
  FmaPeakMeter dot(pool, FmaPeakMeter::Kind::kBf16Dot);
  r.bf16_dot_instruction = dot.bf16_dot();
  r.fma_peak = fma.measure();
  r.bf16_dot_peak = dot.measure();
  // Under tensor parallelism: what rank 0 receives from the other ranks per run (every run of a
  // phase is the same work), counted around the phase over its calls, warm-ups included.
  const TensorParallelGroup* tp = TensorParallelGroup::current();
  int64_t calls = 0;
  int64_t received = tp ? tp->bytes_received() : 0;
  // On a terminal: the runs done of the most each phase may make (a phase that reaches its time
  // budget stops sooner).
  const int64_t runs_per_phase = options.repeat.warmups + options.repeat.repetitions;
  ProgressBar bar("bench", runs_per_phase * (options.decode_tokens > 0 ? 2 : 1), "runs", library_progress_sink());
  int64_t runs = 0;
  bar.update(0, "prefill");
  r.prefill = bench.time_prefill([&] {
    bar.update(runs++, "prefill of " + std::to_string(options.prompt_tokens) + " tokens");
    ++calls;
    r.fma_peak = std::max(r.fma_peak, fma.pass());
    r.bf16_dot_peak = std::max(r.bf16_dot_peak, dot.pass());
  });
  r.fma_peak = std::max(r.fma_peak, fma.measure());
  r.bf16_dot_peak = std::max(r.bf16_dot_peak, dot.measure());
  r.prefill_flops_per_s = model.prefill_flops(options.prompt_tokens) / r.prefill.best_seconds;
  if (tp)
    r.tensor_parallel_prefill_bytes_per_token =
        static_cast<double>(tp->bytes_received() - received) / static_cast<double>(calls * options.prompt_tokens);
  calls = 0;
  received = tp ? tp->bytes_received() : 0;
  ReadBandwidthMeter meter(pool);
  r.read_bandwidth = meter.measure();
  if (options.decode_tokens > 0) {  // 0: a prompt's time alone (e.g. a long prompt's)
    runs = runs_per_phase;
    r.decode = bench.time_decode([&] {
      bar.update(runs++, "decode of " + std::to_string(options.decode_tokens) + " tokens");
      ++calls;
      r.read_bandwidth = std::max(r.read_bandwidth, meter.pass());
    });
    r.decode_budget = bench.decode_budget();
    if (tp)
      r.tensor_parallel_decode_bytes_per_token =
          static_cast<double>(tp->bytes_received() - received) / static_cast<double>(calls * options.decode_tokens);
  }
  bar.finish();
  r.read_bandwidth = std::max(r.read_bandwidth, meter.measure());
  return r;
}

}  // namespace ditto
