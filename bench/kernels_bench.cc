// Kernel speed as a fraction of the machine's limits, both measured in the same run.
//
//   kernels_bench [--threads N] [--json] [--models qwen3-0.6b,qwen3-8b]
//                 [--kernels gemv,gemm,attention,prefill_attention] [--quant q8_0,q4_k]
//
// Rows, one per kernel and shape (shapes from the test-model presets, i.e. the official configs):
//   gemv       m = 1 (batch-1 decode) on each weight matrix of a decoder layer and the LM head:
//              qkv_proj [q_dim + 2·kv_dim, hidden], o_proj [hidden, q_dim], gate_up_proj
//              [2·intermediate, hidden], down_proj [hidden, intermediate], lm_head [vocab, hidden],
//              bf16 weights from seeded random bits packed with pack_matrix. Decode streams each
//              weight from DRAM once, so the limit is read bandwidth: ratio = packed weight bytes/s
//              ÷ measured read bandwidth, target ≥ 0.85. A matrix smaller than kWorkingSetBytes is
//              copied until the copies exceed it, and a timed pass runs the GEMV on every copy in
//              turn, so no weight is still in L3 when it is read again.
//   gemm       m = 512 (a prefill step; --gemm-rows for others) on the same matrices: ratio = 2·m·n·k FLOP/s ÷ measured
//   peak
//              of the instruction the bf16-weight GEMM runs (VDPBF16PS on avx512 with AVX512-BF16,
//              twice the float32 FMA peak; else the FMA peak), target ≥ 0.6.
//   qgemv      gemv on quantized weights (GGML blocks of each --quant type, random integer fields and
//              scales): ratio = weight bytes/s (as stored in the checkpoint: PackedMatrix::weight_bytes)
//              ÷ measured read bandwidth, target ≥ 0.85.
//   qgemm      gemm (m = 512) on the same quantized weights: ratio = 2·m·n·k FLOP/s ÷ the float32 FMA
//              peak (the int8 dot products may beat it), no target.
//   attention  decode attention of one query at position kAttentionContext − 1 over a bf16 paged
//              KV cache (one layer's heads): ratio = K and V bytes/s ÷ read bandwidth, no target
//              (it also pays exp and the softmax). Rotated over copies like small GEMVs.
//   prefill_attention  the attention of a kPrefillAttentionContext-token prompt prefilled in steps of
//              kPrefillRows tokens (each step's queries over every key before them, one layer's
//              heads, as the engine runs a long prompt): ratio = 4·head_dim FLOP per (query head,
//              key) pair /s ÷ FMA peak, target ≥ 0.4.
// Timing: one warm-up pass, then up to 10 timed passes, the fastest reported; a row stops
// repeating after 3 s (bench/timing.h), so the scalar path still finishes.
// The limits: src/bench/machine_limits.h, on the same thread pool. The one a row is judged by is
// the best of a full measurement right before the row, one limit pass before each of the row's
// passes, and a full measurement right after, so that it samples the same moments of a shared
// machine as the row's fastest pass. Prints one line per row, or with --json one JSON array of
// row objects.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "architecture/config.h"
#include "bench/machine_limits.h"
#include "bench/timing.h"
#include "checkpoint/test_model_generator.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/packed_matrix.h"
#include "kernels/quant.h"

