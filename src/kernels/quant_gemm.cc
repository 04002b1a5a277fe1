#include "kernels/quant_gemm.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/portable_clones.h"
#include "kernels/quant_gemm_internal.h"

namespace ditto {

// ---- Packing: GGML blocks <-> panel blocks ---------------------------------------------------------

namespace {

// Q6_K: where value e (0..255) of a GGML block keeps its low 4 bits (ql byte, nibble shift) and its
// top 2 bits (qh byte, bit).
struct Q6Bits {
  uint8_t ql, shift, qh, hbit;
};
constexpr std::array<Q6Bits, 256> make_q6_bits() {
  std::array<Q6Bits, 256> t{};
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, part = (e % 128) / 32, l = e % 32;
    t[e] = {static_cast<uint8_t>(64 * h + l + 32 * (part & 1)), static_cast<uint8_t>(part < 2 ? 0 : 4),
            static_cast<uint8_t>(32 * h + l), static_cast<uint8_t>(2 * part)};
  }
  return t;
}
constexpr std::array<Q6Bits, 256> kQ6Bits = make_q6_bits();

// Offset in a nibble panel area of the byte holding value i's nibble of lane L (value i of a run
// of octets: octet i / 8 holds values 8o..8o+3 in low and 8o+4..8o+7 in high nibbles), and its shift.
inline int nib_offset(int i, int lane) { return 64 * (i / 8) + 4 * lane + i % 4; }
inline int nib_shift(int i) { return (i % 8) < 4 ? 0 : 4; }

}  // namespace

int64_t quant_panel_block_bytes(QuantType type) {
  switch (type) {
    case QuantType::kIQ4_XS: return quant_layout::kIQ4XSBytes;
    case QuantType::kQ3_K: return quant_layout::kQ3KBytes;
    case QuantType::kQ2_K: return quant_layout::kQ2KBytes;
    default: return kPanelWidth * quant_format(type).block_bytes;
  }
}

bool quant_gemm_supported(QuantType type) { return type != QuantType::kNone; }

