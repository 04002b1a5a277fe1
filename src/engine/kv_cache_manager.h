// Which physical KV blocks each request holds, how many holders each block has, and the prefix
// cache that lets a request reuse the blocks of an earlier one that began with the same tokens.
// It knows only integer block ids; the K/V memory itself is KvCache (model/kv_cache.h).
//
// Prefix cache. A full block whose K/V are computed is registered under a 64-bit hash of its
// parent block's hash and its own token ids, so block i's hash covers tokens [0, (i + 1)·block_size).
// A lookup never trusts the hash alone: a hit must also have the same token ids and the same parent
// registration (each registration has an id that is never reused), so by induction the whole prefix
// is equal. Reusing a block changes no bit of the output (contract row 4): a position's K/V depend
// only on the tokens up to it, and attention visits blocks by absolute position.
//
// Free blocks (reference count 0) wait in one queue, cached or not. Allocation takes from its front;
// a block that carries a registration is unregistered there, just before reuse. A request's freed
// blocks join the back in reverse table order, so its tail is evicted before its head; freed blocks
// with no registration (a partial last block, a duplicate of a cached block) join the front, as they
// hold nothing worth keeping. Everything is a pure function of the call sequence: the same calls
// give the same block ids.
//
// Not thread-safe: the engine thread owns the manager.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ditto {

using RequestId = int64_t;

struct KvCacheManagerStats {
  int64_t num_blocks = 0;
  int64_t num_free_blocks = 0;        // reference count 0, cached or not
  int64_t prefix_queries_tokens = 0;  // tokens looked up in the prefix cache (cumulative)
  int64_t prefix_hit_tokens = 0;      // of those, tokens found cached (cumulative)
  double usage() const;               // 1 - num_free_blocks / num_blocks, in [0, 1]
};

// hash(parent block's hash, the block's block_size token ids); kRootBlockHash is the parent hash of
// a request's first block. Replaceable only so tests can force collisions.
using BlockHasher = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> token_ids);
inline constexpr uint64_t kRootBlockHash = 0;

