// Query-blocked attention for prefill (internal to kernels/attention.cc).
//
// A block is consecutive positions of one sequence × the query heads of one KV head's GQA group:
// its rows (position-major: row r is position first_position + r / group, head kv_head·group +
// r % group) share every tile of kAttentionTile keys, which is converted from bf16 once and used by
// all of them. Each row's arithmetic is exactly the per-query order of attention.h — only which
// rows share a loop changes:
//   - scores: 16 (AVX-512) or 8 (AVX2) row lanes per vector; for each of the canonical dot's 16 lanes L (i ≡ L mod 16)
//     one fma chain over i ascending from +0, then the 16 chains added by the canonical tree
//     (chain L += chain L+8, +4, +2, +1), so each score is the 16-lane dot of kernels/reduce.h;
//   - tile max, Σexp and l·α + Σ: a vector of row lanes, each a sequential scan over the tile's keys in
//     ascending position (a key past a row's position, or before its sliding window's first key, is
//     masked out of its lane, never added; a row with no key in the tile keeps m and l, α = 1);
//   - acc[d] = acc[d]·α, then fma(p_t, v_t[d], acc[d]) for the row's keys t ascending: lanes over d,
//     per row.
// Thread-safety: uses a thread_local workspace; blocks with disjoint outputs may run concurrently.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "kernels/attention.h"

namespace ditto::attention_internal {

// Query rows per block: each tile's K and V are read from the cache (DRAM or L3, one KV head's rows
// kv_dim apart) and converted once for 256 rows, while the block's q and accumulators (2·256·head_dim
// f32) and the f32 tile stay within L2. At 64 rows the tile loads were the largest part of a
// profile of an 8k-token prefill.
inline constexpr int64_t kBlockRows = 256;

// Where a sequence's keys live: slot of absolute position `position`.
struct KeySlots {
  const int32_t* block_table;  // [max_blocks] block ids
  int64_t max_blocks;
  int64_t block_size;
  int64_t slot(int64_t position) const {
    const int64_t b = position / block_size;
    DITTO_CHECK(b < max_blocks) << "position " << position << " beyond the block table";
    return static_cast<int64_t>(block_table[b]) * block_size + position % block_size;
  }
};

struct QueryBlock {
  const float* q;  // q + i·ldq + h·head_dim: head h of the block's i-th position, f32
  int64_t ldq;
  float* out;  // same layout as q, row stride ldo
  int64_t ldo;
  int64_t first_position;
  int64_t num_positions;
  int64_t kv_head;
  KeySlots slots;
};

// Positions per block for a GQA group of `group` query heads per KV head.
inline int64_t block_positions(int64_t group) { return group >= kBlockRows ? 1 : kBlockRows / group; }

// Whether the active instruction-set path has the blocked kernel for this shape: AVX-512 with
// head_dim a multiple of 64, AVX2 with head_dim a multiple of 16, both up to 256. Otherwise (and on
// the portable path) every query runs alone.
bool block_kernel_available(const AttentionShape& shape);

// Attention of every row of the block, written to out. The cache must hold every key from the first
// row's attention_first_key to the last position of the block.
void attend_block(const QueryBlock& block, const KvCacheLayer& cache, const AttentionShape& shape);

}  // namespace ditto::attention_internal
