#include "kernels/attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/math.h"
#include "kernels/reduce.h"

namespace ditto {

void write_kv(const float* k, int64_t ldk, const float* v, int64_t ldv, const int64_t* slot_mapping,
              int64_t num_tokens, int64_t kv_dim, KvCacheLayer cache) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= cache.num_slots)
      throw_invalid_argument("slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                             " is outside the KV cache (" + std::to_string(cache.num_slots) + " slots)");
    uint16_t* kd = cache.k + slot * kv_dim;
    uint16_t* vd = cache.v + slot * kv_dim;
    for (int64_t i = 0; i < kv_dim; ++i) {
      kd[i] = f32_to_bf16(k[t * ldk + i]);
      vd[i] = f32_to_bf16(v[t * ldv + i]);
    }
  }
}

namespace {

// Attention of one query head at position `pos` over its sequence's cached keys 0..pos.
void attend_one(const float* q, int64_t pos, const int32_t* block_table, int64_t max_blocks,
                const KvCacheLayer& cache, const AttentionShape& s, int64_t kv_head, float* out,
                float* scratch /* [kAttentionTile + 2·head_dim] */) {
  const int64_t d = s.head_dim;
  const int64_t kv_dim = s.num_kv_heads * d;
  float* p = scratch;                        // [kAttentionTile] scores, then probabilities
  float* kf = scratch + kAttentionTile;      // [head_dim] one key in f32
  float* acc = kf + d;                       // [head_dim]
  for (int64_t i = 0; i < d; ++i) acc[i] = 0.0f;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  auto slot_of = [&](int64_t position) {
    const int64_t b = position / s.block_size;
    DITTO_CHECK(b < max_blocks) << "position " << position << " beyond the block table";
    return static_cast<int64_t>(block_table[b]) * s.block_size + position % s.block_size;
  };
  for (int64_t t0 = 0; t0 <= pos; t0 += kAttentionTile) {
    const int64_t n = std::min<int64_t>(kAttentionTile, pos + 1 - t0);
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* kb = cache.k + slot_of(t0 + j) * kv_dim + kv_head * d;
      for (int64_t i = 0; i < d; ++i) kf[i] = bf16_to_f32(kb[i]);
      p[j] = dot_f32(q, kf, d) * s.scale;
      tile_max = p[j] > tile_max ? p[j] : tile_max;
    }
    const float m_new = tile_max > m ? tile_max : m;
    const float alpha = exp_f32(m - m_new);  // exp(−inf) = 0 on the first tile
    float tile_sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = exp_f32(p[j] - m_new);
      tile_sum += p[j];
    }
    l = l * alpha + tile_sum;
    for (int64_t i = 0; i < d; ++i) acc[i] *= alpha;
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* vb = cache.v + slot_of(t0 + j) * kv_dim + kv_head * d;
      for (int64_t i = 0; i < d; ++i) acc[i] = std::fma(p[j], bf16_to_f32(vb[i]), acc[i]);
    }
    m = m_new;
  }
  for (int64_t i = 0; i < d; ++i) out[i] = acc[i] / l;
}

}  // namespace

void paged_attention(const float* q, int64_t ldq, const int32_t* positions, const int32_t* token_seq,
                     int64_t num_tokens, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     const KvCacheLayer& cache, const AttentionShape& shape, float* out, int64_t ldo,
                     ThreadPool* pool) {
  DITTO_CHECK(shape.num_heads % shape.num_kv_heads == 0);
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t d = shape.head_dim;
  auto run = [&](size_t begin, size_t end) {
    std::vector<float> scratch(static_cast<size_t>(kAttentionTile + 2 * d));
    for (size_t item = begin; item < end; ++item) {
      const int64_t t = static_cast<int64_t>(item) / shape.num_heads;
      const int64_t h = static_cast<int64_t>(item) % shape.num_heads;
      attend_one(q + t * ldq + h * d, positions[t], block_tables + token_seq[t] * max_blocks_per_seq,
                 max_blocks_per_seq, cache, shape, h / group, out + t * ldo + h * d, scratch.data());
    }
  };
  const size_t items = static_cast<size_t>(num_tokens * shape.num_heads);
  if (pool == nullptr) {
    run(0, items);
  } else {
    pool->parallel_for(items, run);
  }
}

}  // namespace ditto
