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
#include "kernels/convert.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/kernel_tuning.h"
#include "kernels/quant.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "model/gguf_model.h"
#include "model/gguf_reader.h"
#include "model/model_tensors.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"
#include "parallel/tensor_parallel.h"

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

// The row-wise concatenation of rows[i] of each 2-D tensor descs[i], packed: one part per run of
// tensors of the same type (LinearWeight). Their mapped pages are released as they are packed.
LinearWeight load_matrix(const CheckpointTensors& tensors, const std::vector<TensorDesc>& descs,
                         const std::vector<std::pair<int64_t, int64_t>>& rows, ThreadPool* pool) {
  std::vector<MatrixSource> sources;
  std::vector<std::vector<uint8_t>> copies(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    MatrixSource s = tensors.matrix(descs[i], copies[i]);
    const int64_t row_bytes =
        s.quant != QuantType::kNone ? quant_row_bytes(s.quant, s.k) : s.k * static_cast<int64_t>(dtype_size(s.dtype));
    s.data = static_cast<const uint8_t*>(s.data) + rows[i].first * row_bytes;
    s.n = rows[i].second - rows[i].first;
    sources.push_back(s);
  }
  LinearWeight w;
  for (size_t begin = 0; begin < descs.size();) {
    size_t end = begin + 1;
    while (end < descs.size() && sources[end].quant == sources[begin].quant &&
           (sources[end].quant != QuantType::kNone || sources[end].dtype == sources[begin].dtype))
      ++end;
    const auto release_rows = [&](size_t part, int64_t row_begin, int64_t row_end) {
      const int64_t first = rows[begin + part].first;
      tensors.release_rows(descs[begin + part], first + row_begin, first + row_end);
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
  const PhaseTimer timer(StepPhase::kTokenwise);
  if (pool == nullptr || num_tokens == 1) return fn(0, num_tokens);
  pool->parallel_for(static_cast<size_t>(num_tokens),
                     [&](size_t b, size_t e) { fn(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
}

// True when a GEMM with w rounds its input to bf16 before multiplying (bf16 weights, not
// quantized: kernels/gemm.h), so that input may travel between ranks as bf16.
bool rounds_input_to_bf16(const LinearWeight& w) {
  for (const PackedMatrix& p : w.parts)
    if (p.quant != QuantType::kNone || p.dtype != DType::kBF16) return false;
  return !w.parts.empty();
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

void linear(const float* x, int64_t m, int64_t ldx, const LinearWeight& w, float* y, int64_t ldy, ThreadPool* pool,
            StepPhase phase) {
  const PhaseTimer timer(phase);
  int64_t column = 0;
  for (const PackedMatrix& p : w.parts) {
    gemm(x, m, ldx, p, y + column, ldy, pool);
    column += p.n;
  }
}

std::unique_ptr<CausalLM> CausalLM::load(const std::string& model_path, ThreadPool* pool,
                                         TensorParallelGroup* tensor_parallel) {
  if (tensor_parallel == nullptr) return load_local(model_path, pool, 0, 1);
  DITTO_CHECK(tensor_parallel->rank() == 0) << "only rank 0 loads by itself; the others follow its commands";
  static int64_t next_model_id = 0;
  auto lock = tensor_parallel->lock();
  const int64_t id = next_model_id++;
  WireBuffer command;
  command.put_i64(id);
  command.put_i64(pool != nullptr ? static_cast<int64_t>(pool->num_threads()) : 1);
  command.put_string(model_path);
  tensor_parallel->send_command(TensorParallelCommand::kLoadModel, command);
  return load_shard(model_path, pool, tensor_parallel, id);
}

std::unique_ptr<CausalLM> CausalLM::load_shard(const std::string& model_path, ThreadPool* pool, TensorParallelGroup* tp,
                                               int64_t model_id) {
  std::unique_ptr<CausalLM> m;
  std::string status;
  std::optional<Error> failure;
  try {
    m = load_local(model_path, pool, tp->rank(), tp->size());
    // What every rank must agree on: the same configuration and the same checkpoint bytes.
    const ModelConfig& c = m->config_;
    status = "ok: " + std::to_string(c.num_hidden_layers) + " layers, hidden_size " + std::to_string(c.hidden_size) +
             ", vocab_size " + std::to_string(c.vocab_size) + ", " + std::to_string(c.num_attention_heads) + "/" +
             std::to_string(c.num_key_value_heads) + " heads, " + std::to_string(c.num_experts) + " experts, " +
             std::to_string(m->load_stats_.weight_bytes) + " checkpoint bytes";
  } catch (const Error& e) {
    failure = e;
    status = e.what();
  } catch (const std::exception& e) {
    failure = Error(ErrorCode::kInternal, e.what());
    status = e.what();
  }
  const std::vector<std::string> statuses = tp->all_gather_strings(status);
  std::string failed;
  bool all_alike = true;  // every rank failed for the same reason: say it once
  for (size_t r = 0; r < statuses.size(); ++r) {
    all_alike = all_alike && statuses[r] == statuses[0];
    if (statuses[r].rfind("ok: ", 0) != 0) failed += "; rank " + std::to_string(r) + ": " + statuses[r];
  }
  if (all_alike && !failed.empty()) failed = "; every rank: " + statuses[0];
  if (!failed.empty())
    throw Error(failure ? failure->code() : ErrorCode::kInvalidArgument,
                model_path + ": tensor-parallel ranks could not load their shards" + failed);
  for (size_t r = 1; r < statuses.size(); ++r)
    if (statuses[r] != statuses[0])
      throw_invalid_argument(model_path + ": tensor-parallel ranks loaded different models: rank 0 " + statuses[0] +
                             "; rank " + std::to_string(r) + " " + statuses[r] + "; give every host the same files");
  m->tp_ = tp;
  m->tp_model_id_ = model_id;
  return m;
}

CausalLM::~CausalLM() {
  if (tp_ == nullptr || tp_->rank() != 0 || TensorParallelGroup::current() != tp_) return;
  auto lock = tp_->lock();
  WireBuffer command;
  command.put_i64(tp_model_id_);
  tp_->send_command(TensorParallelCommand::kUnloadModel, command);
}

KvCache CausalLM::make_kv_cache(int64_t num_blocks, int64_t block_size) const {
  ModelConfig local = config_;
  local.num_key_value_heads = shard_.num_kv_heads;
  KvCache cache(local, num_blocks, block_size);
  if (tp_ != nullptr && tp_->rank() == 0) {
    static int64_t next_cache_id = 0;
    auto lock = tp_->lock();
    cache.set_tensor_parallel_id(next_cache_id++);
    WireBuffer command;
    command.put_i64(cache.tensor_parallel_id());
    command.put_i64(tp_model_id_);
    command.put_i64(num_blocks);
    command.put_i64(block_size);
    tp_->send_command(TensorParallelCommand::kCreateCache, command);
  }
  return cache;
}

void CausalLM::release_kv_cache(const KvCache& cache) const {
  if (tp_ == nullptr || tp_->rank() != 0 || TensorParallelGroup::current() != tp_) return;
  auto lock = tp_->lock();
  WireBuffer command;
  command.put_i64(cache.tensor_parallel_id());
  tp_->send_command(TensorParallelCommand::kFreeCache, command);
}

std::unique_ptr<CausalLM> CausalLM::load_local(const std::string& model_path, ThreadPool* pool, int rank, int size) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<CausalLM> m(new CausalLM());
  m->pool_ = pool;
  // The packed weights are one anonymous copy (each tensor's mapped pages are released once it
  // is packed), so loading needs about the checkpoint's size. Refuse now, with the numbers, rather
  // than be killed for memory halfway.
  // Under tensor parallelism a rank keeps about 1/size of them.
  const auto check_memory = [&](int64_t checkpoint_bytes) {
    const int64_t bytes = checkpoint_bytes / size;
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
    m->shard_ = TensorParallelShard::of(m->config_, rank, size);
    check_memory(g->total_tensor_bytes());
    m->load_stats_.weight_bytes = g->total_tensor_bytes();
    m->load_tensors(GgufTensors(*g, m->config_), pool);
  } else {
    m->config_ = load_model_config(model_path + "/config.json");
    const WeightStore store = WeightStore::open(model_path);
    validate_weights(m->config_, store);
    m->shard_ = TensorParallelShard::of(m->config_, rank, size);
    check_memory(store.total_bytes());
    m->load_stats_.weight_bytes = store.total_bytes();
    m->load_tensors(SafetensorsTensors(store), pool);
  }
  m->load_stats_.num_tensors = static_cast<int64_t>(expected_tensors(m->config_).size());
  m->inv_freq_ = rope_inv_freq(m->config_);
  m->tune_kernels();
  m->load_stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

// The decode GEMVs' prefetch distances, measured over this model's own decoder weights
// (kernels/kernel_tuning.h): once per process and kind of weights, and only for models big enough
// to stream from memory.
void CausalLM::tune_kernels() const {
  std::vector<const PackedMatrix*> weights;
  for (const DecoderLayerWeights& l : layers_) {
    std::vector<const LinearWeight*> linears = {&l.qkv_proj, &l.o_proj, &l.gate_up_proj, &l.down_proj};
    for (const auto& e : l.experts) linears.insert(linears.end(), {&e.gate_up_proj, &e.down_proj});
    for (const LinearWeight* w : linears)
      for (const PackedMatrix& p : w->parts) weights.push_back(&p);
  }
  tune_gemv_prefetch(weights, pool_);
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
    std::vector<std::pair<int64_t, int64_t>> rows;  // what this rank keeps of each tensor
    for (size_t part = 0; part < d.descs.size(); ++part) rows.push_back(shard_.rows(c, d.descs[part], part));
    if (is_matrix_slot(d.slot)) {
      *matrix_slot(d.slot, d.layer, d.expert) = load_matrix(tensors, d.descs, rows, pool);
    } else {
      std::vector<float>& v = *vector_slot(d.slot, d.layer);
      for (size_t part = 0; part < d.descs.size(); ++part) {
        const std::vector<float> whole = tensors.vector(d.descs[part]);
        v.insert(v.end(), whole.begin() + rows[part].first, whole.begin() + rows[part].second);
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
  const auto mi_local = static_cast<size_t>(shard_.moe_intermediate);
  const auto hidden_local = static_cast<size_t>(shard_.hidden);
  // probs, xg, gate_up, act (every rank's), y; under tensor parallelism also act (this rank's)
  // and the all-gather's landing space
  const size_t split = shard_.size > 1 ? rows * (mi_local + mi) : 0;
  return t * static_cast<size_t>(c.num_experts) + rows * (hidden + 2 * mi_local + mi + hidden_local) + split;
}

void CausalLM::moe_block(const DecoderLayerWeights& l, const float* x, int64_t num_tokens, float* delta,
                         float* scratch) const {
  const ModelConfig& c = config_;
  const int64_t num_experts = c.num_experts;
  const int64_t k = c.num_experts_per_tok;
  const int64_t hidden = c.hidden_size;
  const int64_t mi = c.moe_intermediate_size;
  const int64_t mi_local = shard_.moe_intermediate;  // this rank's features of each expert
  const int64_t out = shard_.hidden;                 // this rank's output columns
  const int64_t rows = num_tokens * k;
  float* probs = scratch;                        // [num_tokens, num_experts] f32 router logits, then softmax
  float* xg = probs + num_tokens * num_experts;  // [rows, hidden] f32 x gathered by expert
  float* gate_up = xg + rows * hidden;           // [rows, 2·mi_local] f32
  float* act = gate_up + rows * 2 * mi_local;    // [rows, mi] f32 every rank's features
  float* y = act + rows * mi;                    // [rows, out] f32 expert outputs, this rank's columns
  float* act_local = shard_.size > 1 ? y + rows * out : act;  // [rows, mi_local] f32
  float* landing = act_local + rows * mi_local;               // [size · rows · mi_local] f32
  // Routing: per token, its k experts (ascending id) and weights. Every rank routes the whole
  // batch with the whole router, so every rank picks the same experts.
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

  // Each expert over its tokens: its weights are read once for all of them. Under tensor
  // parallelism each rank computes its features of silu(gate)·up, the ranks gather all of them,
  // and each computes its columns of down_proj.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const ExpertWeights& w = l.experts[static_cast<size_t>(e)];
    linear(xg + r0 * hidden, m, hidden, w.gate_up_proj, gate_up + r0 * 2 * mi_local, 2 * mi_local, pool_);
    silu_mul(gate_up + r0 * 2 * mi_local, m, mi_local, 2 * mi_local, act_local + r0 * mi_local, mi_local);
  }
  bool down_rounds = true;  // every expert's down_proj takes bf16 inputs: gather bf16
  for (const ExpertWeights& w : l.experts) down_rounds = down_rounds && rounds_input_to_bf16(w.down_proj);
  gather_columns(act_local, rows, mi_local, act, landing, down_rounds ? &l.experts[0].down_proj : nullptr);
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    linear(act + r0 * mi, m, mi, l.experts[static_cast<size_t>(e)].down_proj, y + r0 * out, out, pool_);
  }

  // Combine: Σ over the token's experts in ascending id of weight · output, from +0.
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = delta + t * out;
      std::fill(o, o + out, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = weight[static_cast<size_t>(t * k + j)];
        const float* yr = y + row_of[static_cast<size_t>(t * k + j)] * out;
        for (int64_t i = 0; i < out; ++i) o[i] += w * yr[i];
      }
    }
  });
}

// forward()'s activations for one batch: spans of arena_, which only grows, so a prefill does not
// pay for fresh zeroed pages on every step. "Local" buffers hold this rank's columns under tensor
// parallelism; without it they are the whole-width buffers themselves.
struct CausalLM::Activations {
  int64_t num_tokens = 0;
  std::span<float> h;            // [num_tokens, hidden_size] f32 residual stream
  std::span<float> x;            // [num_tokens, hidden_size] f32 a block's normed input
  std::span<float> qkv;          // [num_tokens, (heads + 2·kv_heads)·head_dim] f32 this rank's q, k, v
  std::span<float> attn_local;   // [num_tokens, heads·head_dim] f32 this rank's heads' attention output
  std::span<float> attn;         // [num_tokens, q_dim] f32 every head's, side by side
  std::span<float> gate_up;      // [num_tokens, 2·shard.intermediate] f32 gate, up
  std::span<float> act_local;    // [num_tokens, shard.intermediate] f32 silu(gate) · up
  std::span<float> act;          // [num_tokens, intermediate_size] f32 every rank's features
  std::span<float> delta_local;  // [num_tokens, shard.hidden] f32 this rank's columns of a block's output
  std::span<float> delta;        // [num_tokens, hidden_size] f32 a block's output, added to h
  std::span<float> gathered;     // [size · num_tokens · widest local] f32 all-gather landing space
  std::span<float> cos_sin;      // [num_tokens, 2, head_dim / 2] f32 RoPE cos, sin of each position
  std::span<float> moe;          // [moe_scratch_floats(num_tokens)] f32 moe_block's scratch
};

void CausalLM::release_activations() const { std::vector<float>().swap(arena_); }

CausalLM::Activations CausalLM::activations(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const TensorParallelShard& s = shard_;
  const bool split = s.size > 1;
  const auto n = static_cast<size_t>(num_tokens);
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto head_dim = static_cast<size_t>(c.head_dim);
  const auto q_local = static_cast<size_t>(s.num_heads) * head_dim;
  const auto qkv_local = q_local + 2 * static_cast<size_t>(s.num_kv_heads) * head_dim;
  const auto inter_local = static_cast<size_t>(s.intermediate);
  const size_t widest = std::max({q_local, inter_local, static_cast<size_t>(s.hidden)});
  const size_t sizes[] = {n * hidden,
                          n * hidden,
                          n * qkv_local,
                          split ? n * q_local : 0,
                          n * static_cast<size_t>(c.num_attention_heads) * head_dim,
                          n * 2 * inter_local,
                          split ? n * inter_local : 0,
                          n * static_cast<size_t>(c.intermediate_size),
                          split ? n * static_cast<size_t>(s.hidden) : 0,
                          n * hidden,
                          split ? static_cast<size_t>(s.size) * n * widest : 0,
                          n * head_dim,
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
  a.attn_local = take();
  a.attn = take();
  a.gate_up = take();
  a.act_local = take();
  a.act = take();
  a.delta_local = take();
  a.delta = take();
  a.gathered = take();
  a.cos_sin = take();
  a.moe = take();
  if (!split) {  // one process: the local buffers are the whole ones
    a.attn_local = a.attn;
    a.act_local = a.act;
    a.delta_local = a.delta;
  }
  return a;
}

// Token-wise work (norms, RoPE, KV writes, activations, residual adds) is split over tokens; each
// token's values are computed by one thread in the same order whatever the split.
void CausalLM::for_tokens(int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) const {
  split_tokens(pool_, num_tokens, fn);
}

void CausalLM::gather_columns(const float* local, int64_t rows, int64_t width, float* full, float* scratch,
                              const LinearWeight* consumer) const {
  const int size = shard_.size;
  if (size == 1) {
    if (full != local) std::memcpy(full, local, static_cast<size_t>(rows * width) * sizeof(float));
    return;
  }
  if (consumer == nullptr || !rounds_input_to_bf16(*consumer)) {
    return tp_->all_gather_columns(local, static_cast<size_t>(rows), static_cast<size_t>(width) * sizeof(float), full);
  }
  // The consumer rounds its input to bf16 first (kernels/gemm.h), with this same function: sending
  // the rounded values halves the bytes, and widening them back is exact, so the GEMM sees the
  // same bf16 inputs.
  auto* mine = reinterpret_cast<uint16_t*>(scratch);  // [rows, width] bf16
  uint16_t* all = mine + rows * width;                // [rows, size · width] bf16
  for_tokens(rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) round_to_bf16(local + t * width, width, mine + t * width);
  });
  tp_->all_gather_columns(mine, static_cast<size_t>(rows), static_cast<size_t>(width) * sizeof(uint16_t), all);
  const int64_t n = rows * width * size;
  for_tokens(rows, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * width * size; i < std::min(n, t1 * width * size); ++i) full[i] = bf16_to_f32(all[i]);
  });
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
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size)
      throw_invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
  }
  if (num_tokens == 0) return;
  if (tp_ == nullptr || tp_->rank() != 0) return forward_shard(batch, cache, logits);

  auto lock = tp_->lock();
  WireBuffer command;
  command.put_i64(tp_model_id_);
  command.put_i64(cache.tensor_parallel_id());
  command.put_array(batch.token_ids);
  command.put_array(batch.positions);
  command.put_array(batch.slot_mapping);
  command.put_array(batch.token_seq);
  command.put_array(batch.block_tables);
  command.put_i64(batch.max_blocks_per_seq);
  command.put_array(batch.logits_indices);
  tp_->send_command(TensorParallelCommand::kForward, command);
  try {
    forward_shard(batch, cache, logits);
  } catch (const std::exception& e) {  // the other ranks are inside the same pass: stop them all
    tp_->abort(std::string("forward pass failed: ") + e.what());
  }
}

