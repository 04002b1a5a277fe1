#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

// xxHash header-only (Debian's libxxhash-dev), inlined as in system_fingerprint.cc.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ditto {

namespace {

// splitmix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014): a bijection on 64 bits whose every output bit depends on every input bit.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

double KvCacheManagerStats::usage() const {
  return num_blocks > 0 ? 1.0 - static_cast<double>(num_free_blocks) / static_cast<double>(num_blocks) : 0.0;
}

uint64_t KvCacheManager::hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t h = mix64(parent_hash + kGolden);
  for (int32_t token : token_ids) h = mix64(h ^ (static_cast<uint32_t>(token) + kGolden));
  return h;
}

KvCacheManager::KvCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching, BlockHasher hasher)
    : block_size_(block_size), enable_prefix_caching_(enable_prefix_caching), hasher_(hasher) {
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    throw_invalid_argument("KV cache manager: num_blocks must be in [1, 2^31 - 1], got " + std::to_string(num_blocks));
  if (block_size < 1)
    throw_invalid_argument("KV cache manager: block_size must be >= 1, got " + std::to_string(block_size));
  if (hasher == nullptr) throw_invalid_argument("KV cache manager: hasher must not be null");
  blocks_.resize(static_cast<size_t>(num_blocks));
  if (enable_prefix_caching) cached_tokens_.resize(static_cast<size_t>(num_blocks * block_size));
  for (int32_t b = 0; b < num_blocks; ++b) insert_free(b, free_tail_, kNone);
}

uint64_t KvCacheManager::salt_root(const std::string& salt) {
  return XXH3_64bits(salt.data(), salt.size()) | (uint64_t{1} << 63);
}

uint64_t KvCacheManager::epoch_root(uint64_t root, uint64_t epoch) {
  if (epoch == 0) return root;
  const uint64_t both[2] = {root, epoch};
  return XXH3_64bits(both, sizeof both) | (uint64_t{1} << 63);
}

int64_t KvCacheManager::acquire_cached_prefix(RequestId id, std::span<const int32_t> token_ids, uint64_t root) {
  Request& request = requests_[id];
  DITTO_CHECK(request.block_table.empty())
      << "acquire_cached_prefix: request " << id << " already holds " << request.block_table.size() << " blocks";
  request = Request{};
  request.last_hash = root;
  request.last_entry = root;
  if (!enable_prefix_caching_) return 0;
  const int64_t num_tokens = static_cast<int64_t>(token_ids.size());
  // Full blocks only, and never the last token: the model must run it to produce logits.
  const int64_t max_blocks = num_tokens > 0 ? (num_tokens - 1) / block_size_ : 0;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const auto tokens = token_ids.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = hasher_(request.last_hash, tokens);
    const int32_t block = find_cached(hash, request.last_entry, tokens);
    if (block == kNone) break;
    if (blocks_[block].ref_count++ == 0) remove_free(block);
    request.block_table.push_back(block);
    request.last_hash = hash;
    request.last_entry = blocks_[block].entry;
  }
  request.num_cached_blocks = static_cast<int64_t>(request.block_table.size());
  const int64_t hit_tokens = request.num_cached_blocks * block_size_;
  prefix_queries_tokens_ += num_tokens;
  prefix_hit_tokens_ += hit_tokens;
  return hit_tokens;
}

bool KvCacheManager::allocate(RequestId id, int64_t num_tokens) {
  DITTO_CHECK(num_tokens >= 0) << "allocate: request " << id << " asks for " << num_tokens << " tokens";
  const auto found = requests_.find(id);
  const int64_t num_held = found == requests_.end() ? 0 : static_cast<int64_t>(found->second.block_table.size());
  const int64_t num_needed = (num_tokens + block_size_ - 1) / block_size_ - num_held;
  if (num_needed > num_free_) return false;
  Request& request = found == requests_.end() ? requests_[id] : found->second;
  for (int64_t i = 0; i < num_needed; ++i) {
    const int32_t block = free_head_;
    remove_free(block);
    if (blocks_[block].entry != 0) unregister_block(block);
    blocks_[block].ref_count = 1;
    request.block_table.push_back(block);
  }
  return true;
}

void KvCacheManager::cache_computed(RequestId id, std::span<const int32_t> token_ids, int64_t num_computed_tokens) {
  const auto found = requests_.find(id);
  DITTO_CHECK(found != requests_.end()) << "cache_computed: unknown request " << id;
  Request& request = found->second;
  const int64_t capacity = static_cast<int64_t>(request.block_table.size()) * block_size_;
  DITTO_CHECK(num_computed_tokens >= 0 && num_computed_tokens <= static_cast<int64_t>(token_ids.size()) &&
              num_computed_tokens <= capacity)
      << "cache_computed: request " << id << " has " << num_computed_tokens << " computed tokens of "
      << token_ids.size() << ", in blocks for " << capacity;
  if (!enable_prefix_caching_) return;
  const int64_t num_full_blocks = num_computed_tokens / block_size_;
  for (int64_t i = request.num_cached_blocks; i < num_full_blocks; ++i) {
    const auto tokens = token_ids.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = hasher_(request.last_hash, tokens);
    int32_t block = find_cached(hash, request.last_entry, tokens);
    if (block == kNone) {
      block = request.block_table[static_cast<size_t>(i)];
      register_block(block, hash, request.last_entry, tokens);
    }
    request.last_hash = hash;
    request.last_entry = blocks_[block].entry;
    request.num_cached_blocks = i + 1;
  }
}

