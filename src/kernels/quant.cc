#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace ditto {
namespace {

// Indexed by QuantType. Sizes: ggml-common.h's static_asserts (sizeof(block_*)).
constexpr QuantFormat kFormats[] = {
    {1, 0, "none"},     {32, 34, "Q8_0"},   {32, 18, "Q4_0"},     {32, 20, "Q4_1"},   {256, 144, "Q4_K"},
    {256, 210, "Q6_K"}, {32, 22, "Q5_0"},   {32, 24, "Q5_1"},     {256, 176, "Q5_K"}, {256, 110, "Q3_K"},
    {256, 84, "Q2_K"},  {32, 18, "IQ4_NL"}, {256, 136, "IQ4_XS"},
};
static_assert(std::size(kFormats) == static_cast<size_t>(QuantType::kIQ4_XS) + 1);

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// f16 bits of a float64 scale, rounded through float32 (the scale's exact choice does not matter:
// values are then quantized against the stored, rounded scale). Throws if it overflows f16.
uint16_t scale_to_f16(double v, int64_t element) {
  const uint16_t h = f32_to_f16(static_cast<float>(v));
  if ((h & 0x7c00) == 0x7c00)
    throw_invalid_argument("quantize_row: a block scale overflows f16 at element " + std::to_string(element));
  return h;
}

double rne(double v) { return std::nearbyint(v); }

int clamp_int(double v, int lo, int hi) { return static_cast<int>(std::clamp(v, double(lo), double(hi))); }

// Q6_K's (ql, qh) bit position of value e (0..255) of a block.
struct Q6Pos {
  int ql;     // byte index into ql
  int shift;  // 0: low nibble, 4: high nibble
  int qh;     // byte index into qh
  int hbit;   // bit of qh holding the value's top 2 bits
};
Q6Pos q6_pos(int e) {
  const int h = e / 128, t = (e % 128) / 32, l = e % 32;
  return {64 * h + l + 32 * (t & 1), t < 2 ? 0 : 4, 32 * h + l, 2 * t};
}

// Q3_K's and Q2_K's 2-bit field of value e (0..255): bits shift, shift+1 of qs[byte].
struct Q2Pos {
  int byte;
  int shift;
};
Q2Pos q2_pos(int e) { return {32 * (e / 128) + e % 32, 2 * ((e % 128) / 32)}; }

// The 32-value formats' nibble of value i: qs[i % 16], low nibble for i < 16.
int nibble32(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4; }
void put_nibble32(uint8_t* qs, int i, int q) {
  qs[i % 16] = static_cast<uint8_t>(i < 16 ? (qs[i % 16] & 0xf0) | q : (qs[i % 16] & 0x0f) | (q << 4));
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The value of largest magnitude of x[0..n) (the first on a tie), as ggml's reference quantizers
// pick the value that maps to the negative end of a signed grid.
double signed_extreme(const float* x, int n) {
  double v = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(double(x[i])) > std::fabs(v)) v = x[i];
  return v;
}

// Packs Q4_K's / Q5_K's 8 six-bit scales and mins into their 12 bytes (q4_k_scale_min's inverse).
void pack_scale_min_k4(const int sc[8], const int m[8], uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] |= static_cast<uint8_t>(sc[j]);
      s[j + 4] |= static_cast<uint8_t>(m[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

// The index of the IQ4_NL table value nearest t (the lower index on a tie).
int nearest_iq4nl_index(double t) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(t - kIq4nlValues[i]) < std::fabs(t - kIq4nlValues[best])) best = i;
  return best;
}
constexpr int kIq4nlZeroIndex = 8;  // kv = 1: the index a zero step stores

// One block of each type, from x (block_size floats) into b (block_bytes bytes); x0 is the first
// element's index in the row, for the scale-overflow error. ggml's reference layouts.

void quantize_q8_0(const float* x, int64_t x0, uint8_t* b) {
  double amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double(x[i])));
  const uint16_t dh = scale_to_f16(amax / 127.0, x0);
  const double d = f16_to_f32(dh);
  store_u16(b, dh);
  for (int i = 0; i < 32; ++i)
    b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(d == 0 ? 0 : clamp_int(rne(x[i] / d), -128, 127)));
}

