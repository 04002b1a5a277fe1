#include "core/step_profile.h"

namespace ditto {

std::atomic<StepProfile*> StepProfile::active_{nullptr};

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::kWeights: return "weights";
    case StepPhase::kLmHead: return "lm_head";
    case StepPhase::kAttention: return "attention";
    case StepPhase::kTokenwise: return "tokenwise";
    case StepPhase::kSampler: return "sampler";
    case StepPhase::kSchedule: return "schedule";
    case StepPhase::kPoolWait: return "pool_wait";
    case StepPhase::kCount: break;
  }
  return "?";
}

std::array<double, static_cast<size_t>(StepPhase::kCount)> StepProfile::seconds() const {
  std::array<double, static_cast<size_t>(StepPhase::kCount)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(nanoseconds_[i].load()) * 1e-9;
  return out;
}

std::array<int64_t, static_cast<size_t>(StepPhase::kCount)> StepProfile::calls() const {
  std::array<int64_t, static_cast<size_t>(StepPhase::kCount)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = calls_[i].load();
  return out;
}

void StepProfile::reset() {
  for (auto& v : nanoseconds_) v.store(0);
  for (auto& v : calls_) v.store(0);
}

}  // namespace ditto