namespace {

// The layouts of Q5_0, Q5_1, IQ4_NL, Q5_K, IQ4_XS, Q3_K and Q2_K (quant_gemm.h): f16 fields per lane,
// then 4-bit fields in the nibble arrangement of Q4_0 / Q4_K (value i of lane L in byte
// nib_offset(i, L) at nib_shift(i)) or 2-bit ones at crumb_byte / crumb_shift, Q5's fifth bits at
// fifth_bit_byte / fifth_bit_shift and Q3_K's third at third_bit_byte / third_bit_shift, scales
// (and Q2_K's mins) as whole bytes per sub-block and lane. Lane `lane` of the panel block from a
// block's fields, and back.
struct CompactLayout {
  int m = -1;       // f16 m / dmin offset, −1: none
  int scales = -1;  // Q5_K: Q4_K's 12 bytes transposed; IQ4_XS: i8 [8][16]; Q3_K: i8 [16][16];
                    // Q2_K: u8 [16][16]
  int nib = -1;
  int hbits = -1;   // Q5: fifth bits; Q3_K: third bits
  int crumbs = -1;  // Q3_K, Q2_K: 2-bit fields
  int mins = -1;    // Q2_K: u8 [16][16]
};
CompactLayout compact_layout(QuantType type) {
  using namespace quant_layout;
  switch (type) {
    case QuantType::kQ5_0: return {-1, -1, kQ50Nib, kQ50H, -1, -1};
    case QuantType::kQ5_1: return {kQ51M, -1, kQ51Nib, kQ51H, -1, -1};
    case QuantType::kIQ4_NL: return {-1, -1, kQ40Nib, -1, -1, -1};
    case QuantType::kQ5_K: return {kQ4KDmin, kQ4KScales, kQ4KNib, kQ5KH, -1, -1};
    case QuantType::kIQ4_XS: return {-1, kIQ4XSScales, kIQ4XSNib, -1, -1, -1};
    case QuantType::kQ3_K: return {-1, kQ3KScales, -1, kQ3KH, kQ3KCrumbs, -1};
    case QuantType::kQ2_K: return {kQ2KDmin, kQ2KScales, -1, -1, kQ2KCrumbs, kQ2KMins};
    default: DITTO_CHECK(false) << "compact_layout: " << quant_format(type).name;
  }
  return {};
}

void pack_compact_lane(QuantType type, const QuantBlockFields& f, int lane, uint8_t* dst) {
  using namespace quant_layout;
  const CompactLayout c = compact_layout(type);
  std::memcpy(dst + 2 * lane, &f.d, 2);
  if (c.m >= 0) std::memcpy(dst + c.m + 2 * lane, &f.m, 2);
  if (type == QuantType::kQ5_K) {
    uint8_t block[176];
    pack_block(QuantType::kQ5_K, f, block);  // bytes 4..15: the 12 scale and min bytes
    for (int s = 0; s < 12; ++s) dst[c.scales + 16 * s + lane] = block[4 + s];
  }
  if (type == QuantType::kIQ4_XS || type == QuantType::kQ3_K)  // int8 ls − 32, sc − 32
    for (int j = 0; j < (type == QuantType::kQ3_K ? 16 : 8); ++j)
      dst[c.scales + 16 * j + lane] = static_cast<uint8_t>(static_cast<int8_t>(f.sc[j] - 32));
  if (type == QuantType::kQ2_K) {
    for (int j = 0; j < 16; ++j) {
      dst[c.scales + 16 * j + lane] = static_cast<uint8_t>(f.sc[j]);
      dst[c.mins + 16 * j + lane] = static_cast<uint8_t>(f.mins[j]);
    }
  }
  const int n = static_cast<int>(quant_format(type).block_size);
  for (int i = 0; i < n; ++i) {
    const int q = f.q[i];
    if (c.crumbs >= 0) {
      dst[c.crumbs + crumb_byte(i, lane)] |= static_cast<uint8_t>((q & 3) << crumb_shift(i));
      if (c.hbits >= 0)
        dst[c.hbits + third_bit_byte(i, lane)] |= static_cast<uint8_t>(((q >> 2) & 1) << third_bit_shift(i));
      continue;
    }
    dst[c.nib + nib_offset(i, lane)] |= static_cast<uint8_t>((q & 15) << nib_shift(i));
    if (c.hbits >= 0)
      dst[c.hbits + fifth_bit_byte(i, lane)] |= static_cast<uint8_t>(((q >> 4) & 1) << fifth_bit_shift(i));
  }
}

void unpack_compact_lane(QuantType type, const uint8_t* pb, int lane, QuantBlockFields* f) {
  using namespace quant_layout;
  const CompactLayout c = compact_layout(type);
  *f = QuantBlockFields{};
  std::memcpy(&f->d, pb + 2 * lane, 2);
  if (c.m >= 0) std::memcpy(&f->m, pb + c.m + 2 * lane, 2);
  if (type == QuantType::kQ5_K) {
    uint8_t packed[12];
    for (int s = 0; s < 12; ++s) packed[s] = pb[c.scales + 16 * s + lane];
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      q4_k_scale_min(packed, j, &sc, &mn);
      f->sc[j] = static_cast<int16_t>(sc);
      f->mins[j] = static_cast<int16_t>(mn);
    }
  }
  if (type == QuantType::kIQ4_XS)
    for (int j = 0; j < 8; ++j) f->sc[j] = static_cast<int16_t>(static_cast<int8_t>(pb[c.scales + 16 * j + lane]) + 32);
  if (type == QuantType::kQ3_K)
    for (int j = 0; j < 16; ++j)
      f->sc[j] = static_cast<int16_t>(static_cast<int8_t>(pb[c.scales + 16 * j + lane]) + 32);
  if (type == QuantType::kQ2_K) {
    for (int j = 0; j < 16; ++j) {
      f->sc[j] = pb[c.scales + 16 * j + lane];
      f->mins[j] = pb[c.mins + 16 * j + lane];
    }
  }
  const int n = static_cast<int>(quant_format(type).block_size);
  for (int i = 0; i < n; ++i) {
    int q = 0;
    if (c.crumbs >= 0) {
      q = (pb[c.crumbs + crumb_byte(i, lane)] >> crumb_shift(i)) & 3;
      if (c.hbits >= 0) q |= ((pb[c.hbits + third_bit_byte(i, lane)] >> third_bit_shift(i)) & 1) << 2;
    } else {
      q = (pb[c.nib + nib_offset(i, lane)] >> nib_shift(i)) & 15;
      if (c.hbits >= 0) q |= ((pb[c.hbits + fifth_bit_byte(i, lane)] >> fifth_bit_shift(i)) & 1) << 4;
    }
    f->q[i] = static_cast<int16_t>(q);
  }
}