void quantize_q4_0(const float* x, int64_t x0, uint8_t* b) {
  const uint16_t dh = scale_to_f16(signed_extreme(x, 32) / -8.0, x0);
  const double d = f16_to_f32(dh);
  store_u16(b, dh);
  for (int i = 0; i < 16; ++i) {
    const int lo = d == 0 ? 8 : clamp_int(rne(x[i] / d) + 8, 0, 15);
    const int hi = d == 0 ? 8 : clamp_int(rne(x[i + 16] / d) + 8, 0, 15);
    b[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_q4_1(const float* x, int64_t x0, uint8_t* b) {
  double lo_v = x[0], hi_v = x[0];
  for (int i = 0; i < 32; ++i) lo_v = std::min(lo_v, double(x[i])), hi_v = std::max(hi_v, double(x[i]));
  const uint16_t dh = scale_to_f16((hi_v - lo_v) / 15.0, x0);
  const uint16_t mh = scale_to_f16(lo_v, x0);
  const double d = f16_to_f32(dh), m = f16_to_f32(mh);
  store_u16(b, dh);
  store_u16(b + 2, mh);
  for (int i = 0; i < 16; ++i) {
    const int lo = d == 0 ? 0 : clamp_int(rne((x[i] - m) / d), 0, 15);
    const int hi = d == 0 ? 0 : clamp_int(rne((x[i + 16] - m) / d), 0, 15);
    b[4 + i] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_q5_0(const float* x, int64_t x0, uint8_t* b) {
  const uint16_t dh = scale_to_f16(signed_extreme(x, 32) / -16.0, x0);
  const double d = f16_to_f32(dh);
  store_u16(b, dh);
  uint32_t qh = 0;
  std::memset(b + 6, 0, 16);
  for (int i = 0; i < 32; ++i) {
    const int q = d == 0 ? 16 : clamp_int(rne(x[i] / d) + 16, 0, 31);
    put_nibble32(b + 6, i, q & 0x0f);
    qh |= static_cast<uint32_t>(q >> 4) << i;
  }
  std::memcpy(b + 2, &qh, 4);
}

void quantize_q5_1(const float* x, int64_t x0, uint8_t* b) {
  double lo_v = x[0], hi_v = x[0];
  for (int i = 0; i < 32; ++i) lo_v = std::min(lo_v, double(x[i])), hi_v = std::max(hi_v, double(x[i]));
  const uint16_t dh = scale_to_f16((hi_v - lo_v) / 31.0, x0);
  const uint16_t mh = scale_to_f16(lo_v, x0);
  const double d = f16_to_f32(dh), m = f16_to_f32(mh);
  store_u16(b, dh);
  store_u16(b + 2, mh);
  uint32_t qh = 0;
  std::memset(b + 8, 0, 16);
  for (int i = 0; i < 32; ++i) {
    const int q = d == 0 ? 0 : clamp_int(rne((x[i] - m) / d), 0, 31);
    put_nibble32(b + 8, i, q & 0x0f);
    qh |= static_cast<uint32_t>(q >> 4) << i;
  }
  std::memcpy(b + 4, &qh, 4);
}

// The K-quants with mins (Q4_K, Q5_K, Q2_K): n_sub sub-blocks of 256 / n_sub values, qmax the
// largest q, smax the largest 4- or 6-bit scale and min. d and dmin go to *dh, *mh; sc, m, q out.
void quantize_k_with_mins(const float* x, int64_t x0, int n_sub, int qmax, int smax, uint16_t* dh, uint16_t* mh,
                          int* sc, int* m, int* q) {
  const int len = 256 / n_sub;
  double scale[16], neg_min[16], max_scale = 0, max_neg_min = 0;
  for (int j = 0; j < n_sub; ++j) {
    double lo_v = 0, hi_v = x[len * j];
    for (int i = 0; i < len; ++i)
      lo_v = std::min(lo_v, double(x[len * j + i])), hi_v = std::max(hi_v, double(x[len * j + i]));
    scale[j] = (hi_v - lo_v) / qmax;
    neg_min[j] = -lo_v;
    max_scale = std::max(max_scale, scale[j]);
    max_neg_min = std::max(max_neg_min, neg_min[j]);
  }
  *dh = scale_to_f16(max_scale / smax, x0);
  *mh = scale_to_f16(max_neg_min / smax, x0);
  const double d = f16_to_f32(*dh), dmin = f16_to_f32(*mh);
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = d == 0 ? 0 : clamp_int(rne(scale[j] / d), 0, smax);
    m[j] = dmin == 0 ? 0 : clamp_int(rne(neg_min[j] / dmin), 0, smax);
    const double step = d * sc[j], offset = dmin * m[j];
    for (int i = 0; i < len; ++i)
      q[len * j + i] = step == 0 ? 0 : clamp_int(rne((x[len * j + i] + offset) / step), 0, qmax);
  }
}

void quantize_q4_k(const float* x, int64_t x0, uint8_t* b) {
  uint16_t dh, mh;
  int sc[8], m[8], q[256];
  quantize_k_with_mins(x, x0, 8, 15, 63, &dh, &mh, sc, m, q);
  store_u16(b, dh);
  store_u16(b + 2, mh);
  pack_scale_min_k4(sc, m, b + 4);
  uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

void quantize_q5_k(const float* x, int64_t x0, uint8_t* b) {
  uint16_t dh, mh;
  int sc[8], m[8], q[256];
  quantize_k_with_mins(x, x0, 8, 31, 63, &dh, &mh, sc, m, q);
  store_u16(b, dh);
  store_u16(b + 2, mh);
  pack_scale_min_k4(sc, m, b + 4);
  uint8_t* qh = b + 16;
  uint8_t* qs = b + 48;
  std::memset(qh, 0, 32);
  for (int e = 0; e < 256; ++e) qh[e % 32] |= static_cast<uint8_t>((q[e] >> 4) << (e / 32));
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0x0f) | ((q[64 * c + 32 + l] & 0x0f) << 4));
}

void quantize_q2_k(const float* x, int64_t x0, uint8_t* b) {
  uint16_t dh, mh;
  int sc[16], m[16], q[256];
  quantize_k_with_mins(x, x0, 16, 3, 15, &dh, &mh, sc, m, q);
  for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
  std::memset(b + 16, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const Q2Pos p = q2_pos(e);
    b[16 + p.byte] |= static_cast<uint8_t>(q[e] << p.shift);
  }
  store_u16(b + 80, dh);
  store_u16(b + 82, mh);
}

void quantize_q3_k(const float* x, int64_t x0, uint8_t* b) {
  double s[16], s_max = 0;
  for (int j = 0; j < 16; ++j) {
    s[j] = signed_extreme(x + 16 * j, 16) / -4.0;
    if (std::fabs(s[j]) > std::fabs(s_max)) s_max = s[j];
  }
  const uint16_t dh = scale_to_f16(s_max / -32.0, x0);
  const double d = f16_to_f32(dh);
  uint8_t* hmask = b;
  uint8_t* qs = b + 32;
  uint8_t* scales = b + 96;
  std::memset(b, 0, 108);
  for (int j = 0; j < 16; ++j) {
    const int sc = (d == 0 ? 0 : clamp_int(rne(s[j] / d), -32, 31)) + 32;
    scales[j % 8] |= static_cast<uint8_t>((sc & 0x0f) << (j < 8 ? 0 : 4));
    scales[8 + j % 4] |= static_cast<uint8_t>((sc >> 4) << (2 * (j / 4)));
    const double step = d * (sc - 32);
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * j + i;
      const int q = (step == 0 ? 0 : clamp_int(rne(x[e] / step), -4, 3)) + 4;
      const Q2Pos p = q2_pos(e);
      qs[p.byte] |= static_cast<uint8_t>((q & 3) << p.shift);
      hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << (e / 32));
    }
  }
  store_u16(b + 108, dh);
}

void quantize_iq4_nl(const float* x, int64_t x0, uint8_t* b) {
  const uint16_t dh = scale_to_f16(signed_extreme(x, 32) / -127.0, x0);
  const double d = f16_to_f32(dh);
  store_u16(b, dh);
  std::memset(b + 2, 0, 16);
  for (int i = 0; i < 32; ++i) put_nibble32(b + 2, i, d == 0 ? kIq4nlZeroIndex : nearest_iq4nl_index(x[i] / d));
}

void quantize_iq4_xs(const float* x, int64_t x0, uint8_t* b) {
  double s[8], s_max = 0;
  for (int j = 0; j < 8; ++j) {
    s[j] = signed_extreme(x + 32 * j, 32) / -127.0;
    if (std::fabs(s[j]) > std::fabs(s_max)) s_max = s[j];
  }
  const uint16_t dh = scale_to_f16(s_max / -32.0, x0);
  const double d = f16_to_f32(dh);
  store_u16(b, dh);
  uint16_t scales_h = 0;
  uint8_t* scales_l = b + 4;
  uint8_t* qs = b + 8;
  std::memset(b + 4, 0, 132);
  for (int j = 0; j < 8; ++j) {
    const int ls = (d == 0 ? 0 : clamp_int(rne(s[j] / d), -32, 31)) + 32;
    scales_l[j / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (j % 2)));
    scales_h = static_cast<uint16_t>(scales_h | (ls >> 4) << (2 * j));
    const double step = d * (ls - 32);
    for (int i = 0; i < 32; ++i)
      put_nibble32(qs + 16 * j, i, step == 0 ? kIq4nlZeroIndex : nearest_iq4nl_index(x[32 * j + i] / step));
  }
  store_u16(b + 2, scales_h);
}

