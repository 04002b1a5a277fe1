#include "model/linear.h"

#include "kernels/gemm.h"

namespace ditto {

int64_t LinearWeight::n() const {
  int64_t n = 0;
  for (const PackedMatrix& p : parts) n += p.n;
  return n;
}

int64_t LinearWeight::k() const { return parts.empty() ? 0 : parts[0].k; }

int64_t LinearWeight::weight_bytes() const {
  int64_t bytes = 0;
  for (const PackedMatrix& p : parts) bytes += p.weight_bytes();
  return bytes;
}

void linear(const float* x, int64_t m, int64_t ldx, const LinearWeight& w, float* y, int64_t ldy, ThreadPool* pool,
            StepPhase phase) {
  const PhaseTimer timer(phase);
  int64_t column = 0;
  for (const PackedMatrix& p : w.parts) {
    gemm(x, m, ldx, p, y + column, ldy, pool);
    column += p.n;
  }
}

bool rounds_input_to_bf16(const LinearWeight& w) {
  for (const PackedMatrix& p : w.parts)
    if (p.quant != QuantType::kNone || p.dtype != DType::kBF16) return false;
  return !w.parts.empty();
}

}  // namespace ditto
