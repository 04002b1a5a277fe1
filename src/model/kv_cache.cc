#include "model/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <string>

#include "core/error.h"

namespace ditto {

KvCache::KvCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size)
    : num_layers_(config.num_hidden_layers),
      num_blocks_(num_blocks),
      block_size_(block_size),
      kv_dim_(config.num_key_value_heads * config.head_dim) {
  if (num_blocks < 1) throw_invalid_argument("num_blocks must be >= 1, got " + std::to_string(num_blocks));
  if (block_size < 1) throw_invalid_argument("block_size must be >= 1, got " + std::to_string(block_size));
  try {
    data_.resize(static_cast<size_t>(num_layers_ * 2 * num_blocks_ * block_size_ * kv_dim_));
  } catch (const std::bad_alloc&) {
    throw_error(ErrorCode::kResourceExhausted, "cannot allocate the KV cache: " + std::to_string(num_blocks) +
                                                   " blocks of " + std::to_string(bytes_per_block(config, block_size)) +
                                                   " bytes");
  }
}

KvCacheLayer KvCache::layer(int64_t index) {
  DITTO_CHECK(index >= 0 && index < num_layers_);
  const int64_t slots = num_blocks_ * block_size_;
  uint16_t* base = data_.data() + index * 2 * slots * kv_dim_;
  return KvCacheLayer{base, base + slots * kv_dim_, slots};
}

int64_t KvCache::release_blocks(std::span<const int32_t> blocks) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto block_bytes = static_cast<uintptr_t>(block_size_ * kv_dim_) * sizeof(uint16_t);
  int64_t released = 0;
  for (size_t i = 0; i < blocks.size();) {
    size_t j = i + 1;  // [blocks[i], blocks[j-1]] consecutive
    while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1) ++j;
    for (int64_t l = 0; l < num_layers_; ++l) {
      const KvCacheLayer layer_view = layer(l);
      for (const uint16_t* base : {layer_view.k, layer_view.v}) {
        const uintptr_t first = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(blocks[i]) * block_bytes;
        const uintptr_t last = first + (j - i) * block_bytes;
        const uintptr_t begin = (first + page - 1) / page * page;
        const uintptr_t end = last / page * page;
        if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) == 0)
          released += static_cast<int64_t>(end - begin);
      }
    }
    i = j;
  }
  return released;
}

int64_t KvCache::bytes_per_block(const ModelConfig& config, int64_t block_size) {
  return config.num_hidden_layers * 2 * block_size * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(sizeof(uint16_t));
}

}  // namespace ditto