void quantize_q6_k(const float* x, int64_t x0, uint8_t* b) {
  double scale[16], max_scale = 0;
  for (int j = 0; j < 16; ++j) {
    double amax = 0;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(double(x[16 * j + i])));
    scale[j] = amax / 31.0;
    max_scale = std::max(max_scale, scale[j]);
  }
  const uint16_t dh = scale_to_f16(max_scale / 127.0, x0);
  const double d = f16_to_f32(dh);
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  std::memset(b, 0, 192);
  for (int j = 0; j < 16; ++j) {
    sc[j] = static_cast<int8_t>(d == 0 ? 0 : clamp_int(rne(scale[j] / d), 0, 127));
    const double step = d * sc[j];
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * j + i;
      const int q = (step == 0 ? 0 : clamp_int(rne(x[e] / step), -32, 31)) + 32;
      const Q6Pos p = q6_pos(e);
      ql[p.ql] |= static_cast<uint8_t>((q & 0x0f) << p.shift);
      qh[p.qh] |= static_cast<uint8_t>((q >> 4) << p.hbit);
    }
  }
  store_u16(b + 208, dh);
}

void quantize_block(QuantType type, const float* x, int64_t x0, uint8_t* b) {
  switch (type) {
    case QuantType::kQ8_0: return quantize_q8_0(x, x0, b);
    case QuantType::kQ4_0: return quantize_q4_0(x, x0, b);
    case QuantType::kQ4_1: return quantize_q4_1(x, x0, b);
    case QuantType::kQ4_K: return quantize_q4_k(x, x0, b);
    case QuantType::kQ6_K: return quantize_q6_k(x, x0, b);
    case QuantType::kQ5_0: return quantize_q5_0(x, x0, b);
    case QuantType::kQ5_1: return quantize_q5_1(x, x0, b);
    case QuantType::kQ5_K: return quantize_q5_k(x, x0, b);
    case QuantType::kQ3_K: return quantize_q3_k(x, x0, b);
    case QuantType::kQ2_K: return quantize_q2_k(x, x0, b);
    case QuantType::kIQ4_NL: return quantize_iq4_nl(x, x0, b);
    case QuantType::kIQ4_XS: return quantize_iq4_xs(x, x0, b);
    case QuantType::kNone: break;
  }
}

}  // namespace

