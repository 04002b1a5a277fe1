#include "model/causal_lm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/memory_info.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "model/gguf_model.h"
#include "model/gguf_reader.h"
#include "model/model_tensors.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"

namespace ditto {

// The tensors of a checkpoint, as load() takes them: Hugging Face safetensors or a GGUF file.
class CheckpointTensors {
 public:
  virtual ~CheckpointTensors() = default;
  // A 1-D tensor (norm weight, bias) converted to float32; its mapped pages are released.
  virtual std::vector<float> vector(const TensorDesc& t) const = 0;
  // A 2-D tensor as a packing source in Hugging Face row order. When the rows must be reordered
  // the source points into `copy`, which the caller keeps until packing is done.
  virtual MatrixSource matrix(const TensorDesc& t, std::vector<uint8_t>& copy) const = 0;
  // Drops rows [row_begin, row_end) of t's mapped pages (packed, not read again); release() all.
  virtual void release_rows(const TensorDesc& t, int64_t row_begin, int64_t row_end) const = 0;
  virtual void release(const TensorDesc& t) const = 0;
};

namespace {

class SafetensorsTensors final : public CheckpointTensors {
 public:
  explicit SafetensorsTensors(const WeightStore& store) : store_(store) {}

  std::vector<float> vector(const TensorDesc& d) const override {
    const TensorInfo& t = store_.get(d.name);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    const size_t es = dtype_size(t.dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      uint8_t bytes[4];
      std::memcpy(bytes, t.data + i * es, es);  // mmap data need not be aligned
      v[i] = load_as_f32(bytes, t.dtype, 0);
    }
    store_.release(t);
    return v;
  }
  MatrixSource matrix(const TensorDesc& d, std::vector<uint8_t>& /*copy*/) const override {
    const TensorInfo& t = store_.get(d.name);
    return MatrixSource{t.data, t.dtype, t.shape[0], t.shape[1]};
  }
  void release_rows(const TensorDesc& d, int64_t row_begin, int64_t row_end) const override {
    const TensorInfo& t = store_.get(d.name);
    const size_t row_bytes = static_cast<size_t>(t.shape[1]) * dtype_size(t.dtype);
    t.file->release(t.file_offset + static_cast<size_t>(row_begin) * row_bytes,
                    static_cast<size_t>(row_end - row_begin) * row_bytes);
  }
  void release(const TensorDesc& d) const override { store_.release(store_.get(d.name)); }

 private:
  const WeightStore& store_;
};

QuantType quant_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return QuantType::kQ8_0;
    case GgmlType::kQ4_0: return QuantType::kQ4_0;
    case GgmlType::kQ4_1: return QuantType::kQ4_1;
    case GgmlType::kQ4_K: return QuantType::kQ4_K;
    case GgmlType::kQ6_K: return QuantType::kQ6_K;
    default: return QuantType::kNone;
  }
}

class GgufTensors final : public CheckpointTensors {
 public:
  GgufTensors(const GgufFile& g, const ModelConfig& c) : g_(g), c_(c) {}

  std::vector<float> vector(const TensorDesc& d) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    const DType dtype = dtype_of(w.type);
    std::vector<float> v(static_cast<size_t>(w.cols));
    const size_t es = dtype_size(dtype);
    for (int64_t i = 0; i < w.cols; ++i) {
      uint8_t bytes[4];
      std::memcpy(bytes, w.data + static_cast<size_t>(i) * es, es);
      const int64_t to = w.permute_head_dim > 0 ? llama_permuted_row(i, w.permute_head_dim) : i;
      v[static_cast<size_t>(to)] = load_as_f32(bytes, dtype, 0);
    }
    release(d);
    return v;
  }
  MatrixSource matrix(const TensorDesc& d, std::vector<uint8_t>& copy) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    const QuantType quant = quant_type_of(w.type);
    MatrixSource source{w.data, quant == QuantType::kNone ? dtype_of(w.type) : DType::kF32, w.rows, w.cols};
    source.quant = quant;
    if (w.permute_head_dim > 0) {  // back to Hugging Face's row order
      copy.resize(static_cast<size_t>(w.rows) * w.row_bytes);
      for (int64_t r = 0; r < w.rows; ++r)
        std::memcpy(copy.data() + static_cast<size_t>(llama_permuted_row(r, w.permute_head_dim)) * w.row_bytes,
                    w.data + static_cast<size_t>(r) * w.row_bytes, w.row_bytes);
      source.data = copy.data();
      release(d);
    }
    return source;
  }
  void release_rows(const TensorDesc& d, int64_t row_begin, int64_t row_end) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    if (w.permute_head_dim > 0) return;  // packed from the copy; released already
    const size_t begin = static_cast<size_t>(w.data - g_.file().data()) + static_cast<size_t>(row_begin) * w.row_bytes;
    g_.release(begin, static_cast<size_t>(row_end - row_begin) * w.row_bytes);
  }
  void release(const TensorDesc& d) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    g_.release(static_cast<size_t>(w.data - g_.file().data()), static_cast<size_t>(w.rows) * w.row_bytes);
  }

 private:
  const GgufFile& g_;
  const ModelConfig& c_;
};

