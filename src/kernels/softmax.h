// Softmax and log-softmax over one row of logits, and greedy argmax.
//
// Reduction order: the max is exact (order-free); Σ exp(x[i] − max) is the canonical 16-lane
// reduction (kernels/reduce.h: lane chains in ascending i, fixed pairwise tree), with ditto's
// exp_f32 / log_f32. log_softmax[i] = (x[i] − max) − log(Σ).
#pragma once

#include <cstdint>

namespace ditto {

// x, out: [n] f32 (out may alias x).
void log_softmax_row(const float* x, int64_t n, float* out);
void softmax_row(const float* x, int64_t n, float* out);

// Index of the largest value; ties go to the lowest index (NaN never wins).
int64_t argmax_row(const float* x, int64_t n);

}  // namespace ditto