const QuantFormat& quant_format(QuantType type) { return kFormats[static_cast<int>(type)]; }

int64_t quant_row_bytes(QuantType type, int64_t k) {
  const QuantFormat& f = quant_format(type);
  if (type == QuantType::kNone) throw_invalid_argument("quant_row_bytes: not a quantized type");
  if (k < 0 || k % f.block_size != 0)
    throw_invalid_argument(std::string(f.name) + ": row length k=" + std::to_string(k) +
                           " is not a multiple of the block size " + std::to_string(f.block_size));
  return k / f.block_size * f.block_bytes;
}

void unpack_block(QuantType type, const uint8_t* b, QuantBlockFields* out) {
  *out = QuantBlockFields{};
  switch (type) {
    case QuantType::kQ8_0:
      out->d = load_u16(b);
      for (int i = 0; i < 32; ++i) out->q[i] = static_cast<int8_t>(b[2 + i]);
      return;
    case QuantType::kQ4_0:
    case QuantType::kQ4_1: {
      const int off = type == QuantType::kQ4_0 ? 2 : 4;
      out->d = load_u16(b);
      if (type == QuantType::kQ4_1) out->m = load_u16(b + 2);
      for (int i = 0; i < 16; ++i) {
        out->q[i] = b[off + i] & 0x0f;
        out->q[i + 16] = b[off + i] >> 4;
      }
      return;
    }
    case QuantType::kQ4_K: {
      out->d = load_u16(b);
      out->m = load_u16(b + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        q4_k_scale_min(b + 4, j, &sc, &m);
        out->sc[j] = static_cast<int16_t>(sc);
        out->mins[j] = static_cast<int16_t>(m);
        const uint8_t* qs = b + 16 + 32 * (j / 2);
        for (int i = 0; i < 32; ++i) out->q[32 * j + i] = j % 2 == 0 ? (qs[i] & 0x0f) : (qs[i] >> 4);
      }
      return;
    }
    case QuantType::kQ6_K: {
      for (int e = 0; e < 256; ++e) {
        const Q6Pos p = q6_pos(e);
        out->q[e] = static_cast<int16_t>(((b[p.ql] >> p.shift) & 0x0f) | (((b[128 + p.qh] >> p.hbit) & 3) << 4));
      }
      for (int j = 0; j < 16; ++j) out->sc[j] = static_cast<int8_t>(b[192 + j]);
      out->d = load_u16(b + 208);
      return;
    }
    case QuantType::kQ5_0:
    case QuantType::kQ5_1: {
      const int off = type == QuantType::kQ5_0 ? 2 : 4;
      out->d = load_u16(b);
      if (type == QuantType::kQ5_1) out->m = load_u16(b + 2);
      const uint32_t qh = load_u32(b + off);
      for (int i = 0; i < 32; ++i) out->q[i] = static_cast<int16_t>(nibble32(b + off + 4, i) | ((qh >> i) & 1) << 4);
      return;
    }
    case QuantType::kQ5_K: {
      out->d = load_u16(b);
      out->m = load_u16(b + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        q4_k_scale_min(b + 4, j, &sc, &m);
        out->sc[j] = static_cast<int16_t>(sc);
        out->mins[j] = static_cast<int16_t>(m);
      }
      const uint8_t* qh = b + 16;
      for (int e = 0; e < 256; ++e) {
        const int j = e / 32, l = e % 32;
        const uint8_t byte = b[48 + 32 * (j / 2) + l];
        out->q[e] = static_cast<int16_t>((j % 2 == 0 ? byte & 0x0f : byte >> 4) | ((qh[l] >> j) & 1) << 4);
      }
      return;
    }
    case QuantType::kQ3_K: {
      const uint8_t* hmask = b;
      for (int e = 0; e < 256; ++e) {
        const Q2Pos p = q2_pos(e);
        out->q[e] = static_cast<int16_t>(((b[32 + p.byte] >> p.shift) & 3) | ((hmask[e % 32] >> (e / 32)) & 1) << 2);
      }
      for (int j = 0; j < 16; ++j) out->sc[j] = static_cast<int16_t>(q3_k_scale(b + 96, j));
      out->d = load_u16(b + 108);
      return;
    }
    case QuantType::kQ2_K: {
      for (int j = 0; j < 16; ++j) {
        out->sc[j] = b[j] & 0x0f;
        out->mins[j] = b[j] >> 4;
      }
      for (int e = 0; e < 256; ++e) {
        const Q2Pos p = q2_pos(e);
        out->q[e] = (b[16 + p.byte] >> p.shift) & 3;
      }
      out->d = load_u16(b + 80);
      out->m = load_u16(b + 82);
      return;
    }
    case QuantType::kIQ4_NL:
      out->d = load_u16(b);
      for (int i = 0; i < 32; ++i) out->q[i] = static_cast<int16_t>(nibble32(b + 2, i));
      return;
    case QuantType::kIQ4_XS: {
      out->d = load_u16(b);
      const uint16_t scales_h = load_u16(b + 2);
      for (int j = 0; j < 8; ++j) {
        out->sc[j] = static_cast<int16_t>(((b[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | ((scales_h >> (2 * j)) & 3) << 4);
        for (int i = 0; i < 32; ++i) out->q[32 * j + i] = static_cast<int16_t>(nibble32(b + 8 + 16 * j, i));
      }
      return;
    }
    case QuantType::kNone: break;
  }
  DITTO_CHECK(false) << "unpack_block: not a quantized type";
}

void pack_block(QuantType type, const QuantBlockFields& f, uint8_t* b) {
  const QuantFormat& fmt = quant_format(type);
  DITTO_CHECK(type != QuantType::kNone) << "pack_block: not a quantized type";
  std::memset(b, 0, static_cast<size_t>(fmt.block_bytes));
  const auto q = [&](int i) { return static_cast<int>(f.q[i]); };
  switch (type) {
    case QuantType::kQ8_0:
      store_u16(b, f.d);
      for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q(i)));
      return;
    case QuantType::kQ4_0:
    case QuantType::kQ4_1:
    case QuantType::kIQ4_NL: {
      const int off = type == QuantType::kQ4_1 ? 4 : 2;
      store_u16(b, f.d);
      if (type == QuantType::kQ4_1) store_u16(b + 2, f.m);
      for (int i = 0; i < 32; ++i) put_nibble32(b + off, i, q(i) & 0x0f);
      return;
    }
    case QuantType::kQ5_0:
    case QuantType::kQ5_1: {
      const int off = type == QuantType::kQ5_0 ? 2 : 4;
      store_u16(b, f.d);
      if (type == QuantType::kQ5_1) store_u16(b + 2, f.m);
      uint32_t qh = 0;
      for (int i = 0; i < 32; ++i) {
        put_nibble32(b + off + 4, i, q(i) & 0x0f);
        qh |= static_cast<uint32_t>((q(i) >> 4) & 1) << i;
      }
      std::memcpy(b + off, &qh, 4);
      return;
    }
    case QuantType::kQ4_K:
    case QuantType::kQ5_K: {
      store_u16(b, f.d);
      store_u16(b + 2, f.m);
      int sc[8], m[8];
      for (int j = 0; j < 8; ++j) sc[j] = f.sc[j], m[j] = f.mins[j];
      pack_scale_min_k4(sc, m, b + 4);
      uint8_t* qs = b + (type == QuantType::kQ4_K ? 16 : 48);
      for (int e = 0; e < 256; ++e) {
        const int j = e / 32, l = e % 32;
        qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q(e) & 0x0f) << (4 * (j % 2)));
        if (type == QuantType::kQ5_K) b[16 + l] |= static_cast<uint8_t>(((q(e) >> 4) & 1) << j);
      }
      return;
    }
    case QuantType::kQ6_K:
      for (int e = 0; e < 256; ++e) {
        const Q6Pos p = q6_pos(e);
        b[p.ql] |= static_cast<uint8_t>((q(e) & 0x0f) << p.shift);
        b[128 + p.qh] |= static_cast<uint8_t>(((q(e) >> 4) & 3) << p.hbit);
      }
      for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(f.sc[j]));
      store_u16(b + 208, f.d);
      return;
    case QuantType::kQ3_K:
      for (int e = 0; e < 256; ++e) {
        const Q2Pos p = q2_pos(e);
        b[32 + p.byte] |= static_cast<uint8_t>((q(e) & 3) << p.shift);
        b[e % 32] |= static_cast<uint8_t>(((q(e) >> 2) & 1) << (e / 32));
      }
      for (int j = 0; j < 16; ++j) {
        b[96 + j % 8] |= static_cast<uint8_t>((f.sc[j] & 0x0f) << (j < 8 ? 0 : 4));
        b[96 + 8 + j % 4] |= static_cast<uint8_t>(((f.sc[j] >> 4) & 3) << (2 * (j / 4)));
      }
      store_u16(b + 108, f.d);
      return;
    case QuantType::kQ2_K:
      for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>((f.sc[j] & 0x0f) | (f.mins[j] & 0x0f) << 4);
      for (int e = 0; e < 256; ++e) {
        const Q2Pos p = q2_pos(e);
        b[16 + p.byte] |= static_cast<uint8_t>((q(e) & 3) << p.shift);
      }
      store_u16(b + 80, f.d);
      store_u16(b + 82, f.m);
      return;
    case QuantType::kIQ4_XS: {
      store_u16(b, f.d);
      uint16_t scales_h = 0;
      for (int j = 0; j < 8; ++j) {
        b[4 + j / 2] |= static_cast<uint8_t>((f.sc[j] & 0x0f) << (4 * (j % 2)));
        scales_h = static_cast<uint16_t>(scales_h | ((f.sc[j] >> 4) & 3) << (2 * j));
        for (int i = 0; i < 32; ++i) put_nibble32(b + 8 + 16 * j, i, q(32 * j + i) & 0x0f);
      }
      store_u16(b + 2, scales_h);
      return;
    }
    case QuantType::kNone: return;
  }
}

