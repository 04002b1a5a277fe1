// Where an engine step's time goes: wall-clock seconds per phase (weight GEMMs, attention,
// token-wise ops, the LM head, sampling, scheduling) and the time the calling thread waits for the
// pool's other threads, summed while a StepProfile is active. `ditto bench` reports it as the
// per-token budget of a decode step (bench/kernels.md).
//
// Cost: with no profile active, a PhaseTimer is one relaxed atomic load; with one active, two
// steady_clock reads (~20–40 ns each, vDSO) and one relaxed atomic add per timed call — a decode
// step of a 28-layer model times about 300 calls.
// Thread-safety: one profile may be active per process at a time (StepProfile::Scope); timers may run
// on any thread and add atomically. Phases are timed on the thread that calls the pool, so they
// are wall time of the step, not CPU time summed over threads. Nothing here changes a computed bit.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace ditto {

enum class StepPhase : int {
  kWeights,    // linear layers of the decoder (qkv, o, gate/up, down; MoE experts and router)
  kLmHead,     // the final norm and the LM head GEMM
  kAttention,  // paged attention (the KV cache reads)
  kTokenwise,  // norms, RoPE, KV writes, SwiGLU, residual adds, embedding lookup
  kSampler,    // logits to tokens and outputs: penalties, sampling, logprobs, stop checks, detokenizing
  kSchedule,   // the scheduler and the batch's inputs (block tables, slot mapping)
  kPoolWait,   // inside the phases above: the calling thread waiting for the pool's other threads
  kCount
};

// The phase's name as `ditto bench` prints it.
const char* step_phase_name(StepPhase phase);

class StepProfile {
 public:
  // Seconds summed per phase since the profile was made (or reset).
  std::array<double, static_cast<size_t>(StepPhase::kCount)> seconds() const;
  // Calls summed per phase.
  std::array<int64_t, static_cast<size_t>(StepPhase::kCount)> calls() const;
  void reset();

  void add(StepPhase phase, int64_t nanoseconds) {
    nanoseconds_[static_cast<size_t>(phase)].fetch_add(nanoseconds, std::memory_order_relaxed);
    calls_[static_cast<size_t>(phase)].fetch_add(1, std::memory_order_relaxed);
  }

  // The active profile, or null (the common case: nothing is timed).
  static StepProfile* active() { return active_.load(std::memory_order_relaxed); }

  // Makes `profile` the active one for the scope's life (the previous one, usually null, after).
  class Scope {
   public:
    explicit Scope(StepProfile* profile) : previous_(active_.exchange(profile)) {}
    ~Scope() { active_.store(previous_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepProfile* previous_;
  };

 private:
  static std::atomic<StepProfile*> active_;
  std::array<std::atomic<int64_t>, static_cast<size_t>(StepPhase::kCount)> nanoseconds_{};
  std::array<std::atomic<int64_t>, static_cast<size_t>(StepPhase::kCount)> calls_{};
};

// Adds the wall time of its scope to `phase` of the active profile (nothing when none is active).
class PhaseTimer {
 public:
  explicit PhaseTimer(StepPhase phase) : profile_(StepProfile::active()), phase_(phase) {
    if (profile_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~PhaseTimer() {
    if (profile_ != nullptr)
      profile_->add(
          phase_,
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  StepProfile* profile_;
  StepPhase phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ditto
