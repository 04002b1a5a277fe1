// Causal attention over a paged KV cache, one routine for prefill, chunked prefill and decode.
//
// Reduction order: a query at absolute position p visits keys f..p — f = 0, or with a sliding window
// W, f = max(0, p − W + 1) (attention_first_key) — in tiles of kAttentionTile positions whose
// boundaries are multiples of kAttentionTile (independent of the cache's block_size and of f: the
// first tile holds keys f..its end), in ascending order; a tile with none of the query's keys is not
// visited. Per tile: scores s = dot(q, k)·scale with the canonical 16-lane
// dot (kernels/reduce.h); m' = max(m, max s); α = exp(m − m'); l = l·α + Σ_t exp(s_t − m')
// (the tile's terms summed sequentially in ascending t); acc[d] = acc[d]·α, then
// acc[d] = fma(p_t, v_t[d], acc[d]) in ascending t. out = acc / l. One (token, head) pair is
// never split across threads, so the result depends only on q, p and the cached keys/values.
//
// Prefill runs in query blocks where the path has them (AVX-512, head_dim a multiple of 64 up to
// 256; kernels/attention_blocked.h): consecutive positions of one sequence × the query heads of one
// KV head's GQA group (up to 256 rows) share each tile, whose K and V are converted from bf16 once
// for all of them. Only which (token, head) pairs share a loop changes, never a pair's chain of
// operations, so a token's attention has the same bits in a prefill block, a chunk or a decode
// step, on every path. Threads split the batch over query blocks and single (token, head) pairs.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace ditto {

inline constexpr int64_t kAttentionTile = 32;

// One layer's paged KV cache: slot s = block_id·block_size + offset holds
// k[s, num_kv_heads·head_dim] and v[s, num_kv_heads·head_dim], bf16.
struct KvCacheLayer {
  uint16_t* k;  // [num_blocks·block_size, num_kv_heads·head_dim] bf16
  uint16_t* v;  // [num_blocks·block_size, num_kv_heads·head_dim] bf16
  int64_t num_slots;
};

struct AttentionShape {
  int64_t num_heads;
  int64_t num_kv_heads;  // divides num_heads (grouped-query attention)
  int64_t head_dim;
  int64_t block_size;  // KV cache block size (tokens)
  float scale;         // usually 1/sqrt(head_dim)
  // > 0: a query at position p attends only to keys at positions > p − sliding_window (the last
  // sliding_window positions, its own included); 0: to every key 0..p.
  int64_t sliding_window = 0;
};

// The first key position a query at `position` attends to: a pure function of the position and the
// window, so every way of batching, chunking or recomputing a sequence visits the same keys.
inline int64_t attention_first_key(int64_t position, const AttentionShape& shape) {
  return shape.sliding_window > 0 && position >= shape.sliding_window ? position - shape.sliding_window + 1 : 0;
}

// Rounds k and v to bf16 (round to nearest even) and stores token t at slot_mapping[t].
// k, v: [num_tokens, num_kv_heads·head_dim] f32 with row strides ldk, ldv.
// Throws Error(kInvalidArgument) if a slot is outside the cache.
void write_kv(const float* k, int64_t ldk, const float* v, int64_t ldv, const int64_t* slot_mapping, int64_t num_tokens,
              int64_t kv_dim, KvCacheLayer cache);

// q: [num_tokens, num_heads·head_dim] f32, row stride ldq. positions: [num_tokens].
// token_seq: [num_tokens] the sequence each token belongs to; block_tables: [num_seqs,
// max_blocks_per_seq] block ids. out: [num_tokens, num_heads·head_dim] f32, row stride ldo.
// The cache must already hold every key attention_first_key(positions[t])..positions[t] of the
// token's sequence (the keys before the window are never read).
void paged_attention(const float* q, int64_t ldq, const int32_t* positions, const int32_t* token_seq,
                     int64_t num_tokens, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     const KvCacheLayer& cache, const AttentionShape& shape, float* out, int64_t ldo, ThreadPool* pool);

}  // namespace ditto