void dequantize_row_f64(QuantType type, const void* blocks, int64_t k, double* out) {
  const QuantFormat& f = quant_format(type);
  const int64_t nb = quant_row_bytes(type, k) / f.block_bytes;
  const auto* b = static_cast<const uint8_t*>(blocks);
  QuantBlockFields q;
  for (int64_t blk = 0; blk < nb; ++blk, b += f.block_bytes, out += f.block_size) {
    unpack_block(type, b, &q);
    const double d = f16_to_f32(q.d), m = f16_to_f32(q.m);
    for (int i = 0; i < f.block_size; ++i) {
      switch (type) {
        case QuantType::kQ8_0: out[i] = d * q.q[i]; break;
        case QuantType::kQ4_0: out[i] = d * (q.q[i] - 8); break;
        case QuantType::kQ4_1: out[i] = d * q.q[i] + m; break;
        case QuantType::kQ4_K: out[i] = d * q.sc[i / 32] * q.q[i] - m * q.mins[i / 32]; break;
        case QuantType::kQ6_K: out[i] = d * q.sc[i / 16] * (q.q[i] - 32); break;
        case QuantType::kQ5_0: out[i] = d * (q.q[i] - 16); break;
        case QuantType::kQ5_1: out[i] = d * q.q[i] + m; break;
        case QuantType::kQ5_K: out[i] = d * q.sc[i / 32] * q.q[i] - m * q.mins[i / 32]; break;
        case QuantType::kQ3_K: out[i] = d * (q.sc[i / 16] - 32) * (q.q[i] - 4); break;
        case QuantType::kQ2_K: out[i] = d * q.sc[i / 16] * q.q[i] - m * q.mins[i / 16]; break;
        case QuantType::kIQ4_NL: out[i] = d * kIq4nlValues[q.q[i]]; break;
        case QuantType::kIQ4_XS: out[i] = d * (q.sc[i / 32] - 32) * kIq4nlValues[q.q[i]]; break;
        case QuantType::kNone: break;
      }
    }
  }
}

