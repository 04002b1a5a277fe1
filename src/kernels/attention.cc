#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/attention_blocked.h"
#include "kernels/convert.h"
#include "kernels/math.h"
#include "kernels/portable_clones.h"
#include "kernels/reduce.h"
#include "kernels/simd.h"

namespace ditto {

void write_kv(const float* k, int64_t ldk, const float* v, int64_t ldv, const int64_t* slot_mapping, int64_t num_tokens,
              int64_t kv_dim, KvCacheLayer cache) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= cache.num_slots)
      throw_invalid_argument("slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                             " is outside the KV cache (" + std::to_string(cache.num_slots) + " slots)");
    round_to_bf16(k + t * ldk, kv_dim, cache.k + slot * kv_dim);
    round_to_bf16(v + t * ldv, kv_dim, cache.v + slot * kv_dim);
  }
}

namespace {

using attention_internal::KeySlots;

// The per-path pieces of one tile of n ≤ kAttentionTile keys (offsets[j]: element offset of key j's
// head in the cache). Each path reproduces PortableOps' bits:
//   scores:     p[j] = dot(q, k_j) (canonical 16-lane dot, kernels/reduce.h)
//   exp_shift:  p[j] = exp_f32(p[j] − m)
//   accumulate: acc[i] = acc[i]·α, then acc[i] = fma(p[j], v_j[i], acc[i]) for j ascending
struct PortableOps {
  DITTO_PORTABLE_HOT static void scores(const float* q, const uint16_t* k, const int64_t* offsets, int64_t n, int64_t d,
                                        float* p, float* kf) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < d; ++i) kf[i] = bf16_to_f32(k[offsets[j] + i]);
      p[j] = dot_f32(q, kf, d);
    }
  }
  DITTO_PORTABLE_HOT static void exp_shift(float* p, int64_t n, float m) {
    for (int64_t j = 0; j < n; ++j) p[j] = exp_f32(p[j] - m);
  }
  DITTO_PORTABLE_HOT static void accumulate(float* acc, int64_t d, float alpha, const float* p, const uint16_t* v,
                                            const int64_t* offsets, int64_t n) {
    for (int64_t i = 0; i < d; ++i) acc[i] *= alpha;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < d; ++i) acc[i] = std::fma(p[j], bf16_to_f32(v[offsets[j] + i]), acc[i]);
  }
};

#if defined(__x86_64__)
struct Avx512Ops {
  // Four keys at a time: four independent lane-chains hide the FMA latency; each key's chain is
  // the same as dot_x16's.
  DITTO_AVX512 static void scores(const float* q, const uint16_t* k, const int64_t* offsets, int64_t n, int64_t d,
                                  float* p, float*) {
    int64_t j = 0;
    if (d % 16 == 0) {
      for (; j + 4 <= n; j += 4) {
        const uint16_t* k0 = k + offsets[j];
        const uint16_t* k1 = k + offsets[j + 1];
        const uint16_t* k2 = k + offsets[j + 2];
        const uint16_t* k3 = k + offsets[j + 3];
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < d; i += 16) {
          const __m512 qv = _mm512_loadu_ps(q + i);
          a0 = _mm512_fmadd_ps(qv, simd::load_bf16_x16(k0 + i), a0);
          a1 = _mm512_fmadd_ps(qv, simd::load_bf16_x16(k1 + i), a1);
          a2 = _mm512_fmadd_ps(qv, simd::load_bf16_x16(k2 + i), a2);
          a3 = _mm512_fmadd_ps(qv, simd::load_bf16_x16(k3 + i), a3);
        }
        p[j] = simd::reduce_lanes_x16(a0);
        p[j + 1] = simd::reduce_lanes_x16(a1);
        p[j + 2] = simd::reduce_lanes_x16(a2);
        p[j + 3] = simd::reduce_lanes_x16(a3);
      }
    }
    for (; j < n; ++j) p[j] = simd::dot_x16(q, k + offsets[j], d);
  }
  DITTO_AVX512 static void exp_shift(float* p, int64_t n, float m) {
    const __m512 mv = _mm512_set1_ps(m);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mask = simd::first_lanes_x16(n - j < 16 ? n - j : 16);
      _mm512_mask_storeu_ps(p + j, mask, simd::exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, p + j), mv)));
    }
  }
  // acc stays in registers for up to 128 lanes at a time while the tile's keys stream past.
  DITTO_AVX512 static void accumulate(float* acc, int64_t d, float alpha, const float* p, const uint16_t* v,
                                      const int64_t* offsets, int64_t n) {
    constexpr int kRegs = 8;
    const __m512 av = _mm512_set1_ps(alpha);
    for (int64_t i0 = 0; i0 < d; i0 += 16 * kRegs) {
      __m512 a[kRegs];
      __mmask16 mask[kRegs];
      for (int r = 0; r < kRegs; ++r) {
        const int64_t i = i0 + 16 * r;
        mask[r] = simd::first_lanes_x16(i >= d ? 0 : (d - i < 16 ? d - i : 16));
        a[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[r], acc + i), av);
      }
      for (int64_t j = 0; j < n; ++j) {
        const __m512 pv = _mm512_set1_ps(p[j]);
        const uint16_t* vj = v + offsets[j] + i0;
        for (int r = 0; r < kRegs; ++r) a[r] = _mm512_fmadd_ps(pv, simd::maskz_load_x16(mask[r], vj + 16 * r), a[r]);
      }
      for (int r = 0; r < kRegs; ++r) _mm512_mask_storeu_ps(acc + i0 + 16 * r, mask[r], a[r]);
    }
  }
};