namespace ditto {
namespace {

constexpr int64_t kWorkingSetBytes = int64_t{128} << 20;  // 4× this machine's L3
constexpr int64_t kPrefillRows = 512;
constexpr int64_t kAttentionContext = 4096;
constexpr int64_t kAttentionBlockSize = 16;
constexpr int64_t kPrefillAttentionContext = 8192;
constexpr double kGemvTarget = 0.85;
constexpr double kGemmTarget = 0.6;
constexpr double kPrefillAttentionTarget = 0.4;
constexpr RepeatPolicy kRowPolicy{.warmups = 1, .repetitions = 10, .budget_seconds = 3};

struct MatrixShape {
  std::string name;
  int64_t n;  // output features
  int64_t k;  // input features
};

struct Row {
  std::string kernel, model, shape;
  int64_t m = 0, n = 0, k = 0;
  int copies = 1;
  RunTimes times;
  bool bandwidth_bound = true;         // judged by read bandwidth (bytes/s), else by a compute peak (FLOP/s)
  std::string peak_name = "fma peak";  // the compute peak: "fma peak" or "bf16 dot peak"
  double achieved = 0;                 // bytes/s or FLOP/s
  double limit = 0;                    // the limit, measured around and between the row's passes: bytes/s or FLOP/s
  double ratio = 0;                    // achieved / limit
  std::optional<double> target;
};

// Deterministic filler: splitmix64 (Steele, Lea, Flood 2014), not a statistical RNG.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// bf16 values of magnitude in [2^-7, 2^-3) with random sign and mantissa: normal numbers like
// real weights (the kernels' speed must not depend on values; denormals would be unfair).
std::vector<uint16_t> random_bf16(int64_t count, uint64_t seed) {
  std::vector<uint16_t> out(static_cast<size_t>(count));
  uint64_t state = seed;
  for (int64_t i = 0; i < count; i += 4) {
    const uint64_t r = splitmix64(state);
    for (int64_t j = 0; j < 4 && i + j < count; ++j) {
      const auto bits = static_cast<uint16_t>(r >> (16 * j));
      const uint16_t exponent = 120 + (bits >> 8) % 4;
      out[static_cast<size_t>(i + j)] = static_cast<uint16_t>((bits & 0x8000) | (exponent << 7) | (bits & 0x7f));
    }
  }
  return out;
}

std::vector<float> random_f32(int64_t count, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(count));
  uint64_t state = seed;
  for (float& v : out) v = static_cast<float>(splitmix64(state) >> 40) * 0x1p-23f - 1.0f;  // [-1, 1)
  return out;
}

ModelConfig preset_model_config(const std::string& preset) {
  return parse_model_config(preset_config(preset), "preset " + preset);
}

// The matrices one decode step multiplies by, as the model packs them (kernels fused as in
// CausalLM: q/k/v into qkv_proj, gate/up into gate_up_proj).
std::vector<MatrixShape> matrix_shapes(const ModelConfig& c) {
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  return {{"qkv_proj", q_dim + 2 * kv_dim, c.hidden_size},
          {"o_proj", c.hidden_size, q_dim},
          {"gate_up_proj", 2 * c.intermediate_size, c.hidden_size},
          {"down_proj", c.hidden_size, c.intermediate_size},
          {"lm_head", c.vocab_size, c.hidden_size}};
}

PackedMatrix random_packed(const MatrixShape& s, uint64_t seed, ThreadPool* pool) {
  const std::vector<uint16_t> w = random_bf16(s.n * s.k, seed);
  const MatrixSource source{w.data(), DType::kBF16, s.n, s.k};
  return pack_matrix(std::span<const MatrixSource>(&source, 1), pool);
}

// GGML rows with random integer fields and every block's f16 scales (and Q4_1 m / Q4_K dmin) set to
// small normal values, packed as the model packs them.
PackedMatrix random_quant_packed(const MatrixShape& s, QuantType t, uint64_t seed, ThreadPool* pool) {
  const QuantFormat& f = quant_format(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(s.n * quant_row_bytes(t, s.k)));
  uint64_t state = seed;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t r = splitmix64(state);
    std::memcpy(bytes.data() + i, &r, std::min<size_t>(8, bytes.size() - i));
  }
  const uint16_t scale = 0x2000;  // 2^-7
  for (size_t b = 0; b < bytes.size(); b += static_cast<size_t>(f.block_bytes)) {
    std::memcpy(bytes.data() + b + (t == QuantType::kQ6_K ? 208 : 0), &scale, 2);
    if (t == QuantType::kQ4_1 || t == QuantType::kQ4_K) std::memcpy(bytes.data() + b + 2, &scale, 2);
  }
  const MatrixSource source{bytes.data(), DType::kF32, s.n, s.k, t};
  return pack_matrix(std::span<const MatrixSource>(&source, 1), pool);
}

