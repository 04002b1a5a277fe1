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

// The tile keys [b[r], n[r]) of kPvRows rows, as three runs visited in ascending key order, so each
// row's chain stays ascending: [begin, all_begin) and [all_end, end) key by key for the rows that
// have the key, [all_begin, all_end) for every row at once.
struct KeyRanges {
  int64_t begin, all_begin, all_end, end;
};
inline KeyRanges key_ranges(const int64_t* b, const int64_t* n) {
  const int64_t b_max = *std::max_element(b, b + kPvRows);
  return {*std::min_element(b, b + kPvRows), b_max, std::max(b_max, *std::min_element(n, n + kPvRows)),
          *std::max_element(n, n + kPvRows)};
}
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
  std::vector<int32_t> lo;   // [rpad] each row's first key (attention_first_key)
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
    lo.resize(static_cast<size_t>(rpad));
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

// ---- AVX-512: 16 rows per vector --------------------------------------------------------------

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

// One tile's online-softmax update of 16 rows at positions pos[0..15] with first keys lo[0..15]:
// rel[r] = pos[r] − t0, rlo[r] = lo[r] − t0 (row r takes keys max(rlo[r], 0)..rel[r] of the tile's n;
// none if rel[r] < 0 or rlo[r] ≥ n). s: [n, lds] scores in, probabilities out.
DITTO_AVX512 void softmax_update(float* s, int64_t lds, int64_t n, const int32_t* pos, const int32_t* lo, int64_t t0,
                                 float scale, float* m, float* l, float* alpha) {
  const __m512i rel = _mm512_sub_epi32(_mm512_loadu_si512(pos), _mm512_set1_epi32(static_cast<int>(t0)));
  const __m512i rlo = _mm512_sub_epi32(_mm512_loadu_si512(lo), _mm512_set1_epi32(static_cast<int>(t0)));
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 tile_max = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    const __m512i jv = _mm512_set1_epi32(static_cast<int>(j));
    const __mmask16 in = _mm512_mask_cmple_epi32_mask(_mm512_cmpge_epi32_mask(rel, jv), rlo, jv);
    const __m512 x = _mm512_mul_ps(_mm512_load_ps(s + j * lds), sc);
    _mm512_store_ps(s + j * lds, x);
    tile_max = _mm512_mask_max_ps(tile_max, in, x, tile_max);  // x > max ? x : max, as the scalar scan
  }
  const __m512 m_old = _mm512_load_ps(m);
  const __m512 m_new = _mm512_max_ps(tile_max, m_old);  // tile_max > m ? tile_max : m
  const __m512 a = simd::exp_x16(_mm512_sub_ps(m_old, m_new));
  __m512 tile_sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m512i jv = _mm512_set1_epi32(static_cast<int>(j));
    const __mmask16 in = _mm512_mask_cmple_epi32_mask(_mm512_cmpge_epi32_mask(rel, jv), rlo, jv);
    const __m512 p = simd::exp_x16(_mm512_sub_ps(_mm512_load_ps(s + j * lds), m_new));
    _mm512_store_ps(s + j * lds, p);
    tile_sum = _mm512_mask_add_ps(tile_sum, in, tile_sum, p);
  }
  const __mmask16 active = _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(rel, _mm512_setzero_si512()), rlo,
                                                        _mm512_set1_epi32(static_cast<int>(n)));
  const __m512 l_old = _mm512_load_ps(l);
  _mm512_store_ps(l, _mm512_mask_blend_ps(active, l_old, _mm512_add_ps(_mm512_mul_ps(l_old, a), tile_sum)));
  _mm512_store_ps(m, _mm512_mask_blend_ps(active, m_old, m_new));
  _mm512_store_ps(alpha, _mm512_mask_blend_ps(active, _mm512_set1_ps(1.0f), a));
}

