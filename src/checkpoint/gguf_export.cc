#include "checkpoint/gguf_export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/architecture.h"
#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "architecture/rope_frequencies.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_vocab_export.h"
#include "checkpoint/gguf_writer.h"
#include "checkpoint/pooling_files.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/progress.h"
#include "kernels/quant.h"

namespace ditto {
namespace {

using nlohmann::json;

// LlamaFileType and GGML_QUANT_VERSION (gguf-py/gguf/constants.py).
constexpr uint32_t kFileTypeAllF32 = 0, kFileTypeMostlyF16 = 1, kFileTypeMostlyBF16 = 32;
// llama_ftype (llama.h) of the quantized outtypes.
constexpr uint32_t kFileTypeMostlyQ4_0 = 2, kFileTypeMostlyQ4_1 = 3, kFileTypeMostlyQ8_0 = 7, kFileTypeMostlyQ5_0 = 8,
                   kFileTypeMostlyQ5_1 = 9, kFileTypeMostlyQ2_K = 10, kFileTypeMostlyQ3_K_S = 11,
                   kFileTypeMostlyQ4_K_S = 14, kFileTypeMostlyQ5_K_S = 16, kFileTypeMostlyQ6_K = 18,
                   kFileTypeMostlyQ3_K_M = 12, kFileTypeMostlyQ4_K_M = 15, kFileTypeMostlyQ5_K_M = 17,
                   kFileTypeMostlyIQ4_NL = 25, kFileTypeMostlyIQ4_XS = 30;
constexpr uint32_t kQuantizationVersion = 2;

// llama.cpp's LLAMA_POOLING_TYPE (gguf-py PoolingType) of a pooling.
uint32_t gguf_pooling_type(PoolingType type) {
  switch (type) {
    case PoolingType::kMean: return 1;
    case PoolingType::kCls: return 2;
    case PoolingType::kLast: return 3;
  }
  return 0;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// general.size_label: gguf.utility.model_weight_count_rounded_notation ("596M", "1.2B").
std::string size_label(uint64_t n) {
  const double x = static_cast<double>(n);
  const auto [scaled, suffix] = x > 1e12  ? std::pair(x * 1e-12, 'T')
                                : x > 1e9 ? std::pair(x * 1e-9, 'B')
                                : x > 1e6 ? std::pair(x * 1e-6, 'M')
                                          : std::pair(x * 1e-3, 'K');
  std::string digits = std::to_string(static_cast<long long>(std::nearbyint(scaled)));
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  const int fix = std::max(2 - static_cast<int>(digits.size()), 0);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f%c", fix, scaled, suffix);
  return buf;
}

// What an architecture with GgufArchitecture::sparse_every_layer can hold (qwen3moe,
// src/models/qwen3moe.cpp): ffn_gate_inp and *_exps on every layer, top-k weights always renormalised.
void check_moe_exportable(const ModelConfig& c, const std::string& arch, const std::string& config_path) {
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.is_moe_layer(layer)) continue;
    std::string only;
    for (int64_t l : c.mlp_only_layers) only += (only.empty() ? "" : ", ") + std::to_string(l);
    throw_invalid_argument(config_path + ": layer " + std::to_string(layer) + " is dense (mlp_only_layers = [" + only +
                           "], decoder_sparse_step = " + std::to_string(c.decoder_sparse_step) + "); llama.cpp's " +
                           arch +
                           " architecture has a sparse MoE block on every layer and no dense MLP "
                           "tensors (convert_hf_to_gguf.py cannot map model.layers." +
                           std::to_string(layer) + ".mlp.gate_proj.weight either)");
  }
  if (!c.norm_topk_prob) {
    std::fprintf(stderr,
                 "warning: %s: norm_topk_prob is false, but llama.cpp's %s always renormalises "
                 "the top-k routing weights (no GGUF key says otherwise; convert_hf_to_gguf.py writes "
                 "the same file): llama.cpp will not compute this model as Hugging Face does\n",
                 config_path.c_str(), arch.c_str());
  }
}

// general.sampling.* from generation_config.json (gguf.Metadata.load), in the converter's order.
// What llama.cpp's graph fixes for an architecture with sliding layers (GgufArchitecture::swa_pattern,
// gguf_model.cc reads the same): a config that differs would load there as another model.
void check_sliding_window_exportable(const ModelConfig& c, const GgufArchitecture& g, const std::string& config_path) {
  if (g.swa_pattern == 0) {  // a window the GGUF architecture cannot carry: only one that never binds
    if (c.sliding_window < c.max_position_embeddings)
      throw_invalid_argument(config_path + ": 'sliding_window' " + std::to_string(c.sliding_window) +
                             " cannot be exported: llama.cpp's " + g.arch +
                             " has no sliding window, and this one binds (max_position_embeddings " +
                             std::to_string(c.max_position_embeddings) + ")");
    return;
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_sliding_layer(i) != (g.swa_pattern > 0 && (i + 1) % g.swa_pattern != 0))
      throw_invalid_argument(config_path + ": 'layer_types' cannot be exported for " + g.arch +
                             ": llama.cpp makes every " + std::to_string(g.swa_pattern) +
                             "th layer full attention and the others sliding; layer " + std::to_string(i) + " differs");
  }
  if (c.rope_local_base_freq != g.swa_rope_freq_base)
    throw_invalid_argument(config_path + ": 'rope_local_base_freq' " + std::to_string(c.rope_local_base_freq) +
                           " cannot be exported for " + g.arch + ": llama.cpp uses " +
                           std::to_string(g.swa_rope_freq_base));
  const double llama_cpp_scalar = c.num_hidden_layers == 62 ? static_cast<double>(c.hidden_size / c.num_attention_heads)
                                                            : static_cast<double>(c.head_dim);
  if (c.query_pre_attn_scalar != llama_cpp_scalar)
    throw_invalid_argument(config_path + ": 'query_pre_attn_scalar' " + std::to_string(c.query_pre_attn_scalar) +
                           " cannot be exported for " + g.arch + ": llama.cpp scales attention by 1/sqrt(" +
                           std::to_string(llama_cpp_scalar) + ")");
}