// The row-wise concatenation of 2-D tensors `descs`, packed: one part per run of tensors of the
// same type (LinearWeight). Their mapped pages are released as they are packed.
LinearWeight load_matrix(const CheckpointTensors& tensors, const std::vector<TensorDesc>& descs, ThreadPool* pool) {
  std::vector<MatrixSource> sources;
  std::vector<std::vector<uint8_t>> copies(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) sources.push_back(tensors.matrix(descs[i], copies[i]));
  LinearWeight w;
  for (size_t begin = 0; begin < descs.size();) {
    size_t end = begin + 1;
    while (end < descs.size() && sources[end].quant == sources[begin].quant &&
           (sources[end].quant != QuantType::kNone || sources[end].dtype == sources[begin].dtype))
      ++end;
    const auto release_rows = [&](size_t part, int64_t row_begin, int64_t row_end) {
      tensors.release_rows(descs[begin + part], row_begin, row_end);
    };
    w.parts.push_back(
        pack_matrix(std::span<const MatrixSource>(sources.data() + begin, end - begin), pool, release_rows));
    for (size_t i = begin; i < end; ++i) tensors.release(descs[i]);
    begin = end;
  }
  return w;
}

// y[r, :] += bias for rows × [n] with row stride ld.
void add_bias(float* y, int64_t rows, int64_t n, int64_t ld, const std::vector<float>& bias) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * ld + i] += bias[i];
}