bool is_compact(QuantType type) {
  return type == QuantType::kQ5_0 || type == QuantType::kQ5_1 || type == QuantType::kIQ4_NL ||
         type == QuantType::kQ5_K || type == QuantType::kIQ4_XS || type == QuantType::kQ3_K || type == QuantType::kQ2_K;
}

}  // namespace

void pack_quant_panel_block(QuantType type, const uint8_t* const src[kPanelWidth], uint8_t* dst) {
  // Word at a time: four consecutive values of a row are one 32-bit lane of the panel block, and
  // four consecutive GGML bytes hold four consecutive values' nibbles (or 2-bit fields) at one
  // position. (Little-endian: byte j of a loaded word is the word's bits 8j..8j+7.)
  static_assert(std::endian::native == std::endian::little);
  using namespace quant_layout;
  const auto load32 = [](const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  const auto store32 = [](uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); };
  // Byte j: low nibble from the nibble at `shift` of a's byte j, high nibble likewise from b.
  const auto nibble_pair = [](uint32_t a, uint32_t b, int shift) {
    return ((a >> shift) & 0x0f0f0f0fu) | (((b >> shift) & 0x0f0f0f0fu) << 4);
  };
  for (int lane = 0; lane < kPanelWidth; ++lane) {
    const uint8_t* b = src[lane];
    if (b == nullptr) continue;
    if (is_compact(type)) {
      QuantBlockFields f;
      unpack_block(type, b, &f);
      pack_compact_lane(type, f, lane, dst);
      continue;
    }
    switch (type) {
      case QuantType::kQ8_0:
        std::memcpy(dst + 2 * lane, b, 2);
        for (int g = 0; g < 8; ++g) store32(dst + kQ8W + 64 * g + 4 * lane, load32(b + 2 + 4 * g) ^ 0x80808080u);
        break;
      case QuantType::kQ4_0:
      case QuantType::kQ4_1: {
        const uint8_t* qs = b + (type == QuantType::kQ4_0 ? 2 : 4);
        const int nib = type == QuantType::kQ4_0 ? kQ40Nib : kQ41Nib;
        std::memcpy(dst + 2 * lane, b, 2);
        if (type == QuantType::kQ4_1) std::memcpy(dst + kQ41M + 2 * lane, b + 2, 2);
        // Octet o: values 8o..8o+7 are the nibbles of qs[8·(o%2) ...], low for o < 2, high for o ≥ 2.
        for (int o = 0; o < 4; ++o) {
          const uint8_t* base = qs + 8 * (o % 2);
          store32(dst + nib + 64 * o + 4 * lane, nibble_pair(load32(base), load32(base + 4), 4 * (o / 2)));
        }
        break;
      }
      case QuantType::kQ4_K:
        std::memcpy(dst + 2 * lane, b, 2);
        std::memcpy(dst + kQ4KDmin + 2 * lane, b + 2, 2);
        for (int s = 0; s < 12; ++s) dst[kQ4KScales + 16 * s + lane] = b[4 + s];
        // Octet o: sub-block j = o/4 lives in qs[32·(j/2) ...], low nibbles for even j, high for odd.
        for (int o = 0; o < 32; ++o) {
          const int j = o / 4;
          const uint8_t* base = b + 16 + 32 * (j / 2) + 8 * (o % 4);
          store32(dst + kQ4KNib + 64 * o + 4 * lane, nibble_pair(load32(base), load32(base + 4), 4 * (j % 2)));
        }
        break;
      case QuantType::kQ6_K:
        std::memcpy(dst + 2 * lane, b + 208, 2);
        for (int s = 0; s < 16; ++s) dst[kQ6KScales + 16 * s + lane] = b[192 + s];
        // Sub-block s: 16 consecutive values in one 32-value part t of half h, so their low bits are
        // 16 consecutive ql bytes at one nibble and their top bits 16 consecutive qh bytes at bits 2t.
        for (int s = 0; s < 16; ++s) {
          const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2);
          const uint8_t* ql = b + 64 * h + 32 * (t & 1) + l0;
          const uint8_t* qh = b + 128 + 32 * h + l0;
          uint8_t* sub = dst + kQ6KSub + kQ6KSubBytes * s;
          const int shift = t < 2 ? 0 : 4;
          store32(sub + 4 * lane, nibble_pair(load32(ql), load32(ql + 4), shift));
          store32(sub + 64 + 4 * lane, nibble_pair(load32(ql + 8), load32(ql + 12), shift));
          uint32_t hi = 0;
          for (int g = 0; g < 4; ++g) hi |= ((load32(qh + 4 * g) >> (2 * t)) & 0x03030303u) << (2 * g);
          store32(sub + kQ6KHi + 4 * lane, hi);
        }
        break;
      case QuantType::kQ2_K:
      case QuantType::kQ5_0:
      case QuantType::kQ5_1:
      case QuantType::kQ5_K:
      case QuantType::kIQ4_NL:
      case QuantType::kIQ4_XS:
      case QuantType::kQ3_K:
      case QuantType::kNone: DITTO_CHECK(false) << "pack_quant_panel_block: " << quant_format(type).name;
    }
  }
}

