#include "core/step_profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/thread_pool.h"

namespace ditto {
namespace {

using std::chrono::milliseconds;

double phase_seconds(const StepProfile& p, StepPhase phase) { return p.seconds()[static_cast<size_t>(phase)]; }
int64_t phase_calls(const StepProfile& p, StepPhase phase) { return p.calls()[static_cast<size_t>(phase)]; }

TEST(StepProfileTest, TimersAddOnlyWhileAProfileIsActive) {
  StepProfile profile;
  { const PhaseTimer timer(StepPhase::kWeights); }  // nothing active: not counted anywhere
  EXPECT_EQ(StepProfile::active(), nullptr);
  {
    const StepProfile::Scope scope(&profile);
    EXPECT_EQ(StepProfile::active(), &profile);
    const PhaseTimer timer(StepPhase::kAttention);
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(StepProfile::active(), nullptr);
  { const PhaseTimer timer(StepPhase::kAttention); }  // after the scope: not counted
  EXPECT_EQ(phase_calls(profile, StepPhase::kWeights), 0);
  EXPECT_EQ(phase_calls(profile, StepPhase::kAttention), 1);
  EXPECT_GE(phase_seconds(profile, StepPhase::kAttention), 0.019);
  EXPECT_LT(phase_seconds(profile, StepPhase::kAttention), 5.0);
  profile.reset();
  EXPECT_EQ(phase_calls(profile, StepPhase::kAttention), 0);
  EXPECT_EQ(phase_seconds(profile, StepPhase::kAttention), 0.0);
}

TEST(StepProfileTest, ScopesNestAndRestoreThePreviousProfile) {
  StepProfile outer, inner;
  const StepProfile::Scope a(&outer);
  {
    const StepProfile::Scope b(&inner);
    const PhaseTimer timer(StepPhase::kSampler);
  }
  { const PhaseTimer timer(StepPhase::kSchedule); }
  EXPECT_EQ(phase_calls(inner, StepPhase::kSampler), 1);
  EXPECT_EQ(phase_calls(inner, StepPhase::kSchedule), 0);
  EXPECT_EQ(phase_calls(outer, StepPhase::kSampler), 0);
  EXPECT_EQ(phase_calls(outer, StepPhase::kSchedule), 1);
}

// The caller of a parallel loop that finishes its own chunk first waits for the other thread:
// that wait is the pool_wait phase.
TEST(StepProfileTest, ThePoolRecordsTheCallersWaitForOtherThreads) {
  ThreadPool pool(2);
  StepProfile profile;
  const StepProfile::Scope scope(&profile);
  pool.parallel_for(2, [](size_t begin, size_t) {
    if (begin == 1) std::this_thread::sleep_for(milliseconds(30));  // the worker's chunk is slow
  });
  EXPECT_EQ(phase_calls(profile, StepPhase::kPoolWait), 1);
  EXPECT_GE(phase_seconds(profile, StepPhase::kPoolWait), 0.025);
  for (const char* name : {step_phase_name(StepPhase::kWeights), step_phase_name(StepPhase::kPoolWait)})
    EXPECT_STRNE(name, "?");
}

}  // namespace
}  // namespace ditto
