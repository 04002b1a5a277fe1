#include "kernels/quant_gemm_internal.h"

namespace ditto {

bool quant_gemm_simd(const ActLayout&, const uint8_t*, int64_t, const PackedMatrix&, float*, int64_t, ThreadPool*) {
  return false;
}

}  // namespace ditto