void add_sampling(GgufWriter& w, const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  const std::optional<json> g = read_json_file_if_present(path);
  if (!g) return;
  struct Key {
    const char* hf;
    const char* alt;
    const char* gguf;
    char kind;
  };  // s, i, f
  static const Key kKeys[] = {{"sequence", "", "sequence", 's'},
                              {"top_k", "", "top_k", 'i'},
                              {"top_p", "", "top_p", 'f'},
                              {"min_p", "", "min_p", 'f'},
                              {"xtc_probability", "", "xtc_probability", 'f'},
                              {"xtc_threshold", "", "xtc_threshold", 'f'},
                              {"temperature", "", "temp", 'f'},
                              {"penalty_last_n", "", "penalty_last_n", 'i'},
                              {"penalty_repeat", "repetition_penalty", "penalty_repeat", 'f'},
                              {"mirostat", "", "mirostat", 'i'},
                              {"mirostat_tau", "", "mirostat_tau", 'f'},
                              {"mirostat_eta", "", "mirostat_eta", 'f'}};
  for (const Key& k : kKeys) {
    const char* name = g->contains(k.hf) ? k.hf : k.alt;
    if (!g->contains(name) || (*g)[name].is_null()) continue;
    const json& val = (*g)[name];
    const std::string key = std::string("general.sampling.") + k.gguf;
    const bool ok = k.kind == 's' ? val.is_string() : k.kind == 'i' ? val.is_number_integer() : val.is_number();
    if (!ok) throw_invalid_argument(path + ": " + name + " = " + val.dump() + " has the wrong type");
    if (k.kind == 's') w.add_string(key, val.get<std::string>());
    if (k.kind == 'i') w.add_i32(key, val.get<int32_t>());
    if (k.kind == 'f') w.add_f32(key, val.get<float>());
  }
}

struct TensorPlan {
  GgufTensorSpec spec;
  // Written back to back: one checkpoint tensor, or one per expert (stacked experts: the experts
  // become the outermost dimension, so the bytes are simply consecutive). Empty: `generated`.
  std::vector<const TensorInfo*> sources;
  int64_t head_dim = 0;  // > 0: rows regrouped per head of this size (llama q/k)
  bool add_one = false;  // a unit-offset norm: written as 1 + w in float32 (llama.cpp's Gemma converters)
  std::vector<float> generated;
};