// Runs fn over token ranges [t0, t1) covering [0, num_tokens), split over the pool. Token-wise
// work only: each token's values are computed by one thread in the same order whatever the split.
void split_tokens(ThreadPool* pool, int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) {
  if (pool == nullptr || num_tokens == 1) return fn(0, num_tokens);
  pool->parallel_for(static_cast<size_t>(num_tokens),
                     [&](size_t b, size_t e) { fn(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
}

void add_residual(float* h, const float* delta, size_t count) {
  for (size_t i = 0; i < count; ++i) h[i] += delta[i];
}

}  // namespace

int64_t LinearWeight::n() const {
  int64_t n = 0;
  for (const PackedMatrix& p : parts) n += p.n;
  return n;
}

int64_t LinearWeight::k() const { return parts.empty() ? 0 : parts[0].k; }

int64_t LinearWeight::weight_bytes() const {
  int64_t bytes = 0;
  for (const PackedMatrix& p : parts) bytes += p.weight_bytes();
  return bytes;
}

void linear(const float* x, int64_t m, int64_t ldx, const LinearWeight& w, float* y, int64_t ldy, ThreadPool* pool) {
  int64_t column = 0;
  for (const PackedMatrix& p : w.parts) {
    gemm(x, m, ldx, p, y + column, ldy, pool);
    column += p.n;
  }
}

std::unique_ptr<CausalLM> CausalLM::load(const std::string& model_path, ThreadPool* pool) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<CausalLM> m(new CausalLM());
  m->pool_ = pool;
  // The packed weights are one anonymous copy (each tensor's mapped pages are released once it
  // is packed), so loading needs about the checkpoint's size. Refuse now, with the numbers, rather
  // than be killed for memory halfway.
  const auto check_memory = [&](int64_t bytes) {
    if (const std::optional<int64_t> available = mem_available_bytes(); available && bytes > *available)
      throw Error(ErrorCode::kResourceExhausted, model_path + ": the weights need " + format_gib(bytes) +
                                                     " of memory, but " + format_gib(*available) +
                                                     " is available (MemAvailable, /proc/meminfo); free memory or "
                                                     "use a machine with more");
  };
  if (std::filesystem::is_regular_file(model_path)) {  // a GGUF file; open() says if it is not one
    const std::unique_ptr<GgufFile> g = GgufFile::open(model_path);
    m->config_ = gguf_model_config(*g);
    validate_gguf_weights(*g, m->config_);
    check_memory(g->total_tensor_bytes());
    m->load_stats_.weight_bytes = g->total_tensor_bytes();
    m->load_tensors(GgufTensors(*g, m->config_), pool);
  } else {
    m->config_ = load_model_config(model_path + "/config.json");
    const WeightStore store = WeightStore::open(model_path);
    validate_weights(m->config_, store);
    check_memory(store.total_bytes());
    m->load_stats_.weight_bytes = store.total_bytes();
    m->load_tensors(SafetensorsTensors(store), pool);
  }
  m->load_stats_.num_tensors = static_cast<int64_t>(expected_tensors(m->config_).size());
  m->inv_freq_ = rope_inv_freq(m->config_);
  m->load_stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

void CausalLM::load_tensors(const CheckpointTensors& tensors, ThreadPool* pool) {
  const ModelConfig& c = config_;
  // Every tensor goes to its slot; tensors that share a slot (q, k, v; gate, up) are fused in the
  // order for_each_tensor visits them.
  struct Destination {
    WeightSlot slot;
    int64_t layer, expert;
    std::vector<TensorDesc> descs;
  };
  std::vector<Destination> destinations;
  std::map<std::tuple<int64_t, int64_t, WeightSlot>, size_t> index;
  for_each_tensor(c, [&](const TensorDesc& t) {
    const auto [it, added] = index.try_emplace({t.layer, t.expert, t.slot}, destinations.size());
    if (added) destinations.push_back({t.slot, t.layer, t.expert, {}});
    destinations[it->second].descs.push_back(t);
  });
  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (const Destination& d : destinations) {
    if (is_matrix_slot(d.slot)) {
      *matrix_slot(d.slot, d.layer, d.expert) = load_matrix(tensors, d.descs, pool);
    } else {
      std::vector<float>& v = *vector_slot(d.slot, d.layer);
      for (const TensorDesc& t : d.descs) {
        const std::vector<float> part = tensors.vector(t);
        v.insert(v.end(), part.begin(), part.end());
      }
    }
  }
}

LinearWeight* CausalLM::matrix_slot(WeightSlot slot, int64_t layer, int64_t expert) {
  if (slot == WeightSlot::kEmbedTokens) return &embed_tokens_;
  if (slot == WeightSlot::kLmHead) return &lm_head_;
  DecoderLayerWeights& l = layers_[static_cast<size_t>(layer)];
  if (expert >= 0 && l.experts.size() <= static_cast<size_t>(expert)) l.experts.resize(static_cast<size_t>(expert) + 1);
  switch (slot) {
    case WeightSlot::kQkvProj: return &l.qkv_proj;
    case WeightSlot::kOProj: return &l.o_proj;
    case WeightSlot::kGateUpProj: return &l.gate_up_proj;
    case WeightSlot::kDownProj: return &l.down_proj;
    case WeightSlot::kRouter: return &l.router;
    case WeightSlot::kExpertGateUpProj: return &l.experts[static_cast<size_t>(expert)].gate_up_proj;
    case WeightSlot::kExpertDownProj: return &l.experts[static_cast<size_t>(expert)].down_proj;
    default: break;
  }
  DITTO_CHECK(false) << "slot " << static_cast<int>(slot) << " is not a matrix";
  return nullptr;
}

std::vector<float>* CausalLM::vector_slot(WeightSlot slot, int64_t layer) {
  if (slot == WeightSlot::kNorm) return &norm_;
  DecoderLayerWeights& l = layers_[static_cast<size_t>(layer)];
  switch (slot) {
    case WeightSlot::kInputLayernorm: return &l.input_layernorm;
    case WeightSlot::kQkvBias: return &l.qkv_bias;
    case WeightSlot::kQNorm: return &l.q_norm;
    case WeightSlot::kKNorm: return &l.k_norm;
    case WeightSlot::kOBias: return &l.o_bias;
    case WeightSlot::kPostAttentionLayernorm: return &l.post_attention_layernorm;
    case WeightSlot::kGateUpBias: return &l.gate_up_bias;
    case WeightSlot::kDownBias: return &l.down_bias;
    default: break;
  }
  DITTO_CHECK(false) << "slot " << static_cast<int>(slot) << " is not a vector";
  return nullptr;
}

int64_t CausalLM::decode_weight_bytes() const {
  auto matrix = [](const LinearWeight& w) { return w.weight_bytes(); };
  auto vec = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size() * sizeof(float)); };
  int64_t bytes = vec(norm_) + matrix(config_.tie_word_embeddings ? embed_tokens_ : lm_head_);
  for (const DecoderLayerWeights& l : layers_) {
    bytes += matrix(l.qkv_proj) + matrix(l.o_proj);
    if (l.is_moe()) {  // the router, and k experts of equal size
      bytes += matrix(l.router) +
               config_.num_experts_per_tok * (matrix(l.experts[0].gate_up_proj) + matrix(l.experts[0].down_proj));
    } else {
      bytes += matrix(l.gate_up_proj) + matrix(l.down_proj);
    }
    bytes += vec(l.input_layernorm) + vec(l.post_attention_layernorm) + vec(l.q_norm) + vec(l.k_norm);
    bytes += vec(l.qkv_bias) + vec(l.o_bias) + vec(l.gate_up_bias) + vec(l.down_bias);
  }
  return bytes;
}

