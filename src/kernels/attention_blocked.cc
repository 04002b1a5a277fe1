#include "kernels/attention_blocked.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/reduce.h"
#include "kernels/simd.h"

namespace ditto::attention_internal {

namespace {
constexpr int kKeyGroup = 8;  // keys per score micro-kernel
constexpr int kPvRows = 4;    // rows per acc += p·v micro-kernel
constexpr int kPvVecs = 4;    // 16-float vectors of head_dim per acc += p·v micro-kernel
}  // namespace

#if defined(__x86_64__)

namespace {

// The canonical tree (kernels/reduce.h) as a post-order walk over the 16 lane chains: chains taken
// in this order and merged like a binary counter (chain idx is added to the partial sum below it
// for every trailing 1-bit of idx) give ((L0+L8)+(L4+L12)) + ((L2+L10)+(L6+L14)) + … — lane j +=
// lane j+8, then +4, +2, +1, with the lower lane always the left operand.
constexpr int kTreeOrder[kReduceLanes] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

// Per-thread buffers of one block, all 64-byte aligned.
struct Workspace {
  std::vector<float> storage;
  std::vector<int32_t> pos;  // [rpad] each row's query position
  float* qt = nullptr;       // [head_dim, rpad] q transposed: qt[qt_row(i)·rpad + r]
  float* kf = nullptr;       // [kAttentionTile, head_dim] the tile's keys, f32
  float* vf = nullptr;       // [kAttentionTile, head_dim] the tile's values, f32
  float* s = nullptr;        // [kAttentionTile, rpad] scores, then probabilities
  float* acc = nullptr;      // [rpad, head_dim]
  float* m = nullptr;        // [rpad] running max
  float* l = nullptr;        // [rpad] running Σexp
  float* alpha = nullptr;    // [rpad] this tile's rescale factor (1 for rows without keys in it)