struct Avx2Ops {
  DITTO_AVX2 static void scores(const float* q, const uint16_t* k, const int64_t* offsets, int64_t n, int64_t d,
                                float* p, float*) {
    for (int64_t j = 0; j < n; ++j) p[j] = simd::dot_x8x2(q, k + offsets[j], d);
  }
  DITTO_AVX2 static void exp_shift(float* p, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(p + j, simd::exp_x8(_mm256_sub_ps(_mm256_loadu_ps(p + j), mv)));
    for (; j < n; ++j) p[j] = exp_f32(p[j] - m);
  }
  DITTO_AVX2 static void accumulate(float* acc, int64_t d, float alpha, const float* p, const uint16_t* v,
                                    const int64_t* offsets, int64_t n) {
    const __m256 av = _mm256_set1_ps(alpha);
    int64_t i0 = 0;
    for (; i0 + 32 <= d; i0 += 32) {
      __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + i0), av);
      __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + i0 + 8), av);
      __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + i0 + 16), av);
      __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + i0 + 24), av);
      for (int64_t j = 0; j < n; ++j) {
        const __m256 pv = _mm256_set1_ps(p[j]);
        const uint16_t* vj = v + offsets[j] + i0;
        a0 = _mm256_fmadd_ps(pv, simd::load_bf16_x8(vj), a0);
        a1 = _mm256_fmadd_ps(pv, simd::load_bf16_x8(vj + 8), a1);
        a2 = _mm256_fmadd_ps(pv, simd::load_bf16_x8(vj + 16), a2);
        a3 = _mm256_fmadd_ps(pv, simd::load_bf16_x8(vj + 24), a3);
      }
      _mm256_storeu_ps(acc + i0, a0);
      _mm256_storeu_ps(acc + i0 + 8, a1);
      _mm256_storeu_ps(acc + i0 + 16, a2);
      _mm256_storeu_ps(acc + i0 + 24, a3);
    }
    for (int64_t i = i0; i < d; ++i) acc[i] *= alpha;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = i0; i < d; ++i) acc[i] = std::fma(p[j], bf16_to_f32(v[offsets[j] + i]), acc[i]);
  }
};
#endif

// Attention of one query head at position `pos` over its sequence's cached keys
// attention_first_key(pos)..pos, in the order the header states; Ops supplies the vector pieces.
template <typename Ops>
void attend_one(const float* q, int64_t pos, const KeySlots& slots, const KvCacheLayer& cache, const AttentionShape& s,
                int64_t kv_head, float* out, float* scratch /* [kAttentionTile + 2·head_dim] */) {
  const int64_t d = s.head_dim;
  const int64_t kv_dim = s.num_kv_heads * d;
  float* p = scratch;                    // [kAttentionTile] scores, then probabilities
  float* kf = scratch + kAttentionTile;  // [head_dim] one key in f32 (portable path)
  float* acc = kf + d;                   // [head_dim]
  for (int64_t i = 0; i < d; ++i) acc[i] = 0.0f;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  int64_t offsets[kAttentionTile];  // element offset of each tile position's head in the cache
  const int64_t first = attention_first_key(pos, s);
  for (int64_t t0 = first / kAttentionTile * kAttentionTile; t0 <= pos; t0 += kAttentionTile) {
    const int64_t k0 = std::max(t0, first);  // the tile's first visible key
    const int64_t n = std::min<int64_t>(t0 + kAttentionTile, pos + 1) - k0;
    for (int64_t j = 0; j < n; ++j) offsets[j] = slots.slot(k0 + j) * kv_dim + kv_head * d;
    Ops::scores(q, cache.k, offsets, n, d, p, kf);
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      p[j] = p[j] * s.scale;
      tile_max = p[j] > tile_max ? p[j] : tile_max;
    }
    const float m_new = tile_max > m ? tile_max : m;
    const float alpha = exp_f32(m - m_new);  // exp(−inf) = 0 on the first tile
    Ops::exp_shift(p, n, m_new);
    float tile_sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) tile_sum += p[j];
    l = l * alpha + tile_sum;
    Ops::accumulate(acc, d, alpha, p, cache.v, offsets, n);
    m = m_new;
  }
  for (int64_t i = 0; i < d; ++i) out[i] = acc[i] / l;
}

