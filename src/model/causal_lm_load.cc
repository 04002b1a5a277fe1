// CausalLM's loading: the checkpoint's config and tensors into this rank's packed weights
// (model/checkpoint_tensors.h), the tensor-parallel group's agreement on what was loaded, and the
// KV caches every rank allocates.
#include "model/causal_lm.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "architecture/model_tensors.h"
#include "architecture/rope_frequencies.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/memory_info.h"
#include "core/progress.h"
#include "kernels/kernel_tuning.h"
#include "model/checkpoint_tensors.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

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
    m->is_gguf_ = true;
    validate_gguf_weights(*g, m->config_);
    m->shard_ = TensorParallelShard::of(m->config_, rank, size);
    check_memory(g->total_tensor_bytes());
    m->load_stats_.weight_bytes = g->total_tensor_bytes();
    m->load_tensors(*gguf_tensors(*g, m->config_), pool);
  } else {
    m->config_ = load_model_config(model_path + "/config.json");
    const WeightStore store = WeightStore::open(model_path);
    validate_weights(m->config_, store);
    m->shard_ = TensorParallelShard::of(m->config_, rank, size);
    check_memory(store.total_bytes());
    m->load_stats_.weight_bytes = store.total_bytes();
    m->load_tensors(*safetensors_tensors(store), pool);
  }
  m->load_stats_.num_tensors = static_cast<int64_t>(expected_tensors(m->config_).size());
  m->inv_freq_ = rope_inv_freq(m->config_);
  if (m->config_.has_sliding_layers() && m->config_.rope_local_base_freq > 0)  // Gemma 3's own base
    m->local_inv_freq_ = rope_local_inv_freq(m->config_);
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
  // On a terminal, when loading takes a noticeable time: tensors packed so far.
  ProgressBar bar("loading", static_cast<int64_t>(destinations.size()), "weights", library_progress_sink());
  bar.show_after(1.0);
  for (size_t done = 0; done < destinations.size(); ++done) {
    const Destination& d = destinations[done];
    bar.update(static_cast<int64_t>(done),
               d.layer >= 0 ? std::string("layer ") + std::to_string(d.layer) : std::string("embeddings and head"));
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
    case WeightSlot::kAttentionOutputNorm: return &l.attention_output_norm;
    case WeightSlot::kMlpOutputNorm: return &l.mlp_output_norm;
    case WeightSlot::kGateUpBias: return &l.gate_up_bias;
    case WeightSlot::kDownBias: return &l.down_bias;
    default: break;
  }
  DITTO_CHECK(false) << "slot " << static_cast<int>(slot) << " is not a vector";
  return nullptr;
}

}  // namespace ditto
