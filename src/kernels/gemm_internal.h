// Pieces the GEMM's f32/f16 path (gemm.cc) and its bf16-weight path (gemm_bf16.cc) share: x
// rounded to bf16 pairs, the tile shapes, and the walk over panel groups and row blocks. Internal
// to kernels/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "core/thread_pool.h"
#include "kernels/bf16_dot.h"
#include "kernels/kernel_tuning.h"
#include "kernels/packed_matrix.h"

namespace ditto::gemm_detail {

// ---- bf16 activations ----------------------------------------------------------------------
// A bf16-weight GEMM rounds x to bf16 (core/dtype.h f32_to_bf16) once per call, into pairs:
// row r holds ceil(k/2) 32-bit words, word j = (x[r, 2j], x[r, 2j + 1]) with element 0 in the low
// half and an odd k's missing last element zero (kernels/bf16_dot.h's operand layout).

struct BfPairs {
  const uint16_t* data = nullptr;  // [m, ld] pairs: [m, 2·ld] bf16
  int64_t ld = 0;                  // pairs per row: ceil(k / 2)
  // With `widen`: the same values as float32, [m, 2·ld] (element 2j even, 2j + 1 odd), for the
  // FMA emulation to broadcast straight from memory; else null.
  const float* wide = nullptr;

  // Pair j of row r as one word (element 0 in bits 0–15 on this little-endian machine).
  uint32_t at(int64_t r, int64_t j) const {
    uint32_t v;
    std::memcpy(&v, data + 2 * (r * ld + j), sizeof(v));
    return v;
  }
};

// Rounds x [m, k] (row stride ldx) into this thread's pair buffers (reused across calls: their size
// is bounded by the largest m·k seen, i.e. by the step's token budget), rows split over pool.
BfPairs round_rows_to_bf16_pairs(const float* x, int64_t m, int64_t ldx, int64_t k, ThreadPool* pool,
                                 bool widen = false);

// Tile shapes per path: kMaxRows rows of x by kPanels panels (kPanelsOneRow when m = 1, where the
// tile is memory-bound and more independent chains hide the FMA latency).
struct Shapes {
  int max_rows;
  int panels;
  int panels_one_row;
};
inline constexpr int kMaxRowsAll = 6;
inline constexpr int kMaxPanelsAll = 8;

// Runs group(p0, panels) over every group of shapes.panels panels (panels_one_row when m = 1),
// groups handed to threads. `flush`: each thread runs its groups under ScopedFlushDenormals.
template <class GroupFn>
void for_each_group(const Shapes& shapes, int64_t m, const PackedMatrix& w, ThreadPool* pool, bool flush,
                    const GroupFn& group_fn) {
  const int64_t num_panels = w.num_panels();
  const int group = m == 1 ? shapes.panels_one_row : shapes.panels;
  const int64_t num_groups = (num_panels + group - 1) / group;
  auto run = [&](size_t begin, size_t end) {
    std::optional<ScopedFlushDenormals> ftz_daz;
    if (flush) ftz_daz.emplace();
    for (size_t g = begin; g < end; ++g) {
      const int64_t p0 = static_cast<int64_t>(g) * group;
      group_fn(p0, static_cast<int>(std::min<int64_t>(group, num_panels - p0)));
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(num_groups));
  } else {
    const size_t group_bytes = static_cast<size_t>(group * w.panel_bytes());
    pool->parallel_for_dynamic(static_cast<size_t>(num_groups),
                               weight_chunk_groups(static_cast<size_t>(num_groups), group_bytes, *pool), run);
  }
}

// Runs tile(p0, panels, m0, rows) over every (panel group, row block) of y: for_each_group's
// groups, rows in blocks of shapes.max_rows.
template <class TileFn>
void for_each_tile(const Shapes& shapes, int64_t m, const PackedMatrix& w, ThreadPool* pool, bool flush,
                   const TileFn& tile) {
  for_each_group(shapes, m, w, pool, flush, [&](int64_t p0, int panels) {
    for (int64_t m0 = 0; m0 < m; m0 += shapes.max_rows)
      tile(p0, panels, m0, static_cast<int>(std::min<int64_t>(shapes.max_rows, m - m0)));
  });
}

#if defined(__x86_64__)
// y = x·Wᵀ for bf16 W on the active vector path (gemm_bf16.cc).
void gemm_bf16(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool);
#endif

}  // namespace ditto::gemm_detail