class KvCacheManager {
 public:
  // num_blocks in [1, 2^31 - 1] blocks of block_size ≥ 1 tokens, all free. Throws
  // Error(kInvalidArgument) otherwise. `hasher` defaults to hash_block; tests pass one that
  // collides to exercise the verification of hits.
  KvCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching,
                 BlockHasher hasher = &KvCacheManager::hash_block);

  // For a request not yet holding blocks: how many leading tokens of `token_ids` are already cached
  // as full blocks — a multiple of block_size, at most token_ids.size() - 1 so that at least the last
  // token is left to compute (the model runs it to produce logits). Takes a reference on each of
  // those blocks (a free one leaves the free queue) and makes them the start of the request's block
  // table. Returns 0 when prefix caching is off. With it on, adds token_ids.size() to
  // prefix_queries_tokens and the result to prefix_hit_tokens. The caller must free(id) if it does
  // not go on to run the request, or the references are kept. Throws Error(kInternal) if the
  // request already holds blocks.
  // `root` is the parent of the request's first block: kRootBlockHash, or salt_root(cache_salt) for
  // a salted request, whose blocks then match only blocks cached under the same salt.
  int64_t acquire_cached_prefix(RequestId id, std::span<const int32_t> token_ids, uint64_t root = kRootBlockHash);

  // Grows the request's block table (registering an unknown id) so that it covers `num_tokens`
  // positions, taking blocks from the front of the free queue and unregistering any cached one it
  // takes. Never shrinks a table. Returns false, and changes nothing, if fewer blocks are free than
  // needed. Throws Error(kInternal) for num_tokens < 0.
  bool allocate(RequestId id, int64_t num_tokens);

  // Declares that the K/V of the first `num_computed_tokens` of `token_ids` (the request's prompt
  // followed by its output so far) are in the request's blocks. With prefix caching on, registers
  // each full block completed since the last call; if an identical block (same tokens, same parent)
  // is already cached, that one stays the cached copy and the request keeps its own block (no
  // remapping) without registering it; its later blocks chain on the cached copy. (Should that copy
  // be evicted meanwhile, the later blocks are registered under a parent no lookup can reach again:
  // a lost hit, never a wrong one.) Throws Error(kInternal) for an unknown id, or if
  // num_computed_tokens exceeds token_ids.size() or the table's capacity.
  void cache_computed(RequestId id, std::span<const int32_t> token_ids, int64_t num_computed_tokens);

  // Releases every block of the request (finished, aborted or preempted) and forgets the id: each
  // block's reference count drops, and a block reaching 0 joins the free queue (see the top of this
  // file), keeping its registration until it is reused. Unknown id: no-op.
  void free(RequestId id);

  // The request's physical block ids, position p in block_table[p / block_size]. Empty for an
  // unknown id. Valid until the next call that changes this request.
  std::span<const int32_t> block_table(RequestId id) const;
  int64_t num_free_blocks() const { return num_free_; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  // How many requests hold `block` (0 while it is free). Throws Error(kInvalidArgument) for an id
  // outside [0, num_blocks).
  int64_t ref_count(int32_t block) const;
  // The blocks that hold nothing anyone may read again: free, and not in the prefix cache. In
  // ascending order. Their memory may be given back (KvCache::release_blocks).
  std::vector<int32_t> free_uncached_blocks() const;
  KvCacheManagerStats stats() const;

  // Drops the registration of every free block, so later lookups miss them (e.g. after the weights
  // change). Blocks still held keep theirs; returns false if there were any such, true if the prefix
  // cache is now empty.
  bool reset_prefix_cache();

  // The root (parent hash and parent registration of a first block) of requests salted with
  // `salt` (vLLM's cache_salt): XXH3-64 of its bytes with the top bit set, so it is never
  // kRootBlockHash nor a registration id (those count up from 1). Two salts share cached blocks
  // only if their XXH3-64 agree in 63 bits.
  static uint64_t salt_root(const std::string& salt);

  // The root of requests admitted under weights epoch `epoch` (CausalLM::weights_epoch) whose root
  // under the loaded weights is `root`: `root` itself for epoch 0, else XXH3-64 of both with the
  // top bit set. Blocks computed under one epoch never match a lookup under another (DESIGN.md row
  // 14), and stale ones are evicted as any unused cached block is.
  static uint64_t epoch_root(uint64_t root, uint64_t epoch);

  // The default BlockHasher: a splitmix64-style chain over the parent hash and each token id.
  static uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids);

 private:
  static constexpr int32_t kNone = -1;

  struct Block {
    int32_t ref_count = 0;
    int32_t prev_free = kNone;  // free-queue links, meaningful while ref_count == 0
    int32_t next_free = kNone;
    // Cache registration; entry == 0 means none. Token ids live in cached_tokens_.
    uint64_t entry = 0;         // unique id of this registration (never reused)
    uint64_t parent_entry = 0;  // the parent block's registration id; the request's root for a first block
    uint64_t hash = 0;
    int32_t next_same_hash = kNone;  // next registered block in the same hash bucket
  };

  struct Request {
    std::vector<int32_t> block_table;
    // Leading blocks already resolved in the prefix cache: registered, or found identical to a
    // cached block. last_hash / last_entry are the hash and registration of the last of them, the
    // parent of the next full block.
    int64_t num_cached_blocks = 0;
    uint64_t last_hash = kRootBlockHash;
    uint64_t last_entry = 0;
  };

  std::span<int32_t> cached_tokens(int32_t block);
  // The registered block with this hash, parent registration and tokens, or kNone.
  int32_t find_cached(uint64_t hash, uint64_t parent_entry, std::span<const int32_t> token_ids);
  void register_block(int32_t block, uint64_t hash, uint64_t parent_entry, std::span<const int32_t> token_ids);
  void unregister_block(int32_t block);
  // Links a free block between prev and next (kNone: the queue's front or back).
  void insert_free(int32_t block, int32_t prev, int32_t next);
  void remove_free(int32_t block);

  int64_t block_size_;
  bool enable_prefix_caching_;
  BlockHasher hasher_;
  std::vector<Block> blocks_;           // [num_blocks]
  std::vector<int32_t> cached_tokens_;  // [num_blocks, block_size] token ids of registered blocks
  int32_t free_head_ = kNone;           // least recently freed (or never-cached) block: reused next
  int32_t free_tail_ = kNone;
  int64_t num_free_ = 0;
  std::unordered_map<uint64_t, int32_t> buckets_;  // hash → first registered block with it
  uint64_t next_entry_ = 1;
  std::unordered_map<RequestId, Request> requests_;
  int64_t prefix_queries_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace ditto