QuantType parse_quant(const std::string& name) {
  std::string names;
  for (int i = 1; i <= static_cast<int>(QuantType::kIQ4_XS); ++i) {
    const auto t = static_cast<QuantType>(i);
    std::string lower(quant_format(t).name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == lower) return t;
    names += (names.empty() ? "" : ", ") + lower;
  }
  throw_invalid_argument("--quant: unknown type '" + name + "'; choose from " + names);
}

Row make_row(const char* kernel, const std::string& model, const std::string& shape, int64_t m, int64_t n, int64_t k,
             int copies) {
  Row r;
  r.kernel = kernel;
  r.model = model;
  r.shape = shape;
  r.m = m;
  r.n = n;
  r.k = k;
  r.copies = copies;
  return r;
}

int copies_for(int64_t bytes) { return static_cast<int>(std::max<int64_t>(1, (kWorkingSetBytes + bytes - 1) / bytes)); }

struct Meters {
  ReadBandwidthMeter bandwidth;
  FmaPeakMeter fma;
  FmaPeakMeter bf16_dot;  // the bf16-weight GEMM's instruction (VDPBF16PS where used)
};

// Times a row's passes under kRowPolicy and sets *limit to the best of a full measurement of the
// limit before the row, one limit pass before each of the row's passes, and a full measurement
// after: the row's fastest pass catches the quietest moment of a noisy machine, so must its limit.
template <typename Meter>
RunTimes judged_by(Meter& meter, double* limit, const std::function<void()>& row_pass) {
  double best = meter.measure();
  const RunTimes times = time_runs(row_pass, kRowPolicy, [&] { best = std::max(best, meter.pass()); });
  *limit = std::max(best, meter.measure());
  return times;
}

// GEMV and GEMM rows of one matrix. The weight is built once; the GEMV's extra copies only while
// its row runs.
// quant: kNone for the bf16 rows ("gemv", "gemm"), else the quantized rows ("qgemv", "qgemm") whose
// shape names carry the type. Bytes per pass are the weights as stored (weight_bytes()).
void matrix_rows(const std::string& model, const MatrixShape& s, bool gemv, bool gemm_rows, QuantType quant,
                 const std::vector<int64_t>& gemm_ms, ThreadPool* pool, Meters& meters, std::vector<Row>& rows) {
  const bool quantized = quant != QuantType::kNone;
  const std::string shape = quantized ? s.name + ":" + std::string(quant_format(quant).name) : s.name;
  std::vector<PackedMatrix> copies;
  const auto seed = static_cast<uint64_t>(s.n * 31 + s.k);
  copies.push_back(quantized ? random_quant_packed(s, quant, seed, pool) : random_packed(s, seed, pool));
  const int64_t bytes = copies[0].weight_bytes();
  if (gemv) {
    const int num_copies = copies_for(bytes);
    while (static_cast<int>(copies.size()) < num_copies) copies.push_back(copies[0]);
    const std::vector<float> x = random_f32(s.k, 1);
    std::vector<float> y(static_cast<size_t>(s.n));
    Row r = make_row(quantized ? "qgemv" : "gemv", model, shape, 1, s.n, s.k, num_copies);
    r.times = judged_by(meters.bandwidth, &r.limit, [&] {
      for (const PackedMatrix& w : copies) gemm(x.data(), 1, s.k, w, y.data(), s.n, pool);
    });
    r.achieved = static_cast<double>(bytes) * num_copies / r.times.best_seconds;
    r.ratio = r.achieved / r.limit;
    r.target = kGemvTarget;
    rows.push_back(r);
    copies.resize(1);
  }
  for (const int64_t m : gemm_rows ? gemm_ms : std::vector<int64_t>{}) {
    const std::vector<float> x = random_f32(m * s.k, 2);
    std::vector<float> y(static_cast<size_t>(m * s.n));
    Row r = make_row(quantized ? "qgemm" : "gemm", model, shape, m, s.n, s.k, 1);
    r.bandwidth_bound = false;
    // bf16 weights: judged by the peak of the instruction their GEMM runs (VDPBF16PS doubles it).
    r.peak_name = quantized ? "fma peak" : "bf16 dot peak";
    r.times = judged_by(quantized ? meters.fma : meters.bf16_dot, &r.limit,
                        [&] { gemm(x.data(), m, s.k, copies[0], y.data(), s.n, pool); });
    r.achieved =
        2.0 * static_cast<double>(m) * static_cast<double>(s.n) * static_cast<double>(s.k) / r.times.best_seconds;
    r.ratio = r.achieved / r.limit;
    if (!quantized) r.target = kGemmTarget;
    rows.push_back(r);
  }
}