void KvCacheManager::free(RequestId id) {
  const auto found = requests_.find(id);
  if (found == requests_.end()) return;
  const std::vector<int32_t>& table = found->second.block_table;
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    Block& block = blocks_[*it];
    DITTO_CHECK(block.ref_count > 0) << "free: block " << *it << " of request " << id << " is not held";
    if (--block.ref_count > 0) continue;
    if (block.entry != 0) {
      insert_free(*it, free_tail_, kNone);
    } else {
      insert_free(*it, kNone, free_head_);
    }
  }
  requests_.erase(found);
}

std::span<const int32_t> KvCacheManager::block_table(RequestId id) const {
  const auto found = requests_.find(id);
  if (found == requests_.end()) return {};
  return found->second.block_table;
}

std::vector<int32_t> KvCacheManager::free_uncached_blocks() const {
  std::vector<int32_t> out;
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (blocks_[b].ref_count == 0 && blocks_[b].entry == 0) out.push_back(static_cast<int32_t>(b));
  return out;
}

int64_t KvCacheManager::ref_count(int32_t block) const {
  if (block < 0 || block >= num_blocks())
    throw_invalid_argument("KV cache manager: block " + std::to_string(block) + " is outside [0, " +
                           std::to_string(num_blocks()) + ")");
  return blocks_[block].ref_count;
}

KvCacheManagerStats KvCacheManager::stats() const {
  return {num_blocks(), num_free_, prefix_queries_tokens_, prefix_hit_tokens_};
}

bool KvCacheManager::reset_prefix_cache() {
  bool emptied = true;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (blocks_[b].entry == 0) continue;
    if (blocks_[b].ref_count == 0) {
      unregister_block(b);
    } else {
      emptied = false;
    }
  }
  return emptied;
}

std::span<int32_t> KvCacheManager::cached_tokens(int32_t block) {
  return std::span<int32_t>(cached_tokens_)
      .subspan(static_cast<size_t>(block * block_size_), static_cast<size_t>(block_size_));
}

int32_t KvCacheManager::find_cached(uint64_t hash, uint64_t parent_entry, std::span<const int32_t> token_ids) {
  const auto bucket = buckets_.find(hash);
  if (bucket == buckets_.end()) return kNone;
  for (int32_t b = bucket->second; b != kNone; b = blocks_[b].next_same_hash) {
    const auto cached = cached_tokens(b);
    if (blocks_[b].parent_entry == parent_entry && std::equal(cached.begin(), cached.end(), token_ids.begin()))
      return b;
  }
  return kNone;
}

void KvCacheManager::register_block(int32_t block, uint64_t hash, uint64_t parent_entry,
                                    std::span<const int32_t> token_ids) {
  Block& b = blocks_[block];
  DITTO_CHECK(b.entry == 0) << "register_block: block " << block << " is already registered";
  b.entry = next_entry_++;
  b.parent_entry = parent_entry;
  b.hash = hash;
  std::copy(token_ids.begin(), token_ids.end(), cached_tokens(block).begin());
  // Newest first in its bucket; a bucket holds more than one block only on a 64-bit collision.
  const auto [bucket, inserted] = buckets_.try_emplace(hash, block);
  b.next_same_hash = inserted ? kNone : bucket->second;
  bucket->second = block;
}

void KvCacheManager::unregister_block(int32_t block) {
  Block& b = blocks_[block];
  const auto bucket = buckets_.find(b.hash);
  DITTO_CHECK(bucket != buckets_.end()) << "unregister_block: block " << block << " has no bucket";
  if (bucket->second == block) {
    if (b.next_same_hash == kNone) {
      buckets_.erase(bucket);
    } else {
      bucket->second = b.next_same_hash;
    }
  } else {
    int32_t prev = bucket->second;
    while (blocks_[prev].next_same_hash != block) {
      prev = blocks_[prev].next_same_hash;
      DITTO_CHECK(prev != kNone) << "unregister_block: block " << block << " is not in its bucket";
    }
    blocks_[prev].next_same_hash = b.next_same_hash;
  }
  b.entry = 0;
  b.parent_entry = 0;
  b.hash = 0;
  b.next_same_hash = kNone;
}

void KvCacheManager::insert_free(int32_t block, int32_t prev, int32_t next) {
  blocks_[block].prev_free = prev;
  blocks_[block].next_free = next;
  (prev != kNone ? blocks_[prev].next_free : free_head_) = block;
  (next != kNone ? blocks_[next].prev_free : free_tail_) = block;
  ++num_free_;
}

void KvCacheManager::remove_free(int32_t block) {
  Block& b = blocks_[block];
  (b.prev_free != kNone ? blocks_[b.prev_free].next_free : free_head_) = b.next_free;
  (b.next_free != kNone ? blocks_[b.next_free].prev_free : free_tail_) = b.prev_free;
  b.prev_free = kNone;
  b.next_free = kNone;
  --num_free_;
}

}  // namespace ditto