void dequantize_row_f32(QuantType type, const void* blocks, int64_t k, float* out) {
  const QuantFormat& f = quant_format(type);
  const int64_t nb = quant_row_bytes(type, k) / f.block_bytes;
  const auto* b = static_cast<const uint8_t*>(blocks);
  QuantBlockFields q;
  for (int64_t blk = 0; blk < nb; ++blk, b += f.block_bytes, out += f.block_size) {
    unpack_block(type, b, &q);
    const float d = f16_to_f32(q.d), m = f16_to_f32(q.m);
    for (int i = 0; i < f.block_size; ++i) {
      switch (type) {
        case QuantType::kQ8_0: out[i] = d * static_cast<float>(q.q[i]); break;
        case QuantType::kQ4_0: out[i] = d * static_cast<float>(q.q[i] - 8); break;
        case QuantType::kQ4_1: out[i] = std::fma(d, static_cast<float>(q.q[i]), m); break;
        case QuantType::kQ4_K:
          out[i] = std::fma(d, static_cast<float>(q.sc[i / 32] * q.q[i]), -(m * static_cast<float>(q.mins[i / 32])));
          break;
        case QuantType::kQ6_K: out[i] = (d * static_cast<float>(q.sc[i / 16])) * static_cast<float>(q.q[i] - 32); break;
        case QuantType::kQ5_0: out[i] = d * static_cast<float>(q.q[i] - 16); break;
        case QuantType::kQ5_1: out[i] = std::fma(d, static_cast<float>(q.q[i]), m); break;
        case QuantType::kQ5_K:
          out[i] = std::fma(d, static_cast<float>(q.sc[i / 32] * q.q[i]), -(m * static_cast<float>(q.mins[i / 32])));
          break;
        case QuantType::kQ3_K:
          out[i] = (d * static_cast<float>(q.sc[i / 16] - 32)) * static_cast<float>(q.q[i] - 4);
          break;
        case QuantType::kQ2_K:
          out[i] = std::fma(d, static_cast<float>(q.sc[i / 16] * q.q[i]), -(m * static_cast<float>(q.mins[i / 16])));
          break;
        case QuantType::kIQ4_NL: out[i] = d * static_cast<float>(kIq4nlValues[q.q[i]]); break;
        case QuantType::kIQ4_XS:
          out[i] = (d * static_cast<float>(q.sc[i / 32] - 32)) * static_cast<float>(kIq4nlValues[q.q[i]]);
          break;
        case QuantType::kNone: break;
      }
    }
  }
}

void quantize_row(QuantType type, const float* x, int64_t k, void* blocks) {
  const QuantFormat& f = quant_format(type);
  const int64_t nb = quant_row_bytes(type, k) / f.block_bytes;
  for (int64_t i = 0; i < k; ++i)
    if (!std::isfinite(x[i]))
      throw_invalid_argument(std::string("quantize_row ") + std::string(f.name) + ": element " + std::to_string(i) +
                             " is not finite");
  auto* b = static_cast<uint8_t*>(blocks);
  for (int64_t blk = 0; blk < nb; ++blk)
    quantize_block(type, x + blk * f.block_size, blk * f.block_size, b + blk * f.block_bytes);
}

}  // namespace ditto
