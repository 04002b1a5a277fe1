// A linear layer's weights as the forward pass holds them, and y = x·Wᵀ over them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/step_profile.h"
#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"

namespace ditto {

// A linear layer's weight W [n, k]: packed matrices holding consecutive row ranges of W. One part,
// unless tensors fused into it have different types (a Q4_K_M file's Q4_K q/k beside a Q6_K v):
// then one part per run of same-typed tensors. Splitting W by rows changes no output's reduction,
// so the bits are those of one fused matrix.
struct LinearWeight {
  std::vector<PackedMatrix> parts;

  int64_t n() const;             // rows of W: the parts' n summed
  int64_t k() const;             // columns of W (0 when empty)
  int64_t weight_bytes() const;  // the parts' weight_bytes(): what one pass over W reads
  bool empty() const { return parts.empty(); }
};

// y[m, w.n()] = x[m, w.k()]·Wᵀ, each part by gemm (kernels/gemm.h) into its columns of y. Row
// strides ldx, ldy in elements; pool may be null. Its wall time counts as `phase` of the active
// StepProfile (core/step_profile.h), if any.
void linear(const float* x, int64_t m, int64_t ldx, const LinearWeight& w, float* y, int64_t ldy, ThreadPool* pool,
            StepPhase phase = StepPhase::kWeights);

// True when a GEMM with w rounds its input to bf16 before multiplying (bf16 weights, not
// quantized: kernels/gemm.h), so that input may travel between tensor-parallel ranks as bf16.
bool rounds_input_to_bf16(const LinearWeight& w);

}  // namespace ditto