// Every tensor the converter writes, in its order: rope_freqs.weight first (llama3 scaling), then
// for_each_tensor's tensors, a layer's experts merged right after its router as
// Qwen2MoeModel.modify_tensors merges them (torch.stack over the expert index, yielding down_proj,
// gate_proj, up_proj): one [num_experts, out_features, in_features] tensor per projection.
// llama.cpp's tensor_type_fallback: the type a matrix of `cols` columns takes when `type`'s blocks
// do not divide its rows; kNone (keep the stored dtype) where 32 does not divide them either.
QuantType fallback_type(QuantType type, int64_t cols) {
  if (type == QuantType::kNone || cols % quant_format(type).block_size == 0) return type;
  QuantType next = QuantType::kNone;
  switch (type) {
    case QuantType::kIQ4_XS: next = QuantType::kIQ4_NL; break;
    case QuantType::kQ2_K:
    case QuantType::kQ3_K: next = QuantType::kQ4_0; break;
    case QuantType::kQ4_K: next = QuantType::kQ5_0; break;
    case QuantType::kQ5_K: next = QuantType::kQ5_1; break;
    case QuantType::kQ6_K: next = QuantType::kQ8_0; break;
    default: return QuantType::kNone;
  }
  return cols % quant_format(next).block_size == 0 ? next : QuantType::kNone;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama_tensor_get_type_impl for the mixes ditto writes (no importance matrix): the type of the
// weight matrix `gguf_name` (layer `layer`, −1 outside the blocks) of `cols` columns.
QuantType mix_type(const GgufOuttype& o, const ModelConfig& c, const std::string& gguf_name, int64_t layer,
                   int64_t cols) {
  const auto has = [&](const char* part) { return gguf_name.find(part) != std::string::npos; };
  const int64_t n = c.num_hidden_layers;
  const int64_t gqa = c.num_attention_heads / std::max<int64_t>(1, c.num_key_value_heads);
  const bool eight_experts = c.num_experts == 8;
  QuantType t = o.type;
  const GgufMix m = o.mix;
  if (gguf_name == "output.weight" || (c.tie_word_embeddings && gguf_name == "token_embd.weight")) {
    if (cols % quant_format(t).block_size != 0) return QuantType::kQ8_0;
    return t == QuantType::kQ8_0 ? t : QuantType::kQ6_K;
  }
  if (has("attn_v.weight")) {
    if (m == GgufMix::kQ2_K)
      t = gqa >= 4 ? QuantType::kQ4_K : QuantType::kQ3_K;
    else if (m == GgufMix::kQ3_K_M)
      t = layer < 2 ? QuantType::kQ5_K : QuantType::kQ4_K;
    else if (m == GgufMix::kIQ4_XS && gqa >= 4)
      t = QuantType::kQ5_K;
    else if ((m == GgufMix::kQ4_K_M || m == GgufMix::kQ5_K_M) && use_more_bits(layer, n))
      t = QuantType::kQ6_K;
    // LLM_TYPE_70B (a llama of 80 layers): attn_v, 8 times smaller than attn_q, takes more bits.
    if (c.architecture == "LlamaForCausalLM" && n == 80 && (t == QuantType::kQ3_K || t == QuantType::kQ4_K))
      t = QuantType::kQ5_K;
    if (eight_experts) t = QuantType::kQ8_0;
  } else if (has("attn_k.weight")) {
    if (eight_experts) t = QuantType::kQ8_0;
  } else if (has("ffn_down")) {
    if (m == GgufMix::kQ2_K)
      t = QuantType::kQ3_K;
    else if (m == GgufMix::kQ3_K_M)
      t = layer < n / 16 ? QuantType::kQ5_K : QuantType::kQ4_K;
    else if (m == GgufMix::kQ4_K_M && use_more_bits(layer, n))
      t = QuantType::kQ6_K;
    else if (m == GgufMix::kIQ4_XS && layer < n / 8)
      t = QuantType::kQ5_K;
    else if (m == GgufMix::kQ5_K_M && use_more_bits(layer, n))
      t = QuantType::kQ6_K;
  } else if (has("attn_output.weight")) {
    if (eight_experts) {
      if (m != GgufMix::kQ5_K_M) t = QuantType::kQ5_K;
    } else if (m == GgufMix::kQ2_K) {
      t = QuantType::kQ3_K;
    } else if (m == GgufMix::kQ3_K_M) {
      t = QuantType::kQ4_K;
    }
  }
  return t;
}

// The layer of a blk.N. tensor, −1 for the others.
int64_t gguf_layer(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return -1;
  return std::stoll(gguf_name.substr(4, gguf_name.find('.', 4) - 4));
}

// The type a weight matrix of `cols` columns is written in for `outtype` (the stored type for
// "auto", or where no quantized type's blocks divide its rows).
GgmlType matrix_type(const GgufOuttype& outtype, const ModelConfig& c, const std::string& gguf_name, GgmlType stored,
                     int64_t cols) {
  if (outtype.type == QuantType::kNone) return stored;
  const QuantType chosen =
      outtype.mix == GgufMix::kNone ? outtype.type : mix_type(outtype, c, gguf_name, gguf_layer(gguf_name), cols);
  const QuantType t = fallback_type(chosen, cols);
  return t == QuantType::kNone ? stored : ggml_type_of(t);
}

std::vector<TensorPlan> plan_tensors(const ModelConfig& c, const GgufArchitecture& g, const WeightStore& store,
                                     const GgufOuttype& outtype) {
  std::vector<TensorPlan> plan;
  if (c.rope_scaling) {
    if (!g.rope_freqs) {
      std::vector<std::string> archs;
      for (const Architecture& a : architectures())
        if (a.gguf.rope_freqs) archs.push_back(a.gguf.arch);
      throw_invalid_argument("rope_scaling '" + c.rope_scaling->rope_type + "' cannot be exported for " + c.model_type +
                             ": llama.cpp reads it (as rope_freqs) only for " + join(archs));
    }
    TensorPlan p;
    p.generated = llama3_rope_freq_divisors(c);
    p.spec = {"rope_freqs.weight", GgmlType::kF32, {static_cast<int64_t>(p.generated.size())}};
    plan.push_back(std::move(p));
  }
  // The current layer's stacked experts by GGUF name: ffn_down_exps, ffn_gate_exps, ffn_up_exps
  // sort as the converter yields them.
  std::map<std::string, TensorPlan> stacked;
  auto flush_stacked = [&] {
    for (auto& [name, p] : stacked) plan.push_back(std::move(p));
    stacked.clear();
  };
  for_each_tensor(c, [&](const TensorDesc& t) {
    const TensorInfo& source = store.get(t.name);
    if (t.expert >= 0) {
      TensorPlan& p = stacked[t.gguf_name];
      if (!p.sources.empty() && source.dtype != p.sources.front()->dtype) {
        throw_invalid_argument("tensor '" + source.name + "' is " + std::string(dtype_name(source.dtype)) +
                               " but expert 0's is " + std::string(dtype_name(p.sources.front()->dtype)) +
                               ": a layer's experts are stacked into one GGUF tensor of one type");
      }
      p.sources.push_back(&source);
      p.spec = {t.gguf_name,
                matrix_type(outtype, c, t.gguf_name, ggml_type_of(p.sources.front()->dtype), source.shape[1]),
                {c.num_experts, source.shape[0], source.shape[1]}};
      return;
    }
    flush_stacked();
    TensorPlan p;
    p.sources = {&source};
    const GgmlType stored = t.gguf_f32 ? GgmlType::kF32 : ggml_type_of(source.dtype);
    p.spec = {
        t.gguf_name,
        t.gguf_f32 || source.shape.size() != 2 ? stored : matrix_type(outtype, c, t.gguf_name, stored, source.shape[1]),
        source.shape};
    if (g.permute_qk && t.rope_rows) p.head_dim = c.head_dim;
    p.add_one = t.unit_offset;
    plan.push_back(std::move(p));
  });
  flush_stacked();
  return plan;
}

// Streams one checkpoint tensor from the mmap: straight when nothing changes, else by rows
// (permute) or 64k-element chunks (to f32); its pages are dropped from the resident set once written.
void write_source(GgufWriter& w, const TensorPlan& p, const TensorInfo& t, const WeightStore& store) {
  if (ggml_type_is_quantized(p.spec.type)) {  // row by row: to f32, then GGML blocks
    const int64_t rows = t.shape[0], cols = t.numel() / rows;
    const QuantType q = quant_type_of(p.spec.type);
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> blocks(static_cast<size_t>(quant_row_bytes(q, cols)));
    const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = p.head_dim > 0 ? llama_permuted_row(r, p.head_dim) : r;
      for (int64_t i = 0; i < cols; ++i)
        row[static_cast<size_t>(i)] =
            load_as_f32(t.data + static_cast<size_t>(from) * row_bytes, t.dtype, static_cast<size_t>(i));
      try {
        quantize_row(q, row.data(), cols, blocks.data());
      } catch (const Error& e) {
        throw_invalid_argument("tensor '" + t.name + "' row " + std::to_string(from) + ": " + e.what());
      }
      w.write_tensor_data(blocks.data(), blocks.size());
    }
    store.release(t);
    return;
  }
  const bool to_f32 = p.spec.type != ggml_type_of(t.dtype) || p.add_one;
  const size_t in_size = dtype_size(t.dtype);
  std::vector<float> buf;
  auto emit = [&](const uint8_t* src, int64_t n) {
    if (!to_f32) return w.write_tensor_data(src, static_cast<size_t>(n) * in_size);
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buf[i] = load_as_f32(src, t.dtype, static_cast<size_t>(i));
    if (p.add_one)  // the float32 1 + w that loading a safetensors checkpoint computes (checkpoint_tensors.h)
      for (float& v : buf) v = 1.0f + v;
    w.write_tensor_data(buf.data(), buf.size() * sizeof(float));
  };
  if (p.head_dim > 0) {
    const int64_t rows = t.shape[0], cols = t.numel() / rows;
    for (int64_t r = 0; r < rows; ++r) emit(t.data + llama_permuted_row(r, p.head_dim) * cols * in_size, cols);
  } else if (to_f32) {
    constexpr int64_t kChunk = 1 << 16;
    for (int64_t i = 0; i < t.numel(); i += kChunk) {
      emit(t.data + i * in_size, std::min(kChunk, t.numel() - i));
    }
  } else {  // a straight copy, its pages dropped as it goes: resident memory stays one chunk
    constexpr size_t kCopyChunk = size_t{16} << 20;
    for (size_t done = 0; done < t.nbytes; done += kCopyChunk) {
      const size_t n = std::min(kCopyChunk, t.nbytes - done);
      w.write_tensor_data(t.data + done, n);
      if (t.file != nullptr) t.file->release(t.file_offset + done, n);
    }
  }
  store.release(t);
}