// Decode attention of one token over kAttentionContext cached positions, rotated over copies of the
// cache (one per "layer") until they exceed kWorkingSetBytes.
Row attention_row(const std::string& model, const ModelConfig& c, ThreadPool* pool, Meters& meters) {
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t num_blocks = (kAttentionContext + kAttentionBlockSize - 1) / kAttentionBlockSize;
  const int64_t slots = num_blocks * kAttentionBlockSize;
  const int64_t bytes = kAttentionContext * kv_dim * 2 * static_cast<int64_t>(sizeof(uint16_t));  // K and V read
  const int num_copies = copies_for(bytes);
  std::vector<std::vector<uint16_t>> k, v;  // [copies][slots, kv_dim] bf16
  for (int i = 0; i < num_copies; ++i) {
    k.push_back(random_bf16(slots * kv_dim, 100 + 2 * i));
    v.push_back(random_bf16(slots * kv_dim, 101 + 2 * i));
  }
  std::vector<int32_t> block_table(static_cast<size_t>(num_blocks));
  for (int64_t b = 0; b < num_blocks; ++b) block_table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  const int32_t position = static_cast<int32_t>(kAttentionContext - 1), token_seq = 0;
  const std::vector<float> q = random_f32(q_dim, 3);
  std::vector<float> out(static_cast<size_t>(q_dim));
  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim, kAttentionBlockSize,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  Row r = make_row("attention", model, "decode@" + std::to_string(kAttentionContext), 1, c.num_attention_heads,
                   c.head_dim, num_copies);
  r.times = judged_by(meters.bandwidth, &r.limit, [&] {
    for (int i = 0; i < num_copies; ++i) {
      const KvCacheLayer cache{k[i].data(), v[i].data(), slots};
      paged_attention(q.data(), q_dim, &position, &token_seq, 1, block_table.data(), num_blocks, cache, shape,
                      out.data(), q_dim, pool);
    }
  });
  r.achieved = static_cast<double>(bytes) * num_copies / r.times.best_seconds;
  r.ratio = r.achieved / r.limit;
  return r;
}