void unpack_quant_panel_block(QuantType type, const uint8_t* pb, int lane, uint8_t* b) {
  using namespace quant_layout;
  if (is_compact(type)) {
    QuantBlockFields f;
    unpack_compact_lane(type, pb, lane, &f);
    pack_block(type, f, b);
    return;
  }
  std::memset(b, 0, static_cast<size_t>(quant_format(type).block_bytes));
  switch (type) {
    case QuantType::kQ8_0:
      std::memcpy(b, pb + 2 * lane, 2);
      for (int i = 0; i < 32; ++i) b[2 + i] = pb[kQ8W + 64 * (i / 4) + 4 * lane + i % 4] ^ 0x80;
      return;
    case QuantType::kQ4_0:
    case QuantType::kQ4_1: {
      const int qs_off = type == QuantType::kQ4_0 ? 2 : 4;
      const int nib = type == QuantType::kQ4_0 ? kQ40Nib : kQ41Nib;
      std::memcpy(b, pb + 2 * lane, 2);
      if (type == QuantType::kQ4_1) std::memcpy(b + 2, pb + kQ41M + 2 * lane, 2);
      for (int i = 0; i < 32; ++i) {
        const int v = (pb[nib + nib_offset(i, lane)] >> nib_shift(i)) & 15;
        b[qs_off + i % 16] |= static_cast<uint8_t>(i < 16 ? v : v << 4);
      }
      return;
    }
    case QuantType::kQ4_K:
      std::memcpy(b, pb + 2 * lane, 2);
      std::memcpy(b + 2, pb + kQ4KDmin + 2 * lane, 2);
      for (int s = 0; s < 12; ++s) b[4 + s] = pb[kQ4KScales + 16 * s + lane];
      for (int i = 0; i < 256; ++i) {
        const int v = (pb[kQ4KNib + nib_offset(i, lane)] >> nib_shift(i)) & 15, j = i / 32;
        b[16 + 32 * (j / 2) + i % 32] |= static_cast<uint8_t>(j % 2 == 0 ? v : v << 4);
      }
      return;
    case QuantType::kQ6_K:
      std::memcpy(b + 208, pb + 2 * lane, 2);
      for (int s = 0; s < 16; ++s) b[192 + s] = pb[kQ6KScales + 16 * s + lane];
      for (int e = 0; e < 256; ++e) {
        const uint8_t* sub = pb + kQ6KSub + kQ6KSubBytes * (e / 16);
        const int u = e % 16;
        const int lo = (sub[nib_offset(u, lane)] >> nib_shift(u)) & 15;
        const int hi = (sub[kQ6KHi + 4 * lane + u % 4] >> (2 * (u / 4))) & 3;
        const Q6Bits& p = kQ6Bits[e];
        b[p.ql] |= static_cast<uint8_t>(lo << p.shift);
        b[128 + p.qh] |= static_cast<uint8_t>(hi << p.hbit);
      }
      return;
    case QuantType::kQ2_K:
    case QuantType::kQ5_0:
    case QuantType::kQ5_1:
    case QuantType::kQ5_K:
    case QuantType::kIQ4_NL:
    case QuantType::kIQ4_XS:
    case QuantType::kQ3_K:
    case QuantType::kNone: break;
  }
  DITTO_CHECK(false) << "unpack_quant_panel_block: " << quant_format(type).name;
}