double CausalLM::prefill_flops(int64_t prompt_tokens) const {
  const ModelConfig& c = config_;
  auto mac = [](const LinearWeight& w) { return static_cast<double>(w.n()) * static_cast<double>(w.k()); };
  double per_token = 0;  // multiply-adds of the linear layers per token
  for (const DecoderLayerWeights& l : layers_) {
    per_token += mac(l.qkv_proj) + mac(l.o_proj);
    if (l.is_moe()) {
      per_token += mac(l.router) + static_cast<double>(c.num_experts_per_tok) *
                                       (mac(l.experts[0].gate_up_proj) + mac(l.experts[0].down_proj));
    } else {
      per_token += mac(l.gate_up_proj) + mac(l.down_proj);
    }
  }
  const auto t = static_cast<double>(prompt_tokens);
  const double visible_keys = t * (t + 1) / 2;  // query at position p sees p + 1 keys
  const double attention = 4.0 * static_cast<double>(c.head_dim) * static_cast<double>(c.num_attention_heads) *
                           visible_keys * static_cast<double>(c.num_hidden_layers);
  return 2.0 * per_token * t + attention + 2.0 * mac(c.tie_word_embeddings ? embed_tokens_ : lm_head_);
}

size_t CausalLM::moe_scratch_floats(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const auto t = static_cast<size_t>(num_tokens);
  const auto rows = t * static_cast<size_t>(c.num_experts_per_tok);  // (token, expert) pairs
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto mi = static_cast<size_t>(c.moe_intermediate_size);
  return t * static_cast<size_t>(c.num_experts) + rows * (hidden + 2 * mi + mi + hidden);
}