// acc[r] = acc[r]·alpha[r], then acc[r][i] = fma(p[r][j], v_j[i], acc[r][i]) for j in
// [b[r], n[r]) ascending, for kPvRows rows; p[r][j] = s[j·lds + r]. acc: [kPvRows, d]; vf: [·, d].
DITTO_AVX512 void accumulate(float* acc, int64_t d, const float* alpha, const int64_t* b, const int64_t* n,
                             const float* s, int64_t lds, const float* vf) {
  const KeyRanges k = key_ranges(b, n);
  for (int64_t i0 = 0; i0 < d; i0 += 16 * kPvVecs) {
    __m512 a[kPvRows][kPvVecs];
    for (int r = 0; r < kPvRows; ++r) {
      const __m512 al = _mm512_set1_ps(alpha[r]);
      for (int v = 0; v < kPvVecs; ++v) a[r][v] = _mm512_mul_ps(_mm512_load_ps(acc + r * d + i0 + 16 * v), al);
    }
    for (int64_t j = k.begin; j < k.all_begin; ++j) {  // rows whose window starts inside the tile
      for (int r = 0; r < kPvRows; ++r) {
        if (j >= n[r] || j < b[r]) continue;
        const __m512 p = _mm512_set1_ps(s[j * lds + r]);
        for (int v = 0; v < kPvVecs; ++v)
          a[r][v] = _mm512_fmadd_ps(p, _mm512_load_ps(vf + j * d + i0 + 16 * v), a[r][v]);
      }
    }
    for (int64_t j = k.all_begin; j < k.all_end; ++j) {
      __m512 vv[kPvVecs];
      for (int v = 0; v < kPvVecs; ++v) vv[v] = _mm512_load_ps(vf + j * d + i0 + 16 * v);
      for (int r = 0; r < kPvRows; ++r) {
        const __m512 p = _mm512_set1_ps(s[j * lds + r]);
        for (int v = 0; v < kPvVecs; ++v) a[r][v] = _mm512_fmadd_ps(p, vv[v], a[r][v]);
      }
    }
    for (int64_t j = k.all_end; j < k.end; ++j) {  // the diagonal: rows whose position ends inside the tile
      for (int r = 0; r < kPvRows; ++r) {
        if (j >= n[r] || j < b[r]) continue;
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

// out[i] = acc[i] / l for one row (d a multiple of 16).
DITTO_AVX512 void finish_avx512(const float* acc, float l, int64_t d, float* out) {
  const __m512 lv = _mm512_set1_ps(l);
  for (int64_t i = 0; i < d; i += 16) _mm512_storeu_ps(out + i, _mm512_div_ps(_mm512_load_ps(acc + i), lv));
}

struct Avx512Path {
  static constexpr int64_t kRowLanes = 16;
  // Scores of rows r0 .. rpad − 1 against the tile's keys 0 .. n − 1 (padded to kKeyGroup).
  DITTO_AVX512 static void score_tile(const float* qt, int64_t rpad, int64_t r0, const float* kf, int64_t n, int64_t d,
                                      float* s) {
    for (int64_t r = r0; r < rpad; r += 32) {
      for (int64_t j = 0; j < n; j += kKeyGroup) {
        if (rpad - r >= 32) {
          scores<2>(qt + r, rpad, kf + j * d, d, s + j * rpad + r, rpad);
        } else {
          scores<1>(qt + r, rpad, kf + j * d, d, s + j * rpad + r, rpad);
        }
      }
    }
  }
  static void softmax_rows(float* s, int64_t lds, int64_t n, const int32_t* pos, const int32_t* lo, int64_t t0,
                           float scale, float* m, float* l, float* alpha) {
    softmax_update(s, lds, n, pos, lo, t0, scale, m, l, alpha);
  }
  static void accumulate_rows(float* acc, int64_t d, const float* alpha, const int64_t* b, const int64_t* n,
                              const float* s, int64_t lds, const float* vf) {
    accumulate(acc, d, alpha, b, n, s, lds, vf);
  }
  static void load(const KvCacheLayer& cache, const KeySlots& slots, int64_t kv_dim, int64_t head_offset, int64_t t0,
                   int64_t n, int64_t d, float* kf, float* vf) {
    load_tile(cache, slots, kv_dim, head_offset, t0, n, d, kf, vf);
  }
  static void finish(const float* acc, float l, int64_t d, float* out) { finish_avx512(acc, l, d, out); }
};

// ---- AVX2: 8 rows per vector ------------------------------------------------------------------

// Scores of 16 rows (two vectors of 8 lanes) × kKeys keys, as scores<> above: s[j·lds + r] =
// dot(q_r, k_j), chain by chain in kTreeOrder and merged by the canonical tree.
template <int kKeys>
DITTO_AVX2 void scores_x8x2(const float* qt, int64_t ldqt, const float* kf, int64_t d, float* s, int64_t lds) {
  __m256 partial[4][2][kKeys];
  __m256 a[2][kKeys];
  for (int idx = 0; idx < kReduceLanes; ++idx) {
    const int lane = kTreeOrder[idx];
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < kKeys; ++j) a[r][j] = _mm256_setzero_ps();
    const float* qt_lane = qt + lane * (d / kReduceLanes) * ldqt;
    for (int64_t i = lane; i < d; i += kReduceLanes, qt_lane += ldqt) {
      const __m256 q0 = _mm256_load_ps(qt_lane);
      const __m256 q1 = _mm256_load_ps(qt_lane + 8);
      for (int j = 0; j < kKeys; ++j) {
        const __m256 kb = _mm256_broadcast_ss(kf + j * d + i);
        a[0][j] = _mm256_fmadd_ps(q0, kb, a[0][j]);
        a[1][j] = _mm256_fmadd_ps(q1, kb, a[1][j]);
      }
    }
    int level = 0;
    for (; (idx >> level) & 1; ++level)
      for (int r = 0; r < 2; ++r)
        for (int j = 0; j < kKeys; ++j) a[r][j] = _mm256_add_ps(partial[level][r][j], a[r][j]);
    if (level < 4)
      for (int r = 0; r < 2; ++r)
        for (int j = 0; j < kKeys; ++j) partial[level][r][j] = a[r][j];
  }
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < kKeys; ++j) _mm256_store_ps(s + j * lds + 8 * r, a[r][j]);
}

// softmax_update for 8 rows: the masks of the AVX-512 kernel as all-ones lanes, blends for the
// masked operations (a lane outside the mask keeps its value, as there).
// Whether key j of the tile is row r's: rel[r] ≥ j and rlo[r] ≤ j, as all-ones lanes.
DITTO_AVX2 DITTO_INLINE __m256 key_in_x8(__m256i rel, __m256i rlo, int64_t j) {
  const __m256i jv = _mm256_set1_epi32(static_cast<int>(j));
  return _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(rlo, jv),
                                                 _mm256_cmpgt_epi32(rel, _mm256_set1_epi32(static_cast<int>(j) - 1))));
}

