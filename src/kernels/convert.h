// Float32 → bf16 rounding of whole rows, shared by the KV-cache write and the bf16-weight GEMM.
#pragma once

#include <cstdint>

namespace ditto {

// out[i] = f32_to_bf16(x[i]) (core/dtype.h: round to nearest even on the bit pattern, NaN → quiet
// NaN) for i in [0, n), on the active instruction-set path (all paths give the same bits).
// x: [n] f32; out: [n] bf16 bits. x and out must not overlap.
void round_to_bf16(const float* x, int64_t n, uint16_t* out);

}  // namespace ditto