void CausalLM::moe_block(const DecoderLayerWeights& l, const float* x, int64_t num_tokens, float* delta,
                         float* scratch) const {
  const ModelConfig& c = config_;
  const int64_t num_experts = c.num_experts;
  const int64_t k = c.num_experts_per_tok;
  const int64_t hidden = c.hidden_size;
  const int64_t mi = c.moe_intermediate_size;
  const int64_t rows = num_tokens * k;
  float* probs = scratch;                        // [num_tokens, num_experts] f32 router logits, then softmax
  float* xg = probs + num_tokens * num_experts;  // [rows, hidden] f32 x gathered by expert
  float* gate_up = xg + rows * hidden;           // [rows, 2·mi] f32
  float* act = gate_up + rows * 2 * mi;          // [rows, mi] f32
  float* y = act + rows * mi;                    // [rows, hidden] f32 expert outputs
  // Routing: per token, its k experts (ascending id) and weights.
  linear(x, num_tokens, hidden, l.router, probs, num_experts, pool_);
  std::vector<int32_t> expert(static_cast<size_t>(rows));  // [num_tokens, k] ascending expert id
  std::vector<float> weight(static_cast<size_t>(rows));    // [num_tokens, k] matching weights
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    std::vector<std::pair<int32_t, float>> picked(static_cast<size_t>(k));
    for (int64_t t = t0; t < t1; ++t) {
      float* p = probs + t * num_experts;
      softmax_row(p, num_experts, p);
      for (int64_t e = 0; e < num_experts; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
      // (probability desc, id asc); NaN ranks last, so the order is a strict weak one.
      auto key = [&](int32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += p[order[static_cast<size_t>(j)]];
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = order[static_cast<size_t>(j)];
        picked[static_cast<size_t>(j)] = {e, c.norm_topk_prob ? p[e] / sum : p[e]};
      }
      std::sort(picked.begin(), picked.end());
      for (int64_t j = 0; j < k; ++j) {
        expert[static_cast<size_t>(t * k + j)] = picked[static_cast<size_t>(j)].first;
        weight[static_cast<size_t>(t * k + j)] = picked[static_cast<size_t>(j)].second;
      }
    }
  });

  // Group the (token, expert) pairs by expert (counting sort; tokens ascending within an expert).
  std::vector<int64_t> begin(static_cast<size_t>(num_experts) + 1, 0);
  for (int32_t e : expert) ++begin[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < num_experts; ++e) begin[static_cast<size_t>(e) + 1] += begin[static_cast<size_t>(e)];
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  std::vector<int64_t> row_of(static_cast<size_t>(rows));  // pair (t, j) → its row in xg / y
  for (int64_t i = 0; i < rows; ++i)
    row_of[static_cast<size_t>(i)] = fill[static_cast<size_t>(expert[static_cast<size_t>(i)])]++;
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * k; i < t1 * k; ++i)
      std::memcpy(xg + row_of[static_cast<size_t>(i)] * hidden, x + (i / k) * hidden,
                  static_cast<size_t>(hidden) * sizeof(float));
  });

  // Each expert over its tokens: its weights are read once for all of them.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const ExpertWeights& w = l.experts[static_cast<size_t>(e)];
    linear(xg + r0 * hidden, m, hidden, w.gate_up_proj, gate_up + r0 * 2 * mi, 2 * mi, pool_);
    silu_mul(gate_up + r0 * 2 * mi, m, mi, 2 * mi, act + r0 * mi, mi);
    linear(act + r0 * mi, m, mi, w.down_proj, y + r0 * hidden, hidden, pool_);
  }

  // Combine: Σ over the token's experts in ascending id of weight · output, from +0.
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* out = delta + t * hidden;
      std::fill(out, out + hidden, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = weight[static_cast<size_t>(t * k + j)];
        const float* yr = y + row_of[static_cast<size_t>(t * k + j)] * hidden;
        for (int64_t i = 0; i < hidden; ++i) out[i] += w * yr[i];
      }
    }
  });
}

// forward()'s activations for one batch: spans of arena_, which only grows, so a prefill does not
// pay for fresh zeroed pages on every step.
struct CausalLM::Activations {
  int64_t num_tokens = 0;
  std::span<float> h;        // [num_tokens, hidden_size] f32 residual stream
  std::span<float> x;        // [num_tokens, hidden_size] f32 a block's normed input
  std::span<float> qkv;      // [num_tokens, q_dim + 2·kv_dim] f32 q, k, v of each token
  std::span<float> attn;     // [num_tokens, q_dim] f32 attention output, heads side by side
  std::span<float> gate_up;  // [num_tokens, 2·intermediate_size] f32 gate, up
  std::span<float> act;      // [num_tokens, intermediate_size] f32 silu(gate) · up
  std::span<float> delta;    // [num_tokens, hidden_size] f32 a block's output, added to h
  std::span<float> cos_sin;  // [num_tokens, 2, head_dim / 2] f32 RoPE cos, sin of each position
  std::span<float> moe;      // [moe_scratch_floats(num_tokens)] f32 moe_block's scratch
};