// ---- Activation quantization (shared by every path) ----------------------------------------------

ActLayout act_layout(QuantType weight, int64_t k) {
  ActLayout a;
  a.k_blocks = quant_format(weight).block_size == 256;
  a.block = a.k_blocks ? 256 : 32;
  a.nb = k / a.block;
  a.k = k;
  a.d_offset = k;
  a.s_offset = a.d_offset + 4 * a.nb;
  a.sum_offset = a.s_offset + 4 * a.nb;
  const int64_t sums = a.k_blocks ? 16 * a.nb : a.nb;
  a.row_bytes = (a.sum_offset + 4 * sums + 63) / 64 * 64;
  return a;
}

bool quantize_activation_row(const ActLayout& a, const float* x, uint8_t* row) {
  auto* q = reinterpret_cast<int8_t*>(row);
  auto* d = reinterpret_cast<float*>(row + a.d_offset);
  auto* s = reinterpret_cast<float*>(row + a.s_offset);
  auto* sums = reinterpret_cast<int32_t*>(row + a.sum_offset);
  for (int64_t i = 0; i < a.k; ++i) {
    if (!(std::fabs(x[i]) <= FLT_MAX)) {  // NaN or ±inf: the row's outputs become the canonical NaN
      std::memset(row, 0, static_cast<size_t>(a.row_bytes));
      return false;
    }
  }
  for (int64_t b = 0; b < a.nb; ++b) {
    const float* xb = x + b * a.block;
    int8_t* qb = q + b * a.block;
    float amax = 0.0f;
    for (int64_t i = 0; i < a.block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    float db = amax / 127.0f;
    // d below FLT_MIN (amax < 127·2^-126): 1/d could overflow to inf, so the block quantizes to zero.
    const bool zero = !(db >= FLT_MIN);
    if (zero) db = 0.0f;
    const float id = zero ? 0.0f : 1.0f / db;
    int32_t sum16[16] = {};
    int32_t total = 0;
    for (int64_t i = 0; i < a.block; ++i) {
      // |x·id| ≤ 127·(1 + 2^-22): rne by the 1.5·2^23 trick, exact for |v| < 2^22.
      const float v = xb[i] * id;
      const float r = (v + 12582912.0f) - 12582912.0f;
      const int qi = std::clamp(static_cast<int>(r), -127, 127);
      qb[i] = static_cast<int8_t>(qi);
      sum16[i / 16] += qi;
      total += qi;
    }
    d[b] = db;
    if (a.k_blocks) {
      for (int j = 0; j < 16; ++j) sums[16 * b + j] = sum16[j];
      s[b] = 0.0f;
    } else {
      sums[b] = total;
      s[b] = db * static_cast<float>(total);
    }
  }
  return true;
}

namespace {

constexpr uint32_t kCanonicalNan = 0x7FC00000u;

// ---- Portable path: the definition ---------------------------------------------------------------

// One panel block decoded for all 16 lanes into the integers the canonical formulas use. `type` is
// the layout's (quant_kernel_type).
struct DecodedBlock {
  float d[kPanelWidth];           // f16 d
  float m[kPanelWidth];           // f16 m (Q4_1, Q5_1) or dmin (Q4_K, Q5_K, Q2_K)
  int16_t v[kPanelWidth][256];    // the signed value: Q8_0 w; Q4_0 q − 8; Q5_0 q − 16; Q4_1, Q5_1,
                                  // Q4_K, Q5_K, Q2_K q; IQ4_* kvalues_iq4nl[q]; Q6_K q − 32
  int16_t sc[kPanelWidth][16];    // Q4_K, Q5_K [8] 0..63; IQ4_XS [8] ls − 32; Q6_K, Q2_K [16]
  int16_t mins[kPanelWidth][16];  // Q4_K, Q5_K [8]; Q2_K [16]
};

DITTO_PORTABLE_HOT void decode_panel_block(QuantType type, const uint8_t* pb, DecodedBlock* out) {
  using namespace quant_layout;
  uint16_t h[kPanelWidth];
  std::memcpy(h, pb, sizeof(h));
  for (int l = 0; l < kPanelWidth; ++l) out->d[l] = f16_to_f32(h[l]);
  const auto nib = [](const uint8_t* area, int i, int lane) {
    return (area[nib_offset(i, lane)] >> nib_shift(i)) & 15;
  };
  for (int l = 0; l < kPanelWidth; ++l) {
    switch (type) {
      case QuantType::kQ8_0:
        for (int i = 0; i < 32; ++i) out->v[l][i] = static_cast<int16_t>(pb[kQ8W + 64 * (i / 4) + 4 * l + i % 4] - 128);
        break;
      case QuantType::kQ4_0:
        for (int i = 0; i < 32; ++i) out->v[l][i] = static_cast<int16_t>(nib(pb + kQ40Nib, i, l) - 8);
        break;
      case QuantType::kQ4_1:
        for (int i = 0; i < 32; ++i) out->v[l][i] = static_cast<int16_t>(nib(pb + kQ41Nib, i, l));
        break;
      case QuantType::kQ4_K: {
        uint8_t s[12];
        for (int b = 0; b < 12; ++b) s[b] = pb[kQ4KScales + 16 * b + l];
        for (int j = 0; j < 8; ++j) {
          int sc, mn;
          q4_k_scale_min(s, j, &sc, &mn);
          out->sc[l][j] = static_cast<int16_t>(sc);
          out->mins[l][j] = static_cast<int16_t>(mn);
        }
        for (int i = 0; i < 256; ++i) out->v[l][i] = static_cast<int16_t>(nib(pb + kQ4KNib, i, l));
        break;
      }
      case QuantType::kQ6_K:
        for (int j = 0; j < 16; ++j) out->sc[l][j] = static_cast<int8_t>(pb[kQ6KScales + 16 * j + l]);
        for (int e = 0; e < 256; ++e) {
          const uint8_t* sub = pb + kQ6KSub + kQ6KSubBytes * (e / 16);
          const int u = e % 16;
          const int hi = (sub[kQ6KHi + 4 * l + u % 4] >> (2 * (u / 4))) & 3;
          out->v[l][e] = static_cast<int16_t>((nib(sub, u, l) | (hi << 4)) - 32);
        }
        break;
      case QuantType::kQ5_0:
      case QuantType::kQ5_1:
      case QuantType::kQ5_K:
      case QuantType::kIQ4_NL:
      case QuantType::kIQ4_XS:
      case QuantType::kQ3_K:
      case QuantType::kQ2_K: {
        QuantBlockFields f;
        unpack_compact_lane(type, pb, l, &f);
        const int n = static_cast<int>(quant_format(type).block_size);
        for (int i = 0; i < n; ++i) {
          const int q = f.q[i];
          out->v[l][i] =
              static_cast<int16_t>(type == QuantType::kQ5_0                                   ? q - 16
                                   : type == QuantType::kQ3_K                                 ? q - 4
                                   : type == QuantType::kIQ4_NL || type == QuantType::kIQ4_XS ? kIq4nlValues[q]
                                                                                              : q);
        }
        for (int j = 0; j < 16; ++j) {
          const bool less32 = type == QuantType::kIQ4_XS || type == QuantType::kQ3_K;
          out->sc[l][j] = static_cast<int16_t>(less32 ? f.sc[j] - 32 : f.sc[j]);
          out->mins[l][j] = f.mins[j];
        }
        break;
      }
      case QuantType::kNone: DITTO_CHECK(false) << "decode_panel_block: " << quant_format(type).name;
    }
  }
  if (type == QuantType::kQ4_1 || type == QuantType::kQ4_K || type == QuantType::kQ5_1 || type == QuantType::kQ5_K ||
      type == QuantType::kQ2_K) {
    const int at = type == QuantType::kQ4_1                               ? kQ41M
                   : type == QuantType::kQ4_K || type == QuantType::kQ5_K ? kQ4KDmin
                   : type == QuantType::kQ5_1                             ? kQ51M
                                                                          : kQ2KDmin;
    std::memcpy(h, pb + at, sizeof(h));
    for (int l = 0; l < kPanelWidth; ++l) out->m[l] = f16_to_f32(h[l]);
  }
}

// acc = the canonical steps of one weight block against one activation block (docs/NUMERICS.md).
inline float block_step(QuantType type, const DecodedBlock& w, int l, const int8_t* q, float dx, float s,
                        const int32_t* sums, float acc) {
  switch (type) {
    case QuantType::kQ8_0:
    case QuantType::kQ4_0:
    case QuantType::kQ4_1:
    case QuantType::kQ5_0:
    case QuantType::kQ5_1:
    case QuantType::kIQ4_NL: {
      int32_t isum = 0;
      for (int i = 0; i < 32; ++i) isum += w.v[l][i] * q[i];
      acc = std::fma(w.d[l] * dx, static_cast<float>(isum), acc);
      if (type == QuantType::kQ4_1 || type == QuantType::kQ5_1) acc = std::fma(w.m[l], s, acc);
      return acc;
    }
    case QuantType::kQ4_K:
    case QuantType::kQ5_K: {
      int32_t isum = 0, msum = 0;
      for (int j = 0; j < 8; ++j) {
        int32_t inner = 0;
        for (int i = 32 * j; i < 32 * j + 32; ++i) inner += w.v[l][i] * q[i];
        isum += w.sc[l][j] * inner;
        msum += w.mins[l][j] * (sums[2 * j] + sums[2 * j + 1]);
      }
      acc = std::fma(w.d[l] * dx, static_cast<float>(isum), acc);
      return std::fma(-(w.m[l] * dx), static_cast<float>(msum), acc);
    }
    case QuantType::kQ6_K:
    case QuantType::kQ3_K: {
      int32_t isum = 0;
      for (int j = 0; j < 16; ++j) {
        int32_t inner = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) inner += w.v[l][i] * q[i];
        isum += w.sc[l][j] * inner;
      }
      return std::fma(w.d[l] * dx, static_cast<float>(isum), acc);
    }
    case QuantType::kIQ4_XS: {
      int32_t isum = 0;
      for (int j = 0; j < 8; ++j) {
        int32_t inner = 0;
        for (int i = 32 * j; i < 32 * j + 32; ++i) inner += w.v[l][i] * q[i];
        isum += w.sc[l][j] * inner;
      }
      return std::fma(w.d[l] * dx, static_cast<float>(isum), acc);
    }
    case QuantType::kQ2_K: {
      int32_t isum = 0, msum = 0;
      for (int j = 0; j < 16; ++j) {
        int32_t inner = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) inner += w.v[l][i] * q[i];
        isum += w.sc[l][j] * inner;
        msum += w.mins[l][j] * sums[j];
      }
      acc = std::fma(w.d[l] * dx, static_cast<float>(isum), acc);
      return std::fma(-(w.m[l] * dx), static_cast<float>(msum), acc);
    }
    case QuantType::kNone: break;
  }
  return acc;
}