void CausalLM::forward_shard(const ForwardBatch& batch, KvCache& cache, float* logits) const {
  const ModelConfig& c = config_;
  Activations a = activations(batch.num_tokens());
  const AttentionShape shape{shard_.num_heads, shard_.num_kv_heads, c.head_dim, cache.block_size(),
                             static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))};
  embedding_block(batch, a);
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const DecoderLayerWeights& l = layers_[static_cast<size_t>(li)];
    attention_block(l, cache.layer(li), batch, shape, a);
    feed_forward_block(l, a);
  }
  final_norm_and_lm_head(batch, a, logits);
}

// h = embed_tokens[token_ids]; the RoPE cos/sin of every position. Under tensor parallelism each
// rank looks up the tokens in its vocabulary rows and the ranks gather the rows.
void CausalLM::embedding_block(const ForwardBatch& batch, Activations& a) const {
  const PhaseTimer timer(StepPhase::kTokenwise);
  rope_cos_sin(batch.positions.data(), a.num_tokens, inv_freq_, a.cos_sin.data());
  if (shard_.size == 1) return embedding(embed_tokens_.parts[0], batch.token_ids.data(), a.num_tokens, a.h.data());
  const int size = shard_.size;
  const int64_t hidden = config_.hidden_size;
  std::vector<int> owner(static_cast<size_t>(a.num_tokens));
  std::vector<size_t> bytes(static_cast<size_t>(size), 0);
  std::vector<int32_t> mine;  // this rank's tokens, as rows of its shard, in batch order
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int32_t id = batch.token_ids[static_cast<size_t>(t)];
    int r = 0;
    while (TensorParallelShard::vocab_range(config_.vocab_size, r, size).second <= id) ++r;
    owner[static_cast<size_t>(t)] = r;
    bytes[static_cast<size_t>(r)] += static_cast<size_t>(hidden) * sizeof(float);
    if (r == shard_.rank) mine.push_back(static_cast<int32_t>(id - shard_.vocab_begin));
  }
  float* rows = a.x.data();  // [mine, hidden] this rank's rows; x is free until the first layer
  if (!mine.empty()) embedding(embed_tokens_.parts[0], mine.data(), static_cast<int64_t>(mine.size()), rows);
  float* all = a.delta.data();  // [num_tokens, hidden] every rank's rows, rank-major
  tp_->all_gather_v(rows, bytes, all);
  std::vector<int64_t> next(static_cast<size_t>(size), 0);  // rank r's next row in `all`
  for (int r = 1; r < size; ++r)
    next[static_cast<size_t>(r)] =
        next[static_cast<size_t>(r) - 1] + static_cast<int64_t>(bytes[static_cast<size_t>(r) - 1] / sizeof(float));
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    int64_t& from = next[static_cast<size_t>(owner[static_cast<size_t>(t)])];
    std::memcpy(a.h.data() + t * hidden, all + from, static_cast<size_t>(hidden) * sizeof(float));
    from += hidden;
  }
}