CausalLM::Activations CausalLM::activations(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const auto n = static_cast<size_t>(num_tokens);
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto q_dim = static_cast<size_t>(c.num_attention_heads * c.head_dim);
  const auto qkv_dim = q_dim + 2 * static_cast<size_t>(c.num_key_value_heads * c.head_dim);
  const auto inter = static_cast<size_t>(c.intermediate_size);
  const size_t sizes[] = {n * hidden,
                          n * hidden,
                          n * qkv_dim,
                          n * q_dim,
                          n * 2 * inter,
                          n * inter,
                          n * hidden,
                          n * static_cast<size_t>(c.head_dim),
                          c.is_moe() ? moe_scratch_floats(num_tokens) : 0};
  size_t total = 0;
  for (size_t sz : sizes) total += sz;
  if (arena_.size() < total) arena_.resize(total);
  float* next = arena_.data();
  const size_t* size = sizes;
  auto take = [&] {
    std::span<float> out(next, *size);
    next += *size++;
    return out;
  };
  Activations a;
  a.num_tokens = num_tokens;
  a.h = take();
  a.x = take();
  a.qkv = take();
  a.attn = take();
  a.gate_up = take();
  a.act = take();
  a.delta = take();
  a.cos_sin = take();
  a.moe = take();
  return a;
}

// Token-wise work (norms, RoPE, KV writes, activations, residual adds) is split over tokens; each
// token's values are computed by one thread in the same order whatever the split.
void CausalLM::for_tokens(int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) const {
  split_tokens(pool_, num_tokens, fn);
}

void CausalLM::forward(const ForwardBatch& batch, KvCache& cache, float* logits) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = batch.num_tokens();
  DITTO_CHECK(static_cast<int64_t>(batch.positions.size()) == num_tokens &&
              static_cast<int64_t>(batch.slot_mapping.size()) == num_tokens &&
              static_cast<int64_t>(batch.token_seq.size()) == num_tokens);
  for (int32_t row : batch.logits_indices) DITTO_CHECK(row >= 0 && row < num_tokens);
  for (int32_t pos : batch.positions) {
    if (pos < 0 || pos >= c.max_position_embeddings)
      throw_invalid_argument("position " + std::to_string(pos) + " is outside the model's context [0, " +
                             std::to_string(c.max_position_embeddings) + ") (max_position_embeddings)");
  }
  if (num_tokens == 0) return;

  Activations a = activations(num_tokens);
  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim, cache.block_size(),
                             static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))};
  embedding_block(batch, a);
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const DecoderLayerWeights& l = layers_[static_cast<size_t>(li)];
    attention_block(l, cache.layer(li), batch, shape, a);
    feed_forward_block(l, a);
  }
  final_norm_and_lm_head(batch, a, logits);
}

// h = embed_tokens[token_ids]; the RoPE cos/sin of every position.
void CausalLM::embedding_block(const ForwardBatch& batch, Activations& a) const {
  embedding(embed_tokens_.parts[0], batch.token_ids.data(), a.num_tokens, a.h.data());
  rope_cos_sin(batch.positions.data(), a.num_tokens, inv_freq_, a.cos_sin.data());
}