// block_step for every lane of one decoded weight block against block b of activation rows 0 .. m−1;
// acc: [m, kPanelWidth].
DITTO_PORTABLE_HOT void block_steps(const ActLayout& a, const uint8_t* act, int64_t m, QuantType type,
                                    const DecodedBlock& blk, int64_t b, float* acc) {
  for (int64_t r = 0; r < m; ++r) {
    const uint8_t* row = act + r * a.row_bytes;
    const int8_t* q = reinterpret_cast<const int8_t*>(row) + b * a.block;
    const float dx = reinterpret_cast<const float*>(row + a.d_offset)[b];
    const float s = reinterpret_cast<const float*>(row + a.s_offset)[b];
    const int32_t* sums = reinterpret_cast<const int32_t*>(row + a.sum_offset) + (a.k_blocks ? 16 * b : b);
    for (int l = 0; l < kPanelWidth; ++l)
      acc[r * kPanelWidth + l] = block_step(type, blk, l, q, dx, s, sums, acc[r * kPanelWidth + l]);
  }
}

void gemm_portable(const ActLayout& a, const uint8_t* act, int64_t m, const PackedMatrix& w, float* y, int64_t ldy,
                   ThreadPool* pool) {
  const int64_t panel_bytes = w.panel_bytes();
  const int64_t pb_bytes = quant_panel_block_bytes(w.quant);
  auto run = [&](size_t begin, size_t end) {
    DecodedBlock blk;
    std::vector<float> acc(static_cast<size_t>(m * kPanelWidth));
    for (size_t p = begin; p < end; ++p) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const uint8_t* panel = w.data.data() + static_cast<int64_t>(p) * panel_bytes;
      for (int64_t b = 0; b < a.nb; ++b) {
        decode_panel_block(w.quant, panel + b * pb_bytes, &blk);
        block_steps(a, act, m, w.quant, blk, b, acc.data());
      }
      const int64_t n0 = static_cast<int64_t>(p) * kPanelWidth;
      const int64_t width = std::min<int64_t>(kPanelWidth, w.n - n0);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t l = 0; l < width; ++l) {
          const float v = acc[r * kPanelWidth + l];
          y[r * ldy + n0 + l] = std::isnan(v) ? std::bit_cast<float>(kCanonicalNan) : v;
        }
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(w.num_panels()));
  } else {
    pool->parallel_for_dynamic(static_cast<size_t>(w.num_panels()), 1, run);
  }
}

}  // namespace

