#include "kernels/activation.h"

#include "kernels/math.h"

namespace ditto {

void silu_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * ld;
    const float* u = g + n;
    float* o = out + r * ldo;
    for (int64_t i = 0; i < n; ++i) o[i] = silu_f32(g[i]) * u[i];
  }
}

}  // namespace ditto
