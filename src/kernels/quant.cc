#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace ditto {
namespace {

constexpr QuantFormat kFormats[] = {
    {1, 0, "none"}, {32, 34, "Q8_0"}, {32, 18, "Q4_0"}, {32, 20, "Q4_1"}, {256, 144, "Q4_K"}, {256, 210, "Q6_K"},
};

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
  double vmax = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(double(x[i])) > std::fabs(vmax)) vmax = x[i];
  const uint16_t dh = scale_to_f16(vmax / -8.0, x0);
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

void quantize_q4_k(const float* x, int64_t x0, uint8_t* b) {
  double scale[8], neg_min[8], max_scale = 0, max_neg_min = 0;
  for (int j = 0; j < 8; ++j) {
    double lo_v = 0, hi_v = x[32 * j];
    for (int i = 0; i < 32; ++i)
      lo_v = std::min(lo_v, double(x[32 * j + i])), hi_v = std::max(hi_v, double(x[32 * j + i]));
    scale[j] = (hi_v - lo_v) / 15.0;
    neg_min[j] = -lo_v;
    max_scale = std::max(max_scale, scale[j]);
    max_neg_min = std::max(max_neg_min, neg_min[j]);
  }
  const uint16_t dh = scale_to_f16(max_scale / 63.0, x0);
  const uint16_t mh = scale_to_f16(max_neg_min / 63.0, x0);
  const double d = f16_to_f32(dh), dmin = f16_to_f32(mh);
  store_u16(b, dh);
  store_u16(b + 2, mh);
  uint8_t* s = b + 4;
  std::memset(s, 0, 12);
  uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    const int sc = d == 0 ? 0 : clamp_int(rne(scale[j] / d), 0, 63);
    const int m = dmin == 0 ? 0 : clamp_int(rne(neg_min[j] / dmin), 0, 63);
    if (j < 4) {
      s[j] |= static_cast<uint8_t>(sc);
      s[j + 4] |= static_cast<uint8_t>(m);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc & 0x0f) | ((m & 0x0f) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m >> 4) << 6);
    }
    const double step = d * sc, offset = dmin * m;
    for (int i = 0; i < 32; ++i) {
      const int q = step == 0 ? 0 : clamp_int(rne((x[32 * j + i] + offset) / step), 0, 15);
      uint8_t& byte = qs[32 * (j / 2) + i];
      byte = static_cast<uint8_t>(j % 2 == 0 ? (byte & 0xf0) | q : (byte & 0x0f) | (q << 4));
    }
  }
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
    case QuantType::kNone: break;
  }
  DITTO_CHECK(false) << "unpack_block: not a quantized type";
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
        case QuantType::kQ6_K: out[i] = d * static_cast<float>(q.sc[i / 16] * (q.q[i] - 32)); break;
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