DITTO_AVX2 void softmax_update_x8(float* s, int64_t lds, int64_t n, __m256i rel, __m256i rlo, float scale, float* m,
                                  float* l, float* alpha) {
  const __m256 sc = _mm256_set1_ps(scale);
  __m256 tile_max = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    const __m256 in = key_in_x8(rel, rlo, j);
    const __m256 x = _mm256_mul_ps(_mm256_load_ps(s + j * lds), sc);
    _mm256_store_ps(s + j * lds, x);
    tile_max = _mm256_blendv_ps(tile_max, _mm256_max_ps(x, tile_max), in);  // x > max ? x : max
  }
  const __m256 m_old = _mm256_load_ps(m);
  const __m256 m_new = _mm256_max_ps(tile_max, m_old);  // tile_max > m ? tile_max : m
  const __m256 a = simd::exp_x8(_mm256_sub_ps(m_old, m_new));
  __m256 tile_sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m256 in = key_in_x8(rel, rlo, j);
    const __m256 p = simd::exp_x8(_mm256_sub_ps(_mm256_load_ps(s + j * lds), m_new));
    _mm256_store_ps(s + j * lds, p);
    tile_sum = _mm256_blendv_ps(tile_sum, _mm256_add_ps(tile_sum, p), in);
  }
  const __m256 active = _mm256_castsi256_ps(_mm256_and_si256(
      _mm256_cmpgt_epi32(rel, _mm256_set1_epi32(-1)), _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), rlo)));
  const __m256 l_old = _mm256_load_ps(l);
  _mm256_store_ps(l, _mm256_blendv_ps(l_old, _mm256_add_ps(_mm256_mul_ps(l_old, a), tile_sum), active));
  _mm256_store_ps(m, _mm256_blendv_ps(m_old, m_new, active));
  _mm256_store_ps(alpha, _mm256_blendv_ps(_mm256_set1_ps(1.0f), a, active));
}