void write_tensor(GgufWriter& w, const TensorPlan& p, const WeightStore& store) {
  if (p.sources.empty()) {
    w.write_tensor_data(p.generated.data(), p.generated.size() * sizeof(float));
    return;
  }
  for (const TensorInfo* t : p.sources) write_source(w, p, *t, store);
}

// general.size_label as prepare_metadata computes it (gguf_writer.get_total_parameter_count,
// gguf.size_label): the parameter count, or for MoE "<experts>x<shared + one expert's>" ("128x1.8B").
std::string plan_size_label(const std::vector<TensorPlan>& plan) {
  uint64_t total = 0, shared = 0, per_expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const TensorPlan& p : plan) {
    uint64_t n = 1;
    for (int64_t d : p.spec.shape) n *= static_cast<uint64_t>(d);
    total += n;
    if (p.spec.name.find("_exps.") != std::string::npos && p.spec.shape.size() >= 3) {
      const auto experts = static_cast<uint64_t>(p.spec.shape[0]);
      per_expert += n / experts;
      expert_sum += experts;
      ++expert_tensors;
    } else {
      shared += n;
    }
  }
  if (expert_tensors == 0) return size_label(total);
  return std::to_string(expert_sum / expert_tensors) + "x" + size_label(shared + per_expert);
}

}  // namespace