// h += o_proj(attention(rope(qk_norm(qkv_proj(input_layernorm(h)))))). Every token's K/V is
// written to its cache slot before any query attends. Under tensor parallelism this rank runs its
// heads and its columns of o_proj; the heads' outputs and o_proj's columns are gathered.
void CausalLM::attention_block(const DecoderLayerWeights& l, KvCacheLayer kv, const ForwardBatch& batch,
                               const AttentionShape& shape, Activations& a) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim;
  const int64_t q_dim = shard_.num_heads * head_dim;
  const int64_t kv_dim = shard_.num_kv_heads * head_dim;
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
      float* q = qkv + t * qkv_dim;  // [heads, head_dim]
      float* k = q + q_dim;          // [kv_heads, head_dim]
      if (c.has_qk_norm()) {
        rms_norm(q, shard_.num_heads, head_dim, head_dim, l.q_norm.data(), eps, q, head_dim);
        rms_norm(k, shard_.num_kv_heads, head_dim, head_dim, l.k_norm.data(), eps, k, head_dim);
      }
      rope_apply(q, shard_.num_heads, head_dim, a.cos_sin.data() + t * head_dim);
      rope_apply(k, shard_.num_kv_heads, head_dim, a.cos_sin.data() + t * head_dim);
    }
    write_kv(qkv + t0 * qkv_dim + q_dim, qkv_dim, qkv + t0 * qkv_dim + q_dim + kv_dim, qkv_dim,
             batch.slot_mapping.data() + t0, t1 - t0, kv_dim, kv);
  });
  {
    const PhaseTimer timer(StepPhase::kAttention);
    paged_attention(qkv, qkv_dim, batch.positions.data(), batch.token_seq.data(), num_tokens, batch.block_tables.data(),
                    batch.max_blocks_per_seq, kv, shape, a.attn_local.data(), q_dim, pool_);
  }
  gather_columns(a.attn_local.data(), num_tokens, q_dim, a.attn.data(), a.gathered.data(), &l.o_proj);
  const int64_t all_heads = c.num_attention_heads * head_dim;
  linear(a.attn.data(), num_tokens, all_heads, l.o_proj, a.delta_local.data(), shard_.hidden, pool_);
  gather_columns(a.delta_local.data(), num_tokens, shard_.hidden, a.delta.data(), a.gathered.data());
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
    moe_block(l, a.x.data(), num_tokens, a.delta_local.data(), a.moe.data());
  } else {
    mlp_block(l, a);
  }
  gather_columns(a.delta_local.data(), num_tokens, shard_.hidden, a.delta.data(), a.gathered.data());
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(a.delta.data() + t0 * hidden, t1 - t0, hidden, hidden, l.down_bias);
    add_residual(a.h.data() + t0 * hidden, a.delta.data() + t0 * hidden, static_cast<size_t>((t1 - t0) * hidden));
  });
}