void quant_gemm(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy,
                ThreadPool* pool) {
  DITTO_CHECK(w.quant != QuantType::kNone);
  if (m <= 0 || w.n == 0) return;
  const ActLayout a = act_layout(w.quant, w.k);
  // The quantized activations live in a per-thread scratch reused across calls (decode calls gemm
  // hundreds of times per token).
  thread_local std::vector<uint8_t> scratch;
  thread_local std::vector<uint8_t> finite;
  scratch.resize(static_cast<size_t>(m * a.row_bytes));
  finite.assign(static_cast<size_t>(m), 1);
  uint8_t* act = scratch.data();
  uint8_t* row_finite = finite.data();
  const auto quantize_rows = [&](size_t begin, size_t end) {
#if defined(__x86_64__)
    if (active_isa() == Isa::kAvx512) {
      for (size_t r = begin; r < end; ++r)
        row_finite[r] = quantize_activation_row_avx512(a, x + static_cast<int64_t>(r) * ldx,
                                                       act + static_cast<int64_t>(r) * a.row_bytes);
      return;
    }
#endif
    for (size_t r = begin; r < end; ++r)
      row_finite[r] =
          quantize_activation_row(a, x + static_cast<int64_t>(r) * ldx, act + static_cast<int64_t>(r) * a.row_bytes);
  };
  if (pool == nullptr || m < 8) {
    quantize_rows(0, static_cast<size_t>(m));
  } else {
    pool->parallel_for(static_cast<size_t>(m), quantize_rows);
  }
  bool simd_done = false;
#if defined(__x86_64__)
  simd_done = quant_gemm_simd(a, act, m, w, y, ldy, pool);
#endif
  if (!simd_done) gemm_portable(a, act, m, w, y, ldy, pool);
  for (int64_t r = 0; r < m; ++r)
    if (!row_finite[r]) std::fill(y + r * ldy, y + r * ldy + w.n, std::bit_cast<float>(kCanonicalNan));
}

}  // namespace ditto