  void reserve(int64_t rpad, int64_t d) {
    const int64_t sizes[] = {
        d * rpad, kAttentionTile * d, kAttentionTile * d, kAttentionTile * rpad, rpad * d, rpad, rpad, rpad};
    int64_t total = 16;  // alignment slack
    for (int64_t n : sizes) total += (n + 15) / 16 * 16;
    if (static_cast<int64_t>(storage.size()) < total) storage.resize(static_cast<size_t>(total));
    pos.resize(static_cast<size_t>(rpad));
    float* p = storage.data();
    p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64 / sizeof(float);
    float** slots[] = {&qt, &kf, &vf, &s, &acc, &m, &l, &alpha};
    for (int i = 0; i < 8; ++i) {
      *slots[i] = p;
      p += (sizes[i] + 15) / 16 * 16;
    }
  }
};

// The row of element i of the queries in qt: lane-major (i mod 16, then i / 16), so that one lane
// chain of the dot reads consecutive rows.
inline int64_t qt_row(int64_t i, int64_t d) { return (i % kReduceLanes) * (d / kReduceLanes) + i / kReduceLanes; }

// Scores of kRv·16 rows (lanes) × kKeyGroup keys: s[j·lds + r] = dot(q_r, k_j), the canonical
// 16-lane dot computed lane chain by lane chain. qt: [head_dim, ldqt] transposed queries (rows by
// qt_row) at the first row; kf: [kKeyGroup, head_dim].
template <int kRv>
DITTO_AVX512 void scores(const float* qt, int64_t ldqt, const float* kf, int64_t d, float* s, int64_t lds) {
  __m512 partial[4][kRv][kKeyGroup];  // the tree's pending left operands, one per level
  __m512 a[kRv][kKeyGroup];
  for (int idx = 0; idx < kReduceLanes; ++idx) {
    const int lane = kTreeOrder[idx];
    for (int r = 0; r < kRv; ++r)
      for (int j = 0; j < kKeyGroup; ++j) a[r][j] = _mm512_setzero_ps();
    const float* qt_lane = qt + lane * (d / kReduceLanes) * ldqt;
    for (int64_t i = lane; i < d; i += kReduceLanes, qt_lane += ldqt) {
      __m512 qv[kRv];
      for (int r = 0; r < kRv; ++r) qv[r] = _mm512_load_ps(qt_lane + 16 * r);
      for (int j = 0; j < kKeyGroup; ++j) {
        const __m512 kb = _mm512_set1_ps(kf[j * d + i]);
        for (int r = 0; r < kRv; ++r) a[r][j] = _mm512_fmadd_ps(qv[r], kb, a[r][j]);
      }
    }
    int level = 0;
    for (; (idx >> level) & 1; ++level)
      for (int r = 0; r < kRv; ++r)
        for (int j = 0; j < kKeyGroup; ++j) a[r][j] = _mm512_add_ps(partial[level][r][j], a[r][j]);
    if (level < 4)
      for (int r = 0; r < kRv; ++r)
        for (int j = 0; j < kKeyGroup; ++j) partial[level][r][j] = a[r][j];
  }
  for (int r = 0; r < kRv; ++r)
    for (int j = 0; j < kKeyGroup; ++j) _mm512_store_ps(s + j * lds + 16 * r, a[r][j]);
}

// One tile's online-softmax update of 16 rows: rel[r] = position − t0 (row r takes keys
// 0..rel[r] of the tile's n; none if rel[r] < 0). s: [n, lds] scores in, probabilities out.
DITTO_AVX512 void softmax_update(float* s, int64_t lds, int64_t n, __m512i rel, float scale, float* m, float* l,
                                 float* alpha) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 tile_max = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 in = _mm512_cmpge_epi32_mask(rel, _mm512_set1_epi32(static_cast<int>(j)));
    const __m512 x = _mm512_mul_ps(_mm512_load_ps(s + j * lds), sc);
    _mm512_store_ps(s + j * lds, x);
    tile_max = _mm512_mask_max_ps(tile_max, in, x, tile_max);  // x > max ? x : max, as the scalar scan
  }
  const __m512 m_old = _mm512_load_ps(m);
  const __m512 m_new = _mm512_max_ps(tile_max, m_old);  // tile_max > m ? tile_max : m
  const __m512 a = simd::exp_x16(_mm512_sub_ps(m_old, m_new));
  __m512 tile_sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __mmask16 in = _mm512_cmpge_epi32_mask(rel, _mm512_set1_epi32(static_cast<int>(j)));
    const __m512 p = simd::exp_x16(_mm512_sub_ps(_mm512_load_ps(s + j * lds), m_new));
    _mm512_store_ps(s + j * lds, p);
    tile_sum = _mm512_mask_add_ps(tile_sum, in, tile_sum, p);
  }
  const __mmask16 active = _mm512_cmpge_epi32_mask(rel, _mm512_setzero_si512());
  const __m512 l_old = _mm512_load_ps(l);
  _mm512_store_ps(l, _mm512_mask_blend_ps(active, l_old, _mm512_add_ps(_mm512_mul_ps(l_old, a), tile_sum)));
  _mm512_store_ps(m, _mm512_mask_blend_ps(active, m_old, m_new));
  _mm512_store_ps(alpha, _mm512_mask_blend_ps(active, _mm512_set1_ps(1.0f), a));
}