// Causal attention of one kPrefillAttentionContext-token sequence, prefilled in steps of kPrefillRows
// tokens with every key already cached (one layer; K/V 2·context·kv_dim bf16, in L3 or DRAM).
Row prefill_attention_row(const std::string& model, const ModelConfig& c, ThreadPool* pool, Meters& meters) {
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t context = kPrefillAttentionContext;
  const int64_t num_blocks = (context + kAttentionBlockSize - 1) / kAttentionBlockSize;
  const int64_t slots = num_blocks * kAttentionBlockSize;
  std::vector<uint16_t> k = random_bf16(slots * kv_dim, 200), v = random_bf16(slots * kv_dim, 201);
  std::vector<int32_t> block_table(static_cast<size_t>(num_blocks));
  for (int64_t b = 0; b < num_blocks; ++b) block_table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::vector<int32_t> positions(static_cast<size_t>(context)), token_seq(static_cast<size_t>(context), 0);
  for (int64_t p = 0; p < context; ++p) positions[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  const std::vector<float> q = random_f32(kPrefillRows * q_dim, 4);
  std::vector<float> out(static_cast<size_t>(kPrefillRows * q_dim));
  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim, kAttentionBlockSize,
                             1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  const KvCacheLayer cache{k.data(), v.data(), slots};
  Row r = make_row("attention", model, "prefill@" + std::to_string(context), kPrefillRows, c.num_attention_heads,
                   c.head_dim, 1);
  r.bandwidth_bound = false;
  r.times = judged_by(meters.fma, &r.limit, [&] {
    for (int64_t start = 0; start < context; start += kPrefillRows) {
      const int64_t n = std::min(kPrefillRows, context - start);
      paged_attention(q.data(), q_dim, positions.data() + start, token_seq.data(), n, block_table.data(), num_blocks,
                      cache, shape, out.data(), q_dim, pool);
    }
  });
  const double pairs = static_cast<double>(context) * static_cast<double>(context + 1) / 2.0;
  r.achieved =
      pairs * static_cast<double>(c.num_attention_heads) * 4.0 * static_cast<double>(c.head_dim) / r.times.best_seconds;
  r.ratio = r.achieved / r.limit;
  r.target = kPrefillAttentionTarget;
  return r;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void print_row(const Row& r) {
  char verdict[64] = "no target";
  if (r.target)
    std::snprintf(verdict, sizeof verdict, "target %.2f %s", *r.target, r.ratio >= *r.target ? "met" : "NOT met");
  const char* unit = r.bandwidth_bound ? "GB/s" : "GFLOP/s";
  std::printf("%-9s %-11s %-18s m=%-3lld n=%-6lld k=%-5lld x%-2d %8.2f %-7s of %8.2f %-14s = %5.3f  %s\n",
              r.kernel.c_str(), r.model.c_str(), r.shape.c_str(), static_cast<long long>(r.m),
              static_cast<long long>(r.n), static_cast<long long>(r.k), r.copies, r.achieved / 1e9, unit, r.limit / 1e9,
              r.bandwidth_bound ? "read bandwidth" : r.peak_name.c_str(), r.ratio, verdict);
}

nlohmann::ordered_json row_json(const Row& r, int threads) {
  nlohmann::ordered_json j = {
      {"kernel", r.kernel},
      {"model", r.model},
      {"shape", r.shape},
      {"m", r.m},
      {"n", r.n},
      {"k", r.k},
      {"copies", r.copies},
      {"isa", std::string(isa_name(active_isa()))},
      {"avx512_vnni", active_isa() == Isa::kAvx512 && avx512_vnni_enabled()},
      {"avx512_bf16", active_isa() == Isa::kAvx512 && avx512_bf16_enabled()},
      {"threads", threads},
      {"best_seconds", r.times.best_seconds},
      {"median_seconds", r.times.median_seconds},
      {"runs", r.times.runs},
  };
  if (r.bandwidth_bound) {
    j["gbps"] = r.achieved / 1e9;
    j["read_bandwidth_gbps"] = r.limit / 1e9;
  } else {
    j["gflops"] = r.achieved / 1e9;
    j[r.peak_name == "fma peak" ? "fma_gflops" : "bf16_dot_gflops"] = r.limit / 1e9;
  }
  j["ratio"] = r.ratio;
  j["target"] = r.target ? nlohmann::ordered_json(*r.target) : nlohmann::ordered_json(nullptr);
  j["met"] = r.target ? nlohmann::ordered_json(r.ratio >= *r.target) : nlohmann::ordered_json(nullptr);
  return j;
}

int run(int argc, char** argv) {
  CLI::App app{"Kernel speed as a ratio to the machine's read bandwidth and FMA peak, measured in the same run."};
  int threads = default_num_threads();
  bool json = false;
  std::string models = "qwen3-0.6b,qwen3-8b";
  std::string kernels = "gemv,gemm,attention,prefill_attention";
  std::string quant_types = "q8_0,q4_k";
  std::string gemm_rows = std::to_string(kPrefillRows);
  app.add_option("--threads", threads, "Worker threads (default: $DITTO_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, ThreadPool::kMaxThreads));
  app.add_flag("--json", json, "One JSON array of rows instead of the table");
  app.add_option("--models", models, "Comma-separated test-model presets whose shapes to run")->capture_default_str();
  app.add_option("--kernels", kernels,
                 "Comma-separated subset of gemv, gemm, attention, prefill_attention, qgemv, qgemm")
      ->capture_default_str();
  app.add_option("--quant", quant_types,
                 "GGML types of the qgemv/qgemm rows (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, q5_k, q6_k, q3_k, "
                 "q2_k, iq4_xs)")
      ->capture_default_str();
  app.add_option("--gemm-rows", gemm_rows,
                 "Comma-separated m of the gemm/qgemm rows (e.g. 32 for a batched decode step)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }
  const std::vector<std::string> kernel_list = split_list(kernels);
  for (const std::string& kname : kernel_list)
    if (kname != "gemv" && kname != "gemm" && kname != "attention" && kname != "prefill_attention" &&
        kname != "qgemv" && kname != "qgemm")
      throw_invalid_argument("--kernels: unknown kernel '" + kname +
                             "'; choose from gemv, gemm, attention, prefill_attention, qgemv, qgemm");
  std::vector<QuantType> quants;
  for (const std::string& q : split_list(quant_types)) quants.push_back(parse_quant(q));
  std::vector<int64_t> gemm_ms;
  for (const std::string& m : split_list(gemm_rows)) {
    char* end = nullptr;
    const long long v = std::strtoll(m.c_str(), &end, 10);
    if (m.empty() || *end != '\0' || v < 1 || v > 65536)
      throw_invalid_argument("--gemm-rows: '" + m + "' is not a row count in [1, 65536]");
    gemm_ms.push_back(v);
  }
  const auto wants = [&](const char* kname) {
    return std::find(kernel_list.begin(), kernel_list.end(), kname) != kernel_list.end();
  };
  std::vector<std::pair<std::string, ModelConfig>> configs;
  for (const std::string& p : split_list(models)) configs.emplace_back(p, preset_model_config(p));

  ThreadPool pool(threads);
  Meters meters{ReadBandwidthMeter(&pool), FmaPeakMeter(&pool), FmaPeakMeter(&pool, FmaPeakMeter::Kind::kBf16Dot)};
  if (!json)
    std::printf("isa %s%s, %d threads\n", std::string(isa_name(active_isa())).c_str(),
                active_isa() == Isa::kAvx512 && avx512_vnni_enabled() ? " (avx512_vnni for quantized weights)" : "",
                threads);
  std::vector<Row> rows;
  const auto emit = [&](size_t from) {
    if (!json)
      for (size_t i = from; i < rows.size(); ++i) print_row(rows[i]);
    std::fflush(stdout);
  };
  for (const auto& [name, config] : configs) {
    for (const MatrixShape& s : matrix_shapes(config)) {
      const size_t from = rows.size();
      if (wants("gemv") || wants("gemm"))
        matrix_rows(name, s, wants("gemv"), wants("gemm"), QuantType::kNone, gemm_ms, &pool, meters, rows);
      if (wants("qgemv") || wants("qgemm"))
        for (QuantType q : quants)
          matrix_rows(name, s, wants("qgemv"), wants("qgemm"), q, gemm_ms, &pool, meters, rows);
      emit(from);
    }
    if (wants("attention")) {
      rows.push_back(attention_row(name, config, &pool, meters));
      emit(rows.size() - 1);
    }
    if (wants("prefill_attention")) {
      rows.push_back(prefill_attention_row(name, config, &pool, meters));
      emit(rows.size() - 1);
    }
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Row& r : rows) out.push_back(row_json(r, threads));
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ditto

int main(int argc, char** argv) {
  try {
    return ditto::run(argc, argv);
  } catch (const ditto::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 3;
  }
}