// accumulate() with 8-float vectors: kPvRows rows × 2 vectors (16 of head_dim) per pass, 8 + 2 + 1
// registers.
DITTO_AVX2 void accumulate_x8(float* acc, int64_t d, const float* alpha, const int64_t* b, const int64_t* n,
                              const float* s, int64_t lds, const float* vf) {
  const KeyRanges k = key_ranges(b, n);
  for (int64_t i0 = 0; i0 < d; i0 += 16) {
    __m256 a[kPvRows][2];
    for (int r = 0; r < kPvRows; ++r) {
      const __m256 al = _mm256_set1_ps(alpha[r]);
      for (int v = 0; v < 2; ++v) a[r][v] = _mm256_mul_ps(_mm256_load_ps(acc + r * d + i0 + 8 * v), al);
    }
    for (int64_t j = k.begin; j < k.all_begin; ++j) {  // rows whose window starts inside the tile
      for (int r = 0; r < kPvRows; ++r) {
        if (j >= n[r] || j < b[r]) continue;
        const __m256 p = _mm256_broadcast_ss(s + j * lds + r);
        for (int v = 0; v < 2; ++v) a[r][v] = _mm256_fmadd_ps(p, _mm256_load_ps(vf + j * d + i0 + 8 * v), a[r][v]);
      }
    }
    for (int64_t j = k.all_begin; j < k.all_end; ++j) {
      const __m256 v0 = _mm256_load_ps(vf + j * d + i0);
      const __m256 v1 = _mm256_load_ps(vf + j * d + i0 + 8);
      for (int r = 0; r < kPvRows; ++r) {
        const __m256 p = _mm256_broadcast_ss(s + j * lds + r);
        a[r][0] = _mm256_fmadd_ps(p, v0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(p, v1, a[r][1]);
      }
    }
    for (int64_t j = k.all_end; j < k.end; ++j) {  // the diagonal: rows whose position ends inside the tile
      for (int r = 0; r < kPvRows; ++r) {
        if (j >= n[r] || j < b[r]) continue;
        const __m256 p = _mm256_broadcast_ss(s + j * lds + r);
        for (int v = 0; v < 2; ++v) a[r][v] = _mm256_fmadd_ps(p, _mm256_load_ps(vf + j * d + i0 + 8 * v), a[r][v]);
      }
    }
    for (int r = 0; r < kPvRows; ++r)
      for (int v = 0; v < 2; ++v) _mm256_store_ps(acc + r * d + i0 + 8 * v, a[r][v]);
  }
}

struct Avx2Path {
  static constexpr int64_t kRowLanes = 8;
  // Rows by 16, keys by 4: 8 accumulators, 2 query vectors and a broadcast key in 16 registers.
  DITTO_AVX2 static void score_tile(const float* qt, int64_t rpad, int64_t r0, const float* kf, int64_t n, int64_t d,
                                    float* s) {
    for (int64_t r = r0; r < rpad; r += 16)
      for (int64_t j = 0; j < n; j += 4) scores_x8x2<4>(qt + r, rpad, kf + j * d, d, s + j * rpad + r, rpad);
  }
  DITTO_AVX2 static void softmax_rows(float* s, int64_t lds, int64_t n, const int32_t* pos, const int32_t* lo,
                                      int64_t t0, float scale, float* m, float* l, float* alpha) {
    const __m256i t0v = _mm256_set1_epi32(static_cast<int>(t0));
    const __m256i rel = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos)), t0v);
    const __m256i rlo = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)), t0v);
    softmax_update_x8(s, lds, n, rel, rlo, scale, m, l, alpha);
  }
  static void accumulate_rows(float* acc, int64_t d, const float* alpha, const int64_t* b, const int64_t* n,
                              const float* s, int64_t lds, const float* vf) {
    accumulate_x8(acc, d, alpha, b, n, s, lds, vf);
  }
  DITTO_AVX2 static void load(const KvCacheLayer& cache, const KeySlots& slots, int64_t kv_dim, int64_t head_offset,
                              int64_t t0, int64_t n, int64_t d, float* kf, float* vf) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t off = slots.slot(t0 + j) * kv_dim + head_offset;
      for (int64_t i = 0; i < d; i += 8) {
        _mm256_store_ps(kf + j * d + i, simd::load_bf16_x8(cache.k + off + i));
        _mm256_store_ps(vf + j * d + i, simd::load_bf16_x8(cache.v + off + i));
      }
    }
    const int64_t padded = (n + kKeyGroup - 1) / kKeyGroup * kKeyGroup;
    for (int64_t j = n; j < padded; ++j)
      for (int64_t i = 0; i < d; i += 8) _mm256_store_ps(kf + j * d + i, _mm256_setzero_ps());
  }
  DITTO_AVX2 static void finish(const float* acc, float l, int64_t d, float* out) {
    const __m256 lv = _mm256_set1_ps(l);
    for (int64_t i = 0; i < d; i += 8) _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_load_ps(acc + i), lv));
  }
};

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