// acc[r] = acc[r]·alpha[r], then acc[r][i] = fma(p[r][j], v_j[i], acc[r][i]) for j < n[r]
// ascending, for kPvRows rows; p[r][j] = s[j·lds + r]. acc: [kPvRows, d]; vf: [·, d].
DITTO_AVX512 void accumulate(float* acc, int64_t d, const float* alpha, const int64_t* n, const float* s, int64_t lds,
                             const float* vf) {
  const int64_t n_min = *std::min_element(n, n + kPvRows);
  const int64_t n_max = *std::max_element(n, n + kPvRows);
  for (int64_t i0 = 0; i0 < d; i0 += 16 * kPvVecs) {
    __m512 a[kPvRows][kPvVecs];
    for (int r = 0; r < kPvRows; ++r) {
      const __m512 al = _mm512_set1_ps(alpha[r]);
      for (int v = 0; v < kPvVecs; ++v) a[r][v] = _mm512_mul_ps(_mm512_load_ps(acc + r * d + i0 + 16 * v), al);
    }
    for (int64_t j = 0; j < n_min; ++j) {
      __m512 vv[kPvVecs];
      for (int v = 0; v < kPvVecs; ++v) vv[v] = _mm512_load_ps(vf + j * d + i0 + 16 * v);
      for (int r = 0; r < kPvRows; ++r) {
        const __m512 p = _mm512_set1_ps(s[j * lds + r]);
        for (int v = 0; v < kPvVecs; ++v) a[r][v] = _mm512_fmadd_ps(p, vv[v], a[r][v]);
      }
    }
    for (int64_t j = n_min; j < n_max; ++j) {  // the diagonal: rows whose position ends inside the tile
      for (int r = 0; r < kPvRows; ++r) {
        if (j >= n[r]) continue;
        const __m512 p = _mm512_set1_ps(s[j * lds + r]);
        for (int v = 0; v < kPvVecs; ++v)
          a[r][v] = _mm512_fmadd_ps(p, _mm512_load_ps(vf + j * d + i0 + 16 * v), a[r][v]);
      }
    }
    for (int r = 0; r < kPvRows; ++r)
      for (int v = 0; v < kPvVecs; ++v) _mm512_store_ps(acc + r * d + i0 + 16 * v, a[r][v]);
  }
}

// The tile's keys and values t0..t0+n−1 of one KV head, bf16 → f32 (exact); key rows n..up to the
// next multiple of kKeyGroup are zeroed (their scores are computed and never used).
DITTO_AVX512 void load_tile(const KvCacheLayer& cache, const KeySlots& slots, int64_t kv_dim, int64_t head_offset,
                            int64_t t0, int64_t n, int64_t d, float* kf, float* vf) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t off = slots.slot(t0 + j) * kv_dim + head_offset;
    for (int64_t i = 0; i < d; i += 16) {
      _mm512_store_ps(kf + j * d + i, simd::load_bf16_x16(cache.k + off + i));
      _mm512_store_ps(vf + j * d + i, simd::load_bf16_x16(cache.v + off + i));
    }
  }
  const int64_t padded = (n + kKeyGroup - 1) / kKeyGroup * kKeyGroup;
  for (int64_t j = n; j < padded; ++j)
    for (int64_t i = 0; i < d; i += 16) _mm512_store_ps(kf + j * d + i, _mm512_setzero_ps());
}

// Asks for keys and values t0..t0+n−1 (the next tile) while this one is computed: a KV head's rows
// are kv_dim apart and scattered over blocks, beyond what the hardware prefetchers follow.
void prefetch_tile(const KvCacheLayer& cache, const KeySlots& slots, int64_t kv_dim, int64_t head_offset, int64_t t0,
                   int64_t n, int64_t d) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t off = slots.slot(t0 + j) * kv_dim + head_offset;
    for (int64_t i = 0; i < d; i += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(cache.k + off + i), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(cache.v + off + i), _MM_HINT_T1);
    }
  }
}