// h += o_proj(attention(rope(qk_norm(qkv_proj(input_layernorm(h)))))). Every token's K/V is
// written to its cache slot before any query attends.
void CausalLM::attention_block(const DecoderLayerWeights& l, KvCacheLayer kv, const ForwardBatch& batch,
                               const AttentionShape& shape, Activations& a) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim;
  const int64_t q_dim = c.num_attention_heads * head_dim;
  const int64_t kv_dim = c.num_key_value_heads * head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  float* const h = a.h.data();
  float* const x = a.x.data();
  float* const qkv = a.qkv.data();
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    rms_norm(h + t0 * hidden, t1 - t0, hidden, hidden, l.input_layernorm.data(), eps, x + t0 * hidden, hidden);
  });
  linear(x, num_tokens, hidden, l.qkv_proj, qkv, qkv_dim, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(qkv + t0 * qkv_dim, t1 - t0, qkv_dim, qkv_dim, l.qkv_bias);
    for (int64_t t = t0; t < t1; ++t) {
      float* q = qkv + t * qkv_dim;  // [num_attention_heads, head_dim]
      float* k = q + q_dim;          // [num_key_value_heads, head_dim]
      if (c.has_qk_norm()) {
        rms_norm(q, c.num_attention_heads, head_dim, head_dim, l.q_norm.data(), eps, q, head_dim);
        rms_norm(k, c.num_key_value_heads, head_dim, head_dim, l.k_norm.data(), eps, k, head_dim);
      }
      rope_apply(q, c.num_attention_heads, head_dim, a.cos_sin.data() + t * head_dim);
      rope_apply(k, c.num_key_value_heads, head_dim, a.cos_sin.data() + t * head_dim);
    }
    write_kv(qkv + t0 * qkv_dim + q_dim, qkv_dim, qkv + t0 * qkv_dim + q_dim + kv_dim, qkv_dim,
             batch.slot_mapping.data() + t0, t1 - t0, kv_dim, kv);
  });
  paged_attention(qkv, qkv_dim, batch.positions.data(), batch.token_seq.data(), num_tokens, batch.block_tables.data(),
                  batch.max_blocks_per_seq, kv, shape, a.attn.data(), q_dim, pool_);
  linear(a.attn.data(), num_tokens, q_dim, l.o_proj, a.delta.data(), hidden, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(a.delta.data() + t0 * hidden, t1 - t0, hidden, hidden, l.o_bias);
    add_residual(h + t0 * hidden, a.delta.data() + t0 * hidden, static_cast<size_t>((t1 - t0) * hidden));
  });
}

// h += mlp(post_attention_layernorm(h)): the dense SwiGLU MLP, or the sparse MoE block on the
// layers that have one.
void CausalLM::feed_forward_block(const DecoderLayerWeights& l, Activations& a) const {
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    rms_norm(a.h.data() + t0 * hidden, t1 - t0, hidden, hidden, l.post_attention_layernorm.data(), eps,
             a.x.data() + t0 * hidden, hidden);
  });
  if (l.is_moe()) {
    moe_block(l, a.x.data(), num_tokens, a.delta.data(), a.moe.data());
  } else {
    mlp_block(l, a);
  }
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(a.delta.data() + t0 * hidden, t1 - t0, hidden, hidden, l.down_bias);
    add_residual(a.h.data() + t0 * hidden, a.delta.data() + t0 * hidden, static_cast<size_t>((t1 - t0) * hidden));
  });
}

// delta = down_proj(silu(gate_proj(x)) · up_proj(x)) (+ gate/up biases; down_bias is added by the caller).
void CausalLM::mlp_block(const DecoderLayerWeights& l, Activations& a) const {
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t inter = config_.intermediate_size;
  float* const gate_up = a.gate_up.data();
  linear(a.x.data(), num_tokens, hidden, l.gate_up_proj, gate_up, 2 * inter, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(gate_up + t0 * 2 * inter, t1 - t0, 2 * inter, 2 * inter, l.gate_up_bias);
    silu_mul(gate_up + t0 * 2 * inter, t1 - t0, inter, 2 * inter, a.act.data() + t0 * inter, inter);
  });
  linear(a.act.data(), num_tokens, inter, l.down_proj, a.delta.data(), hidden, pool_);
}

// logits = lm_head(norm(h)), only for the rows batch.logits_indices; a tied head is the embedding.
void CausalLM::final_norm_and_lm_head(const ForwardBatch& batch, const Activations& a, float* logits) const {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  const auto num_logits = static_cast<int64_t>(batch.logits_indices.size());
  std::vector<float> final_x(static_cast<size_t>(num_logits * hidden));  // [num_logits, hidden_size] f32
  for (int64_t i = 0; i < num_logits; ++i)
    rms_norm_row(a.h.data() + batch.logits_indices[i] * hidden, hidden, norm_.data(),
                 static_cast<float>(c.rms_norm_eps), final_x.data() + i * hidden);
  const LinearWeight& head = c.tie_word_embeddings ? embed_tokens_ : lm_head_;
  linear(final_x.data(), num_logits, hidden, head, logits, c.vocab_size, pool_);
}

}  // namespace ditto