using AttendFn = void (*)(const float*, int64_t, const KeySlots&, const KvCacheLayer&, const AttentionShape&, int64_t,
                          float*, float*);

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

// One unit of parallel work: the G query heads of one KV head for `count` consecutive positions of
// one sequence starting at token `token` (a query block), or one (token, head) pair (count 0).
struct WorkItem {
  int64_t token;
  int64_t count;
  int64_t head;  // the KV head of a block, the query head of a single pair
  int64_t cost;  // keys × query heads, for handing out the longest items first
};

// Splits the batch into query blocks (runs of consecutive positions of one sequence, cut every
// block_positions positions) wherever a block fills at least one vector of 16 rows; every other
// token attends alone, one item per head.
std::vector<WorkItem> plan_work(const int32_t* positions, const int32_t* token_seq, int64_t num_tokens,
                                const AttentionShape& shape) {
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t per_block = attention_internal::block_positions(group);
  std::vector<WorkItem> items;
  for (int64_t t = 0; t < num_tokens;) {
    int64_t end = t + 1;
    while (end < num_tokens && token_seq[end] == token_seq[t] && positions[end] == positions[end - 1] + 1) ++end;
    for (int64_t b = t; b < end; b += per_block) {
      const int64_t count = std::min(per_block, end - b);
      if (count * group >= 16) {
        for (int64_t h = 0; h < shape.num_kv_heads; ++h)
          items.push_back(
              {b, count, h, (positions[b + count - 1] + 1 - attention_first_key(positions[b], shape)) * count * group});
      } else {
        for (int64_t i = b; i < b + count; ++i)
          for (int64_t h = 0; h < shape.num_heads; ++h)
            items.push_back({i, 0, h, positions[i] + 1 - attention_first_key(positions[i], shape)});
      }
    }
    t = end;
  }
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  return items;
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
  const auto slots_of = [&](int64_t t) {
    return KeySlots{block_tables + token_seq[t] * max_blocks_per_seq, max_blocks_per_seq, shape.block_size};
  };
  std::vector<WorkItem> items;
  if (attention_internal::block_kernel_available(shape)) items = plan_work(positions, token_seq, num_tokens, shape);
  if (std::none_of(items.begin(), items.end(), [](const WorkItem& w) { return w.count > 0; })) {
    // Every query alone (decode, or a path without the blocked kernel): (token, head) pairs.
    auto run = [&](size_t begin, size_t end) {
      std::vector<float> scratch(static_cast<size_t>(kAttentionTile + 2 * d));
      for (size_t item = begin; item < end; ++item) {
        const int64_t t = static_cast<int64_t>(item) / shape.num_heads;
        const int64_t h = static_cast<int64_t>(item) % shape.num_heads;
        attend(q + t * ldq + h * d, positions[t], slots_of(t), cache, shape, h / group, out + t * ldo + h * d,
               scratch.data());
      }
    };
    const size_t n = static_cast<size_t>(num_tokens * shape.num_heads);
    if (pool == nullptr) {
      run(0, n);
    } else {
      pool->parallel_for(n, run);
    }
    return;
  }
  auto run = [&](size_t begin, size_t end) {
    std::vector<float> scratch(static_cast<size_t>(kAttentionTile + 2 * d));
    for (size_t i = begin; i < end; ++i) {
      const WorkItem& w = items[i];
      const int64_t t = w.token;
      if (w.count == 0) {
        attend(q + t * ldq + w.head * d, positions[t], slots_of(t), cache, shape, w.head / group,
               out + t * ldo + w.head * d, scratch.data());
      } else {
        const attention_internal::QueryBlock block{q + t * ldq,  ldq,     out + t * ldo, ldo,
                                                   positions[t], w.count, w.head,        slots_of(t)};
        attention_internal::attend_block(block, cache, shape);
      }
    }
  };
  if (pool == nullptr) {
    run(0, items.size());
  } else {
    pool->parallel_for_dynamic(items.size(), 1, run);
  }
}

}  // namespace ditto
