// Storage of the paged KV cache: for each layer, num_blocks · block_size slots of K and V, bf16.
// Which sequence owns which block is the engine's business (block tables); this class only owns
// the memory. Rounding to bf16 happens once, when a token's K/V are written.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/huge_page_allocator.h"

#include "architecture/config.h"
#include "kernels/attention.h"

namespace ditto {

class KvCache {
 public:
  // Throws Error(kInvalidArgument) for num_blocks < 1 or block_size < 1, and
  // Error(kResourceExhausted) if the memory cannot be allocated.
  KvCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  // The id rank 0 of a tensor-parallel group gave this cache in its commands (-1: none).
  int64_t tensor_parallel_id() const { return tensor_parallel_id_; }
  void set_tensor_parallel_id(int64_t id) { tensor_parallel_id_ = id; }
  KvCacheLayer layer(int64_t index);
  // Gives the memory of `blocks` (ascending block ids whose contents nobody will read: free and
  // uncached) back to the operating system: the whole pages inside each run of consecutive blocks,
  // in every layer's K and V (madvise MADV_DONTNEED). They read as zeros when next used; every slot
  // is written before it is read. Returns the bytes released.
  int64_t release_blocks(std::span<const int32_t> blocks);

  // Bytes per block across all layers (K and V), for sizing the cache to a memory budget.
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size);

 private:
  int64_t num_layers_;
  int64_t num_blocks_;
  int64_t block_size_;
  int64_t kv_dim_;  // num_key_value_heads · head_dim
  int64_t tensor_parallel_id_ = -1;
  std::vector<uint16_t, HugePageAllocator<uint16_t>>
      data_;  // [num_layers, 2 (K, V), num_blocks · block_size, kv_dim] bf16
};

}  // namespace ditto
