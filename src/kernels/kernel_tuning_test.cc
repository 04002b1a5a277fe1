// Kernel tuning (kernel_tuning.h): a prefetch distance changes speed only — the GEMM's bits are the
// same at every distance, on bf16 and quantized weights, at m = 1 (where the distance applies) and
// above; the tuning measures only matrices big enough to stream from memory, once per process,
// and installs one of its candidates; a bad environment value is refused by name.
#include "kernels/kernel_tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/kernel_test_util.h"
#include "kernels/quant.h"

namespace ditto {
namespace {

using test::Rng;

// Restores the tuning a test changed.
class TuningGuard {
 public:
  TuningGuard() : saved_(kernel_tuning()) {}
  ~TuningGuard() { set_kernel_tuning(saved_); }

 private:
  KernelTuning saved_;
};

std::vector<float> random_floats(Rng& rng, int64_t count, float scale) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& f : v) f = rng.normal() * scale;
  return v;
}

PackedMatrix bf16_matrix(Rng& rng, int64_t n, int64_t k) {
  const test::StoredMatrix w = test::random_matrix(rng, DType::kBF16, n, k);
  const MatrixSource src = w.source();
  return pack_matrix({&src, 1});
}

PackedMatrix quant_matrix(Rng& rng, QuantType t, int64_t n, int64_t k) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n * quant_row_bytes(t, k)));
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<float> row = random_floats(rng, k, 0.05f);
    quantize_row(t, row.data(), k, bytes.data() + r * quant_row_bytes(t, k));
  }
  const MatrixSource src{bytes.data(), DType::kF32, n, k, t};
  return pack_matrix({&src, 1});
}

TEST(KernelTuningTest, PrefetchDistanceNeverChangesABit) {
  const TuningGuard guard;
  ThreadPool pool(2);
  Rng rng(7);
  std::vector<PackedMatrix> weights;
  weights.push_back(bf16_matrix(rng, 70, 300));  // odd panel tail, k not a multiple of the pair block
  weights.push_back(quant_matrix(rng, QuantType::kQ8_0, 48, 256));
  weights.push_back(quant_matrix(rng, QuantType::kQ4_K, 40, 512));
  for (const PackedMatrix& w : weights) {
    for (const int64_t m : {1, 3}) {
      const std::vector<float> x = random_floats(rng, m * w.k, 1.0f);
      std::vector<float> want;
      for (const int64_t ahead : {int64_t{0}, int64_t{64}, int64_t{1024}, int64_t{2048}, kMaxPrefetchBytes}) {
        set_kernel_tuning({.gemv_prefetch_bytes = ahead, .gemm_prefetch_bytes = ahead, .qgemv_prefetch_bytes = ahead});
        std::vector<float> y(static_cast<size_t>(m * w.n));
        gemm(x.data(), m, w.k, w, y.data(), w.n, &pool);
        if (want.empty()) {
          want = y;
          continue;
        }
        EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
            << "quant " << static_cast<int>(w.quant) << " m " << m << " prefetch " << ahead;
      }
    }
  }
}

TEST(KernelTuningTest, SetTuningIsWhatTheKernelsRead) {
  const TuningGuard guard;
  set_kernel_tuning({.gemv_prefetch_bytes = 512, .gemm_prefetch_bytes = 1024, .qgemv_prefetch_bytes = 0});
  const KernelTuning t = kernel_tuning();
  EXPECT_EQ(t.gemv_prefetch_bytes, 512);
  EXPECT_EQ(t.gemm_prefetch_bytes, 1024);
  EXPECT_EQ(t.qgemv_prefetch_bytes, 0);
}

TEST(KernelTuningTest, MatricesThatFitInTheCacheAreNotMeasured) {
  const TuningGuard guard;
  Rng rng(3);
  const PackedMatrix small = bf16_matrix(rng, 256, 1024);  // 512 KiB
  const PackedMatrix* weights[] = {&small};
  set_kernel_tuning({.gemv_prefetch_bytes = 768, .gemm_prefetch_bytes = 2048, .qgemv_prefetch_bytes = 1024});
  ThreadPool pool(2);
  EXPECT_TRUE(tune_gemv_prefetch(weights, &pool).empty());
  EXPECT_EQ(kernel_tuning().gemv_prefetch_bytes, 768);
}

// 64 MiB of bf16 weights: measured once per process, the winner one of the candidates, installed.
TEST(KernelTuningTest, MeasuresOncePerProcessAndInstallsACandidate) {
  const TuningGuard guard;
  Rng rng(5);
  const PackedMatrix big = bf16_matrix(rng, 16 * 2048, 1024);
  ASSERT_GE(big.weight_bytes(), int64_t{64} << 20);
  const PackedMatrix* weights[] = {&big};
  ThreadPool pool(2);
  const std::vector<PrefetchTuning> first = tune_gemv_prefetch(weights, &pool);
  if (active_isa() == Isa::kScalar) {  // the portable path has no prefetch to tune
    EXPECT_TRUE(first.empty());
    return;
  }
  if (first.empty()) GTEST_SKIP() << "bf16 already tuned in this process (another test ran the tuning first)";
  ASSERT_EQ(first.size(), 1u);
  const PrefetchTuning& t = first[0];
  EXPECT_EQ(t.weights, "bf16");
  if (!t.from_environment) {
    ASSERT_EQ(t.trials.size(), 6u);
    const auto chosen = std::find_if(t.trials.begin(), t.trials.end(),
                                     [&](const PrefetchTrial& trial) { return trial.bytes == t.chosen_bytes; });
    ASSERT_NE(chosen, t.trials.end()) << t.chosen_bytes;
    for (const PrefetchTrial& trial : t.trials) {
      EXPECT_GT(trial.bytes_per_s, 0.0) << trial.bytes;
      EXPECT_GE(chosen->bytes_per_s, trial.bytes_per_s) << trial.bytes;  // the fastest is chosen
    }
  }
  EXPECT_EQ(kernel_tuning().gemv_prefetch_bytes, t.chosen_bytes);
  EXPECT_TRUE(tune_gemv_prefetch(weights, &pool).empty());  // once per process
  const std::vector<PrefetchTuning> last = last_prefetch_tuning();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].chosen_bytes, t.chosen_bytes);
}

TEST(KernelTuningTest, EnvironmentValuesAreCheckedByName) {
  EXPECT_EQ(parse_prefetch_bytes("DITTO_GEMV_PREFETCH", "0"), 0);
  EXPECT_EQ(parse_prefetch_bytes("DITTO_GEMV_PREFETCH", "2048"), 2048);
  EXPECT_EQ(parse_prefetch_bytes("DITTO_GEMV_PREFETCH", "65536"), kMaxPrefetchBytes);
  for (const char* bad : {"", "-1", "65537", "2k", "abc", "99999999999999999999"}) {
    try {
      parse_prefetch_bytes("DITTO_QGEMV_PREFETCH", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("DITTO_QGEMV_PREFETCH"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ditto