GgufOuttype parse_gguf_outtype(const std::string& outtype) {
  static const std::pair<const char*, GgufOuttype> kNames[] = {{"auto", {}},
                                                               {"q8_0", QuantType::kQ8_0},
                                                               {"q4_0", QuantType::kQ4_0},
                                                               {"q4_1", QuantType::kQ4_1},
                                                               {"q5_0", QuantType::kQ5_0},
                                                               {"q5_1", QuantType::kQ5_1},
                                                               {"iq4_nl", QuantType::kIQ4_NL},
                                                               {"q4_k", QuantType::kQ4_K},
                                                               {"q5_k", QuantType::kQ5_K},
                                                               {"q6_k", QuantType::kQ6_K},
                                                               {"q3_k", QuantType::kQ3_K},
                                                               {"q2_k", {QuantType::kQ2_K, GgufMix::kQ2_K}},
                                                               {"q3_k_m", {QuantType::kQ3_K, GgufMix::kQ3_K_M}},
                                                               {"q4_k_m", {QuantType::kQ4_K, GgufMix::kQ4_K_M}},
                                                               {"q5_k_m", {QuantType::kQ5_K, GgufMix::kQ5_K_M}},
                                                               {"iq4_xs", {QuantType::kIQ4_XS, GgufMix::kIQ4_XS}}};
  std::string names;
  for (const auto& [name, value] : kNames) {
    if (outtype == name) return value;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw_invalid_argument("--outtype is '" + outtype + "'; expected one of " + names);
}

GgufExportSummary export_gguf(const std::string& dir, const std::string& output, const std::string& name) {
  return export_gguf(dir, output, name, GgufOuttype{});
}

GgufExportSummary export_gguf(const std::string& dir, const std::string& output, const std::string& name,
                              const GgufOuttype& outtype) {
  const std::string config_path = dir + "/config.json";
  const json config_json = read_json_file(config_path, /*require_object=*/false);
  std::string arch_name;
  if (const auto it = config_json.find("architectures");
      it != config_json.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    arch_name = (*it)[0].get<std::string>();
  }
  // Checked before parsing, so that an architecture ditto runs but cannot export or does not know
  // at all gets the same message.
  if (const Architecture* known = find_architecture(arch_name);
      !arch_name.empty() && (known == nullptr || known->gguf.arch.empty())) {
    std::vector<std::string> exportable;
    for (const Architecture& a : architectures())
      if (!a.gguf.arch.empty()) exportable.push_back(a.name);
    throw_invalid_argument(config_path + ": architecture '" + arch_name +
                           "' cannot be exported to GGUF (supported: " + join(exportable) + ")");
  }
  const ModelConfig c = parse_model_config(config_json, config_path);
  const GgufArchitecture& g = find_architecture(c.architecture)->gguf;
  if (g.arch.empty()) throw_invalid_argument(config_path + ": " + c.architecture + " cannot be exported to GGUF");
  const std::string& arch = g.arch;
  if (g.sparse_every_layer) check_moe_exportable(c, arch, config_path);
  if (c.has_sliding_layers()) check_sliding_window_exportable(c, g, config_path);
  const WeightStore store = WeightStore::open(dir);
  validate_weights(c, store);
  const std::vector<TensorPlan> plan = plan_tensors(c, g, store, outtype);
  GgufVocab vocab;
  try {
    vocab = read_gguf_vocab(dir, config_json, c.vocab_size);
  } catch (const json::exception& e) {  // a field of the wrong type or missing
    throw_invalid_argument(dir + "/tokenizer.json (or tokenizer_config.json): unexpected structure: " + e.what());
  }
  const std::optional<PoolingFiles> pooling = read_pooling_files(dir);

  uint32_t file_type = kFileTypeMostlyF16;  // the converter's fallback
  bool file_type_set = false;
  for (const TensorPlan& p : plan) {
    if (!p.sources.empty() && p.spec.shape.size() >= 2 && !file_type_set) {
      const DType dtype = p.sources.front()->dtype;
      file_type = dtype == DType::kBF16  ? kFileTypeMostlyBF16
                  : dtype == DType::kF16 ? kFileTypeMostlyF16
                                         : kFileTypeAllF32;
      file_type_set = true;
    }
  }
  switch (outtype.type) {
    case QuantType::kNone: break;
    case QuantType::kQ8_0: file_type = kFileTypeMostlyQ8_0; break;
    case QuantType::kQ4_0: file_type = kFileTypeMostlyQ4_0; break;
    case QuantType::kQ4_1: file_type = kFileTypeMostlyQ4_1; break;
    case QuantType::kQ4_K: file_type = kFileTypeMostlyQ4_K_S; break;
    case QuantType::kQ6_K: file_type = kFileTypeMostlyQ6_K; break;
    case QuantType::kQ5_0: file_type = kFileTypeMostlyQ5_0; break;
    case QuantType::kQ5_1: file_type = kFileTypeMostlyQ5_1; break;
    case QuantType::kQ5_K: file_type = kFileTypeMostlyQ5_K_S; break;
    case QuantType::kQ3_K: file_type = kFileTypeMostlyQ3_K_S; break;
    case QuantType::kQ2_K: file_type = kFileTypeMostlyQ2_K; break;
    case QuantType::kIQ4_NL: file_type = kFileTypeMostlyIQ4_NL; break;
    case QuantType::kIQ4_XS: file_type = kFileTypeMostlyIQ4_XS; break;
  }
  switch (outtype.mix) {
    case GgufMix::kNone:
    case GgufMix::kQ2_K:
    case GgufMix::kIQ4_XS: break;  // the same llama_ftype as the pure type
    case GgufMix::kQ3_K_M: file_type = kFileTypeMostlyQ3_K_M; break;
    case GgufMix::kQ4_K_M: file_type = kFileTypeMostlyQ4_K_M; break;
    case GgufMix::kQ5_K_M: file_type = kFileTypeMostlyQ5_K_M; break;
  }

  // Writing over one of the model's own files would truncate weights that are still being read
  // (memory-mapped): refuse, whatever path or symlink names it.
  if (std::filesystem::exists(output)) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (std::filesystem::equivalent(entry.path(), output, ec))
        throw_invalid_argument("--output '" + output + "' is " + entry.path().string() +
                               ", a file of the model being exported; write the GGUF elsewhere");
  }
  GgufWriter w(output);
  w.add_string("general.architecture", arch);
  w.add_string("general.type", "model");
  add_sampling(w, dir);
  w.add_string("general.name", name);
  if (c.random_weights) w.add_bool("ditto.random_weights", true);  // ModelConfig::random_weights
  const std::string label = plan_size_label(plan);
  w.add_string("general.size_label", label);
  const std::string a = arch + ".";
  w.add_u32(a + "block_count", gguf_u32(c.num_hidden_layers, "num_hidden_layers"));
  w.add_u32(a + "context_length", gguf_u32(c.max_position_embeddings, "max_position_embeddings"));
  w.add_u32(a + "embedding_length", gguf_u32(c.hidden_size, "hidden_size"));
  w.add_u32(a + "feed_forward_length", gguf_u32(c.intermediate_size, "intermediate_size"));
  w.add_u32(a + "attention.head_count", gguf_u32(c.num_attention_heads, "num_attention_heads"));
  w.add_u32(a + "attention.head_count_kv", gguf_u32(c.num_key_value_heads, "num_key_value_heads"));
  w.add_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  if (c.is_moe()) {
    w.add_u32(a + "expert_count", gguf_u32(c.num_experts, "num_experts"));
    w.add_u32(a + "expert_used_count", gguf_u32(c.num_experts_per_tok, "num_experts_per_tok"));
  }
  // Written even when config.json leaves head_dim to its default (the converter then omits them
  // and llama.cpp assumes hidden_size / num_attention_heads, wrong for Qwen3's default 128).
  if (g.swa_pattern > 0 && c.sliding_window > 0)
    w.add_u32(a + "attention.sliding_window", gguf_u32(c.sliding_window, "sliding_window"));
  w.add_u32(a + "attention.key_length", gguf_u32(c.head_dim, "head_dim"));
  w.add_u32(a + "attention.value_length", gguf_u32(c.head_dim, "head_dim"));
  w.add_u32("general.file_type", file_type);
  if (c.is_moe()) {  // Qwen2MoeModel.set_gguf_parameters, after TextModel's
    w.add_u32(a + "expert_feed_forward_length", gguf_u32(c.moe_intermediate_size, "moe_intermediate_size"));
  }
  // The sentence-transformers pooling (Qwen2Model._try_set_pooling_type, after TextModel's keys; the
  // converter reads it for Qwen2/Qwen3 dense models only, ditto for any). GGUF has no key for the
  // Normalize module: llama.cpp's embedding tools normalise by their own flag.
  if (pooling) w.add_u32(a + "pooling_type", gguf_pooling_type(pooling->pooling_type));
  if (g.llama_keys) {
    w.add_u32(a + "vocab_size", gguf_u32(c.vocab_size, "vocab_size"));
    w.add_u32(a + "rope.dimension_count", gguf_u32(c.head_dim, "head_dim"));
  }
  w.add_u32("general.quantization_version", kQuantizationVersion);
  if (g.llama_keys) {
    if (vocab.add_prefix_space) w.add_bool("tokenizer.ggml.add_space_prefix", *vocab.add_prefix_space);
  }
  add_gguf_vocab(w, vocab);

  for (const TensorPlan& p : plan) w.add_tensor(p.spec);
  ProgressBar bar("export-gguf", static_cast<int64_t>(plan.size()), "tensors", library_progress_sink());
  for (size_t i = 0; i < plan.size(); ++i) {
    bar.update(static_cast<int64_t>(i), plan[i].spec.name);
    write_tensor(w, plan[i], store);
  }
  bar.finish();
  w.finish();
  return {arch, plan.size(), label, w.bytes_written()};
}

}  // namespace ditto
