#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/math.h"
#include "kernels/reduce.h"
#include "kernels/simd.h"

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

// Where one query's keys live: slot of absolute position `position` of its sequence.
struct KeySlots {
  const int32_t* block_table;
  int64_t max_blocks;
  int64_t block_size;
  int64_t slot(int64_t position) const {
    const int64_t b = position / block_size;
    DITTO_CHECK(b < max_blocks) << "position " << position << " beyond the block table";
    return static_cast<int64_t>(block_table[b]) * block_size + position % block_size;
  }
};

// The per-path pieces of one tile: scores, the running rescale of acc, and acc += Σ p_t·v_t.
struct PortableOps {
  static float score(const float* q, const uint16_t* k, int64_t d, float* kf) {
    for (int64_t i = 0; i < d; ++i) kf[i] = bf16_to_f32(k[i]);
    return dot_f32(q, kf, d);
  }
  static void scale(float* acc, int64_t d, float alpha) {
    for (int64_t i = 0; i < d; ++i) acc[i] *= alpha;
  }
  static void accumulate(float* acc, int64_t d, float p, const uint16_t* v) {
    for (int64_t i = 0; i < d; ++i) acc[i] = std::fma(p, bf16_to_f32(v[i]), acc[i]);
  }
};

#if defined(__x86_64__)
struct Avx512Ops {
  DITTO_AVX512 static float score(const float* q, const uint16_t* k, int64_t d, float*) {
    return simd::dot_x16(q, k, d);
  }
  DITTO_AVX512 static void scale(float* acc, int64_t d, float alpha) {
    const __m512 a = _mm512_set1_ps(alpha);
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = simd::first_lanes_x16(d - i < 16 ? d - i : 16);
      _mm512_mask_storeu_ps(acc + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + i), a));
    }
  }
  DITTO_AVX512 static void accumulate(float* acc, int64_t d, float p, const uint16_t* v) {
    const __m512 pv = _mm512_set1_ps(p);
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = simd::first_lanes_x16(d - i < 16 ? d - i : 16);
      const __m512 vv = simd::maskz_load_x16(m, v + i);
      _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(pv, vv, _mm512_maskz_loadu_ps(m, acc + i)));
    }
  }
};

struct Avx2Ops {
  DITTO_AVX2 static float score(const float* q, const uint16_t* k, int64_t d, float*) {
    return simd::dot_x8x2(q, k, d);
  }
  DITTO_AVX2 static void scale(float* acc, int64_t d, float alpha) {
    const __m256 a = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), a));
    for (; i < d; ++i) acc[i] *= alpha;
  }
  DITTO_AVX2 static void accumulate(float* acc, int64_t d, float p, const uint16_t* v) {
    const __m256 pv = _mm256_set1_ps(p);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, simd::load_bf16_x8(v + i), _mm256_loadu_ps(acc + i)));
    for (; i < d; ++i) acc[i] = std::fma(p, bf16_to_f32(v[i]), acc[i]);
  }
};
#endif

// Attention of one query head at position `pos` over its sequence's cached keys 0..pos, in the
// order the header states; Ops supplies the vector pieces (each reproduces PortableOps' bits).
template <typename Ops>
void attend_one(const float* q, int64_t pos, const KeySlots& slots, const KvCacheLayer& cache,
                const AttentionShape& s, int64_t kv_head, float* out,
                float* scratch /* [kAttentionTile + 2·head_dim] */) {
  const int64_t d = s.head_dim;
  const int64_t kv_dim = s.num_kv_heads * d;
  float* p = scratch;                        // [kAttentionTile] scores, then probabilities
  float* kf = scratch + kAttentionTile;      // [head_dim] one key in f32 (portable path)
  float* acc = kf + d;                       // [head_dim]
  for (int64_t i = 0; i < d; ++i) acc[i] = 0.0f;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  int64_t offsets[kAttentionTile];  // element offset of each tile position's head in the cache
  for (int64_t t0 = 0; t0 <= pos; t0 += kAttentionTile) {
    const int64_t n = std::min<int64_t>(kAttentionTile, pos + 1 - t0);
    for (int64_t j = 0; j < n; ++j) offsets[j] = slots.slot(t0 + j) * kv_dim + kv_head * d;
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      p[j] = Ops::score(q, cache.k + offsets[j], d, kf) * s.scale;
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
    Ops::scale(acc, d, alpha);
    for (int64_t j = 0; j < n; ++j) Ops::accumulate(acc, d, p[j], cache.v + offsets[j]);
    m = m_new;
  }
  for (int64_t i = 0; i < d; ++i) out[i] = acc[i] / l;
}

using AttendFn = void (*)(const float*, int64_t, const KeySlots&, const KvCacheLayer&,
                          const AttentionShape&, int64_t, float*, float*);

AttendFn attend_fn() {
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return attend_one<Avx512Ops>;
    case Isa::kAvx2: return attend_one<Avx2Ops>;
    case Isa::kScalar: break;
  }
#endif
  return attend_one<PortableOps>;
}

}  // namespace

void paged_attention(const float* q, int64_t ldq, const int32_t* positions, const int32_t* token_seq,
                     int64_t num_tokens, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     const KvCacheLayer& cache, const AttentionShape& shape, float* out, int64_t ldo,
                     ThreadPool* pool) {
  DITTO_CHECK(shape.num_heads % shape.num_kv_heads == 0);
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t d = shape.head_dim;
  const AttendFn attend = attend_fn();
  auto run = [&](size_t begin, size_t end) {
    std::vector<float> scratch(static_cast<size_t>(kAttentionTile + 2 * d));
    for (size_t item = begin; item < end; ++item) {
      const int64_t t = static_cast<int64_t>(item) / shape.num_heads;
      const int64_t h = static_cast<int64_t>(item) % shape.num_heads;
      const KeySlots slots{block_tables + token_seq[t] * max_blocks_per_seq, max_blocks_per_seq,
                           shape.block_size};
      attend(q + t * ldq + h * d, positions[t], slots, cache, shape, h / group, out + t * ldo + h * d,
             scratch.data());
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