// The block's rows through every tile, with Path's pieces; compiled for the baseline (the pieces
// carry their own target attributes).
template <typename Path>
void attend_block_on(const QueryBlock& b, const KvCacheLayer& cache, const AttentionShape& shape) {
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
    ws.lo[static_cast<size_t>(r)] = static_cast<int32_t>(attention_first_key(b.first_position + i, shape));
    const float* q = b.q + i * b.ldq + (b.kv_head * group + r % group) * d;
    for (int64_t k = 0; k < d; ++k) ws.qt[qt_row(k, d) * rpad + r] = r < rows ? q[k] : 0.0f;
    ws.m[r] = -std::numeric_limits<float>::infinity();
    ws.l[r] = 0.0f;
    for (int64_t k = 0; k < d; ++k) ws.acc[r * d + k] = 0.0f;
  }
  // The block's first row has the earliest first key; tiles before it hold no row's keys.
  const int64_t first_tile = attention_first_key(b.first_position, shape) / kAttentionTile * kAttentionTile;
  for (int64_t t0 = first_tile; t0 <= last; t0 += kAttentionTile) {
    const int64_t n = std::min<int64_t>(kAttentionTile, last + 1 - t0);
    Path::load(cache, b.slots, kv_dim, b.kv_head * d, t0, n, d, ws.kf, ws.vf);
    if (t0 + kAttentionTile <= last)
      prefetch_tile(cache, b.slots, kv_dim, b.kv_head * d, t0 + kAttentionTile,
                    std::min<int64_t>(kAttentionTile, last + 1 - t0 - kAttentionTile), d);
    // Rows before first_row have no key in this tile (their position is below t0).
    const int64_t first_row = std::max<int64_t>(0, t0 - b.first_position) * group;
    const int64_t rv0 = first_row / 16 * 16;
    Path::score_tile(ws.qt, rpad, rv0, ws.kf, n, d, ws.s);
    for (int64_t r = rv0; r < rpad; r += Path::kRowLanes)
      Path::softmax_rows(ws.s + r, rpad, n, ws.pos.data() + r, ws.lo.data() + r, t0, shape.scale, ws.m + r, ws.l + r,
                         ws.alpha + r);
    for (int64_t r = first_row / kPvRows * kPvRows; r < rpad; r += kPvRows) {
      int64_t begin[kPvRows], end[kPvRows];  // each row's keys [begin, end) of the tile
      for (int i = 0; i < kPvRows; ++i) {
        end[i] = std::clamp<int64_t>(ws.pos[static_cast<size_t>(r + i)] + 1 - t0, 0, n);
        begin[i] = std::clamp<int64_t>(ws.lo[static_cast<size_t>(r + i)] - t0, 0, end[i]);
      }
      Path::accumulate_rows(ws.acc + r * d, d, ws.alpha + r, begin, end, ws.s + r, rpad, ws.vf);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    Path::finish(ws.acc + r * d, ws.l[r], d, b.out + (r / group) * b.ldo + (b.kv_head * group + r % group) * d);
}

}  // namespace

#endif  // __x86_64__

bool block_kernel_available(const AttentionShape& shape) {
#if defined(__x86_64__)
  if (shape.head_dim > 256) return false;
  switch (active_isa()) {
    case Isa::kAvx512: return shape.head_dim % (16 * kPvVecs) == 0;
    case Isa::kAvx2: return shape.head_dim % 16 == 0;
    case Isa::kScalar: return false;
  }
  return false;
#else
  (void)shape;
  return false;
#endif
}

void attend_block(const QueryBlock& block, const KvCacheLayer& cache, const AttentionShape& shape) {
#if defined(__x86_64__)
  if (active_isa() == Isa::kAvx512) return attend_block_on<Avx512Path>(block, cache, shape);
  DITTO_CHECK(active_isa() == Isa::kAvx2) << "no blocked attention kernel on the portable path";
  attend_block_on<Avx2Path>(block, cache, shape);
#else
  (void)block;
  (void)cache;
  (void)shape;
  DITTO_CHECK(false) << "no blocked attention kernel on this platform";
#endif
}

}  // namespace ditto::attention_internal