// delta_local = down_proj(silu(gate_proj(x)) · up_proj(x)) (+ gate/up biases; down_bias is added by
// the caller): this rank's features of silu·up, gathered, then its columns of down_proj.
void CausalLM::mlp_block(const DecoderLayerWeights& l, Activations& a) const {
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t inter = shard_.intermediate;
  float* const gate_up = a.gate_up.data();
  linear(a.x.data(), num_tokens, hidden, l.gate_up_proj, gate_up, 2 * inter, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(gate_up + t0 * 2 * inter, t1 - t0, 2 * inter, 2 * inter, l.gate_up_bias);
    silu_mul(gate_up + t0 * 2 * inter, t1 - t0, inter, 2 * inter, a.act_local.data() + t0 * inter, inter);
  });
  gather_columns(a.act_local.data(), num_tokens, inter, a.act.data(), a.gathered.data(), &l.down_proj);
  linear(a.act.data(), num_tokens, config_.intermediate_size, l.down_proj, a.delta_local.data(), shard_.hidden, pool_);
}

// logits = lm_head(norm(h)), only for the rows batch.logits_indices; a tied head is the embedding.
// Under tensor parallelism each rank computes its vocabulary rows and rank 0 assembles them.
void CausalLM::final_norm_and_lm_head(const ForwardBatch& batch, const Activations& a, float* logits) const {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  const auto num_logits = static_cast<int64_t>(batch.logits_indices.size());
  std::vector<float> final_x(static_cast<size_t>(num_logits * hidden));  // [num_logits, hidden_size] f32
  for (int64_t i = 0; i < num_logits; ++i)
    rms_norm_row(a.h.data() + batch.logits_indices[i] * hidden, hidden, norm_.data(),
                 static_cast<float>(c.rms_norm_eps), final_x.data() + i * hidden);
  const LinearWeight& head = c.tie_word_embeddings ? embed_tokens_ : lm_head_;
  if (shard_.size == 1)
    return linear(final_x.data(), num_logits, hidden, head, logits, c.vocab_size, pool_, StepPhase::kLmHead);
  const int64_t width = shard_.vocab_end - shard_.vocab_begin;
  std::vector<float> local(static_cast<size_t>(num_logits * width));  // [num_logits, width] f32
  linear(final_x.data(), num_logits, hidden, head, local.data(), width, pool_, StepPhase::kLmHead);
  gather_logits(local.data(), num_logits, logits);
}

void CausalLM::gather_logits(const float* local, int64_t num_logits, float* logits) const {
  const int64_t vocab = config_.vocab_size;
  if (shard_.rank != 0) {
    const int64_t width = shard_.vocab_end - shard_.vocab_begin;
    return tp_->send_to(0, local, static_cast<size_t>(num_logits * width) * sizeof(float));
  }
  std::vector<float> received;
  for (int r = 0; r < shard_.size; ++r) {
    const auto [begin, end] = TensorParallelShard::vocab_range(vocab, r, shard_.size);
    const float* from = local;
    if (r != 0) {
      received.resize(static_cast<size_t>(num_logits * (end - begin)));
      tp_->receive_from(r, received.data(), received.size() * sizeof(float));
      from = received.data();
    }
    for (int64_t i = 0; i < num_logits; ++i)
      std::memcpy(logits + i * vocab + begin, from + i * (end - begin),
                  static_cast<size_t>(end - begin) * sizeof(float));
  }
}

}  // namespace ditto