DITTO_AVX512 void attend_block_avx512(const QueryBlock& b, const KvCacheLayer& cache, const AttentionShape& shape) {
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t d = shape.head_dim;
  const int64_t kv_dim = shape.num_kv_heads * d;
  const int64_t rows = b.num_positions * group;
  const int64_t rpad = (rows + 15) / 16 * 16;
  thread_local Workspace ws;
  ws.reserve(rpad, d);
  const int64_t last = b.first_position + b.num_positions - 1;
  for (int64_t r = 0; r < rpad; ++r) {
    const int64_t i = std::min(r, rows - 1) / group;  // padding rows repeat the last position, with q = 0
    ws.pos[static_cast<size_t>(r)] = static_cast<int32_t>(b.first_position + i);
    const float* q = b.q + i * b.ldq + (b.kv_head * group + r % group) * d;
    for (int64_t k = 0; k < d; ++k) ws.qt[qt_row(k, d) * rpad + r] = r < rows ? q[k] : 0.0f;
    ws.m[r] = -std::numeric_limits<float>::infinity();
    ws.l[r] = 0.0f;
    for (int64_t k = 0; k < d; ++k) ws.acc[r * d + k] = 0.0f;
  }
  for (int64_t t0 = 0; t0 <= last; t0 += kAttentionTile) {
    const int64_t n = std::min<int64_t>(kAttentionTile, last + 1 - t0);
    load_tile(cache, b.slots, kv_dim, b.kv_head * d, t0, n, d, ws.kf, ws.vf);
    if (t0 + kAttentionTile <= last)
      prefetch_tile(cache, b.slots, kv_dim, b.kv_head * d, t0 + kAttentionTile,
                    std::min<int64_t>(kAttentionTile, last + 1 - t0 - kAttentionTile), d);
    // Rows before first_row have no key in this tile (their position is below t0).
    const int64_t first_row = std::max<int64_t>(0, t0 - b.first_position) * group;
    const int64_t rv0 = first_row / 16 * 16;
    for (int64_t r = rv0; r < rpad; r += 32) {
      for (int64_t j = 0; j < n; j += kKeyGroup) {
        if (rpad - r >= 32) {
          scores<2>(ws.qt + r, rpad, ws.kf + j * d, d, ws.s + j * rpad + r, rpad);
        } else {
          scores<1>(ws.qt + r, rpad, ws.kf + j * d, d, ws.s + j * rpad + r, rpad);
        }
      }
    }
    const __m512i t0v = _mm512_set1_epi32(static_cast<int>(t0));
    for (int64_t r = rv0; r < rpad; r += 16) {
      const __m512i rel = _mm512_sub_epi32(_mm512_loadu_si512(ws.pos.data() + r), t0v);
      softmax_update(ws.s + r, rpad, n, rel, shape.scale, ws.m + r, ws.l + r, ws.alpha + r);
    }
    for (int64_t r = first_row / kPvRows * kPvRows; r < rpad; r += kPvRows) {
      int64_t keys[kPvRows];
      for (int i = 0; i < kPvRows; ++i)
        keys[i] = std::clamp<int64_t>(ws.pos[static_cast<size_t>(r + i)] + 1 - t0, 0, n);
      accumulate(ws.acc + r * d, d, ws.alpha + r, keys, ws.s + r, rpad, ws.vf);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 l = _mm512_set1_ps(ws.l[r]);
    float* out = b.out + (r / group) * b.ldo + (b.kv_head * group + r % group) * d;
    for (int64_t i = 0; i < d; i += 16) _mm512_storeu_ps(out + i, _mm512_div_ps(_mm512_load_ps(ws.acc + r * d + i), l));
  }
}

}  // namespace

#endif  // __x86_64__

bool block_kernel_available(const AttentionShape& shape) {
#if defined(__x86_64__)
  return active_isa() == Isa::kAvx512 && shape.head_dim % (16 * kPvVecs) == 0 && shape.head_dim <= 256;
#else
  (void)shape;
  return false;
#endif
}

void attend_block(const QueryBlock& block, const KvCacheLayer& cache, const AttentionShape& shape) {
#if defined(__x86_64__)
  attend_block_avx512(block, cache, shape);
#else
  (void)block;
  (void)cache;
  (void)shape;
  DITTO_CHECK(false) << "no blocked attention kernel on this platform";
#endif
}

}  // namespace ditto::attention_internal
