// `ditto bench`'s model scenario measured: prefill and batch-1 decode (model_speed.h) each judged
// by the machine limit measured around it (machine_limits.h). Each limit is the best of a full
// measurement right before the phase, one pass before each of the phase's runs and a full
// measurement right after: the phase's fastest run catches the quietest moment of a shared
// machine, so must its limit (FMA and bf16-dot peaks with prefill, read bandwidth with decode).
// Thread-safety: uses the model's thread pool; not concurrently with other work on that model.
#pragma once

#include <cstdint>

#include "bench/model_speed.h"
#include "bench/timing.h"

namespace ditto {

class ThreadPool;

struct ModelBenchResult {
  double fma_peak = 0;                // FLOP/s, float32 FMA
  double bf16_dot_peak = 0;           // FLOP/s, the bf16-weight GEMM's instruction
  bool bf16_dot_instruction = false;  // that instruction is VDPBF16PS (else float32 FMAs)
  double read_bandwidth = 0;          // bytes/s
  RunTimes prefill;                   // one prompt of options.prompt_tokens
  RunTimes decode;                    // options.decode_tokens steps; empty when decode_tokens is 0
  StepBudget decode_budget;           // the fastest decode run's
  double prefill_flops_per_s = 0;     // model.prefill_flops(prompt_tokens) / prefill.best_seconds
  // Under tensor parallelism: bytes rank 0 receives from the other ranks per token (0 without).
  double tensor_parallel_prefill_bytes_per_token = 0;
  double tensor_parallel_decode_bytes_per_token = 0;
};

// Runs both phases and their limits on `model` with its thread pool `pool`. Throws as
// ModelSpeedBench's constructor (Error(kInvalidArgument) for token counts the model cannot hold).
ModelBenchResult measure_model_speed(const CausalLM& model, ThreadPool* pool, const ModelSpeedOptions& options);

}  // namespace ditto
