#include "model/tensor_parallel_worker.h"

#include "model/weight_update.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/weight_update.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

// Keeps what rank 0 asked this rank to hold, by the ids rank 0 gave it.
class TensorParallelWorker {
 public:
  explicit TensorParallelWorker(TensorParallelGroup& group) : group_(group) {}

  void run() {
    for (;;) {
      WireBuffer in;
      const TensorParallelCommand command = group_.receive_command(in);
      switch (command) {
        case TensorParallelCommand::kLoadModel: load(in); break;
        case TensorParallelCommand::kUnloadModel: {
          const int64_t id = in.get_i64();
          for (auto it = caches_.begin(); it != caches_.end();)
            it = it->second.model_id == id ? caches_.erase(it) : std::next(it);
          models_.erase(id);
          break;
        }
        case TensorParallelCommand::kCreateCache: create_cache(in); break;
        case TensorParallelCommand::kFreeCache: caches_.erase(in.get_i64()); break;
        case TensorParallelCommand::kForward: forward(in); break;
        case TensorParallelCommand::kUpdateTensor: update_tensor(in); break;
        case TensorParallelCommand::kShutdown: return;
        default: group_.abort("unknown command " + std::to_string(static_cast<int>(command)) + " from rank 0");
      }
    }
  }

 private:
  struct Model {
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<CausalLM> model;
  };
  struct Cache {
    int64_t model_id;
    std::unique_ptr<KvCache> cache;
  };

  void load(WireBuffer& in) {
    const int64_t id = in.get_i64();
    const auto threads = static_cast<int>(in.get_i64());
    const std::string path = in.get_string();
    Model m;
    m.pool = std::make_unique<ThreadPool>(threads);
    try {  // a failure has been reported to rank 0, which throws it; keep serving
      m.model = CausalLM::load_shard(path, m.pool.get(), &group_, id);
    } catch (const Error&) {
      return;
    }
    models_[id] = std::move(m);
  }

  // A weight update's tensor, whole (rank 0 checked it): this rank writes its rows.
  void update_tensor(WireBuffer& in) {
    const int64_t model_id = in.get_i64();
    WeightTensor t;
    t.name = in.get_string();
    t.dtype = in.get_string();
    t.shape = in.get_array<int64_t>();
    const std::vector<uint8_t> bytes = in.get_bytes();
    t.data = bytes.data();
    t.nbytes = bytes.size();
    const auto it = models_.find(model_id);
    if (it == models_.end())
      group_.abort("rank 0 named model " + std::to_string(model_id) + ", which this rank has not loaded");
    try {
      apply_received_tensor(*it->second.model, t, it->second.pool.get());
    } catch (const std::exception& e) {
      group_.abort(std::string("weight update failed: ") + e.what());
    }
  }

  void create_cache(WireBuffer& in) {
    const int64_t id = in.get_i64();
    const int64_t model_id = in.get_i64();
    const int64_t num_blocks = in.get_i64();
    const int64_t block_size = in.get_i64();
    try {
      caches_[id] = Cache{model_id, std::make_unique<KvCache>(model(model_id).make_kv_cache(num_blocks, block_size))};
    } catch (const Error& e) {
      group_.abort(std::string("cannot allocate its KV cache: ") + e.what());
    }
  }

  const CausalLM& model(int64_t id) {
    const auto it = models_.find(id);
    if (it == models_.end())
      group_.abort("rank 0 named model " + std::to_string(id) + ", which this rank has not loaded");
    return *it->second.model;
  }

  void forward(WireBuffer& in) {
    const int64_t model_id = in.get_i64();
    const int64_t cache_id = in.get_i64();
    const std::vector<int32_t> token_ids = in.get_array<int32_t>();
    const std::vector<int32_t> positions = in.get_array<int32_t>();
    const std::vector<int64_t> slot_mapping = in.get_array<int64_t>();
    const std::vector<int32_t> token_seq = in.get_array<int32_t>();
    const std::vector<int32_t> block_tables = in.get_array<int32_t>();
    const int64_t max_blocks_per_seq = in.get_i64();
    const std::vector<int32_t> logits_indices = in.get_array<int32_t>();
    const CausalLM& m = model(model_id);
    const auto cache = caches_.find(cache_id);
    if (cache == caches_.end())
      group_.abort("rank 0 named KV cache " + std::to_string(cache_id) + ", which this rank does not hold");
    const ForwardBatch batch{token_ids,    positions,          slot_mapping,  token_seq,
                             block_tables, max_blocks_per_seq, logits_indices};
    try {
      m.forward_shard(batch, *cache->second.cache, nullptr, nullptr);
    } catch (const std::exception& e) {
      group_.abort(std::string("forward pass failed: ") + e.what());
    }
  }

  TensorParallelGroup& group_;
  std::map<int64_t, Model> models_;
  std::map<int64_t, Cache> caches_;
};

void run_tensor_parallel_worker(TensorParallelGroup& group) { TensorParallelWorker(group).run(); }

bool serve_as_tensor_parallel_rank(int tensor_parallel_size) {
  TensorParallelGroup* group = TensorParallelGroup::initialize(tensor_parallel_size);
  if (group == nullptr || group->rank() == 0) return false;
  enable_progress_bars(false);  // rank 0 draws for the group; the others share its terminal
  run_tensor_parallel_worker(*group);
  TensorParallelGroup::shutdown();
  return true;
}

}  // namespace ditto
