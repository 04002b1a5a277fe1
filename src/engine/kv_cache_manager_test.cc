#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using ::ditto::testing::error_message;
using Table = std::vector<int32_t>;

Table table_of(const KvCacheManager& kv, RequestId id) {
  const auto table = kv.block_table(id);
  return Table(table.begin(), table.end());
}

std::vector<int32_t> iota_tokens(int64_t n, int32_t first = 1) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

// What the scheduler does for a request's prompt: look up the cached prefix, allocate the rest,
// run it (not here), declare it computed. Returns the cached token count.
int64_t run_prompt(KvCacheManager& kv, RequestId id, const std::vector<int32_t>& prompt) {
  const int64_t cached = kv.acquire_cached_prefix(id, prompt);
  EXPECT_TRUE(kv.allocate(id, static_cast<int64_t>(prompt.size()))) << "request " << id;
  kv.cache_computed(id, prompt, static_cast<int64_t>(prompt.size()));
  return cached;
}

// Every hash is the same: each lookup must be settled by comparing tokens and parents.
uint64_t colliding_hash(uint64_t, std::span<const int32_t>) { return 42; }

TEST(KvCacheManagerTest, RejectsBadSizes) {
  for (const auto& [blocks, size] :
       {std::pair<int64_t, int64_t>{0, 4}, {-1, 4}, {int64_t{1} << 31, 4}, {4, 0}, {4, -2}}) {
    const int64_t num_blocks = blocks, block_size = size;  // lambdas capture variables, not bindings (C++17)
    DITTO_EXPECT_MESSAGE_HAS(
        error_message([&] { KvCacheManager kv(num_blocks, block_size, true); }, ErrorCode::kInvalidArgument),
        num_blocks < 1 || num_blocks > 4 ? "num_blocks" : "block_size");
  }
}

TEST(KvCacheManagerTest, AllocateAndFreeAccounting) {
  KvCacheManager kv(8, 4, false);
  EXPECT_EQ(kv.num_blocks(), 8);
  EXPECT_EQ(kv.block_size(), 4);
  EXPECT_EQ(kv.num_free_blocks(), 8);

  ASSERT_TRUE(kv.allocate(1, 5));  // 5 tokens: 2 blocks
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1}));
  ASSERT_TRUE(kv.allocate(1, 8));  // still fits: nothing new
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1}));
  ASSERT_TRUE(kv.allocate(1, 3));  // never shrinks
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1}));
  ASSERT_TRUE(kv.allocate(1, 9));
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1, 2}));
  ASSERT_TRUE(kv.allocate(2, 1));
  EXPECT_EQ(table_of(kv, 2), (Table{3}));
  ASSERT_TRUE(kv.allocate(3, 0));
  EXPECT_TRUE(kv.block_table(3).empty());
  EXPECT_EQ(kv.num_free_blocks(), 4);
  EXPECT_EQ(kv.ref_count(0), 1);
  EXPECT_EQ(kv.ref_count(4), 0);

  kv.free(1);
  EXPECT_TRUE(kv.block_table(1).empty());
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(kv.ref_count(0), 0);
  EXPECT_EQ(kv.stats().num_free_blocks, 7);
  EXPECT_DOUBLE_EQ(kv.stats().usage(), 1.0 / 8.0);
  kv.free(1);   // already gone
  kv.free(99);  // never known
  kv.free(2);
  kv.free(3);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  EXPECT_DOUBLE_EQ(kv.stats().usage(), 0.0);
  // Freed blocks without cache entries come back first, in their table order.
  ASSERT_TRUE(kv.allocate(4, 16));
  EXPECT_EQ(table_of(kv, 4), (Table{3, 0, 1, 2}));
  EXPECT_DOUBLE_EQ(kv.stats().usage(), 0.5);
}

TEST(KvCacheManagerTest, ExhaustionReturnsFalseWithoutPartialEffects) {
  KvCacheManager kv(4, 4, true);
  ASSERT_TRUE(kv.allocate(1, 8));
  EXPECT_FALSE(kv.allocate(2, 12));  // 3 blocks, 2 free
  EXPECT_TRUE(kv.block_table(2).empty());
  EXPECT_FALSE(kv.allocate(1, 17));  // 3 more, 2 free
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1}));
  EXPECT_EQ(kv.num_free_blocks(), 2);
  ASSERT_TRUE(kv.allocate(2, 8));  // exactly what is left
  EXPECT_EQ(table_of(kv, 2), (Table{2, 3}));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  EXPECT_FALSE(kv.allocate(3, 1));
  EXPECT_TRUE(kv.allocate(3, 0));
}

TEST(KvCacheManagerTest, IdenticalPromptsShareFullBlocks) {
  KvCacheManager kv(16, 4, true);
  const auto prompt = iota_tokens(10);  // 2 full blocks and a partial one
  EXPECT_EQ(run_prompt(kv, 1, prompt), 0);
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1, 2}));

  EXPECT_EQ(kv.acquire_cached_prefix(2, prompt), 8);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1}));
  ASSERT_TRUE(kv.allocate(2, 10));
  kv.cache_computed(2, prompt, 10);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1, 3}));  // the partial block is its own
  EXPECT_EQ(kv.ref_count(0), 2);
  EXPECT_EQ(kv.ref_count(1), 2);
  EXPECT_EQ(kv.ref_count(2), 1);
  EXPECT_EQ(kv.num_free_blocks(), 12);

  // Freeing one keeps the other's blocks intact and out of the free queue.
  kv.free(1);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1, 3}));
  EXPECT_EQ(kv.ref_count(0), 1);
  EXPECT_EQ(kv.ref_count(1), 1);
  EXPECT_EQ(kv.num_free_blocks(), 13);
  ASSERT_TRUE(kv.allocate(3, 13 * 4));  // everything free; none of request 2's blocks
  for (int32_t block : kv.block_table(3)) {
    EXPECT_NE(block, 0);
    EXPECT_NE(block, 1);
    EXPECT_NE(block, 3);
  }
  EXPECT_EQ(kv.num_free_blocks(), 0);
}

TEST(KvCacheManagerTest, CapLeavesOneTokenToCompute) {
  KvCacheManager kv(16, 4, true);
  const auto prompt = iota_tokens(8);  // exactly 2 full blocks
  run_prompt(kv, 1, prompt);
  // Both blocks are cached, but the last token must run: only the first block is taken.
  EXPECT_EQ(kv.acquire_cached_prefix(2, prompt), 4);
  EXPECT_EQ(table_of(kv, 2), (Table{0}));
  auto longer = prompt;
  longer.push_back(100);
  EXPECT_EQ(kv.acquire_cached_prefix(3, longer), 8);
  EXPECT_EQ(table_of(kv, 3), (Table{0, 1}));
  EXPECT_EQ(kv.acquire_cached_prefix(4, std::vector<int32_t>{1}), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(5, std::vector<int32_t>{}), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(6, std::vector<int32_t>{1, 2, 3, 4}), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(7, std::vector<int32_t>{1, 2, 3, 4, 5}), 4);
}

TEST(KvCacheManagerTest, SharedPrefixThenDivergence) {
  KvCacheManager kv(32, 4, true);
  run_prompt(kv, 1, iota_tokens(13));  // blocks 0, 1, 2 full; 3 partial

  auto second_block_differs = iota_tokens(13);
  second_block_differs[5] = 99;
  EXPECT_EQ(kv.acquire_cached_prefix(2, second_block_differs), 4);
  EXPECT_EQ(table_of(kv, 2), (Table{0}));

  auto third_block_differs = iota_tokens(13);
  third_block_differs[11] = 99;
  EXPECT_EQ(kv.acquire_cached_prefix(3, third_block_differs), 8);
  EXPECT_EQ(table_of(kv, 3), (Table{0, 1}));

  // The second block's own tokens match request 1's, but its prefix does not: no hit anywhere.
  auto first_block_differs = iota_tokens(13);
  first_block_differs[0] = 99;
  EXPECT_EQ(kv.acquire_cached_prefix(4, first_block_differs), 0);

  // A divergent request's own blocks are cached under their own chain.
  ASSERT_TRUE(kv.allocate(2, 13));
  kv.cache_computed(2, second_block_differs, 13);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 4, 5, 6}));
  EXPECT_EQ(kv.acquire_cached_prefix(5, second_block_differs), 12);
  EXPECT_EQ(table_of(kv, 5), (Table{0, 4, 5}));
}

TEST(KvCacheManagerTest, PartialLastBlockNeverMatchesUntilItFills) {
  KvCacheManager kv(16, 4, true);
  auto tokens = iota_tokens(6);  // block 0 full, block 1 holds 2 tokens
  run_prompt(kv, 1, tokens);
  const auto query = iota_tokens(12);
  EXPECT_EQ(kv.acquire_cached_prefix(2, query), 4);
  kv.free(2);

  // Request 1 decodes two tokens: block 1 fills up and is registered on that call.
  tokens.push_back(7);
  kv.cache_computed(1, tokens, 7);
  EXPECT_EQ(kv.acquire_cached_prefix(3, query), 4);
  kv.free(3);
  tokens.push_back(8);
  kv.cache_computed(1, tokens, 8);
  EXPECT_EQ(kv.acquire_cached_prefix(4, query), 8);
  EXPECT_EQ(table_of(kv, 4), (Table{0, 1}));
}

TEST(KvCacheManagerTest, HitsAfterTheFirstRequestWasFreed) {
  KvCacheManager kv(8, 4, true);
  const auto prompt = iota_tokens(10);
  run_prompt(kv, 1, prompt);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 8);

  // The cached free blocks are revived: they leave the free queue.
  EXPECT_EQ(kv.acquire_cached_prefix(2, prompt), 8);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1}));
  EXPECT_EQ(kv.ref_count(0), 1);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  ASSERT_TRUE(kv.allocate(3, 6 * 4));
  EXPECT_EQ(table_of(kv, 3), (Table{2, 3, 4, 5, 6, 7}));  // block 2 (request 1's partial) first
  EXPECT_FALSE(kv.allocate(2, 10));
  kv.free(3);  // none has an entry: all to the front, in table order
  ASSERT_TRUE(kv.allocate(2, 10));
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1, 2}));

  // A preempted request finds its own blocks again when it comes back.
  kv.cache_computed(2, prompt, 10);
  kv.free(2);
  EXPECT_EQ(kv.acquire_cached_prefix(2, prompt), 8);
  EXPECT_EQ(table_of(kv, 2), (Table{0, 1}));
}

TEST(KvCacheManagerTest, EvictsLeastRecentlyFreedFirstAndTailsBeforeHeads) {
  KvCacheManager kv(6, 2, true);
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {5, 6, 7, 8};
  run_prompt(kv, 1, a);  // blocks 0, 1
  kv.free(1);            // queue: 2 3 4 5 1 0
  run_prompt(kv, 2, b);  // blocks 2, 3
  kv.free(2);            // queue: 4 5 1 0 3 2
  EXPECT_EQ(kv.num_free_blocks(), 6);

  // Three blocks: the two never-used ones, then request 1's tail, which loses its registration.
  ASSERT_TRUE(kv.allocate(3, 6));
  EXPECT_EQ(table_of(kv, 3), (Table{4, 5, 1}));
  const std::vector<int32_t> a_again = {1, 2, 3, 4, 9};
  const std::vector<int32_t> b_again = {5, 6, 7, 8, 9};
  EXPECT_EQ(kv.acquire_cached_prefix(4, a_again), 2);  // head still cached, tail gone
  EXPECT_EQ(table_of(kv, 4), (Table{0}));
  EXPECT_EQ(kv.acquire_cached_prefix(5, b_again), 4);
  EXPECT_EQ(table_of(kv, 5), (Table{2, 3}));

  // Writing other tokens into the reused block never makes it match request 1's old tail.
  kv.cache_computed(3, std::vector<int32_t>{1, 2, 7, 7, 0, 0}, 6);
  kv.free(4);
  EXPECT_EQ(kv.acquire_cached_prefix(6, a_again), 2);
}

TEST(KvCacheManagerTest, FreedBlocksWithoutEntriesAreReusedBeforeCachedOnes) {
  KvCacheManager kv(4, 2, true);
  run_prompt(kv, 1, {1, 2, 3, 4});  // blocks 0, 1 cached
  kv.free(1);                       // queue: 2 3 1 0
  ASSERT_TRUE(kv.allocate(2, 3));   // blocks 2, 3; 3 only ever partial
  kv.cache_computed(2, std::vector<int32_t>{5, 6, 7}, 3);
  kv.free(2);  // 3 (no entry) to the front, 2 (cached) to the back: queue 3 1 0 2
  ASSERT_TRUE(kv.allocate(3, 2));
  EXPECT_EQ(table_of(kv, 3), (Table{3}));
  ASSERT_TRUE(kv.allocate(4, 2));
  EXPECT_EQ(table_of(kv, 4), (Table{1}));
}

TEST(KvCacheManagerTest, IdenticalBlockAlreadyCachedKeepsTheExistingOne) {
  KvCacheManager kv(16, 4, true);
  const auto prompt = iota_tokens(9);
  // Both run the prompt in the same step, before either has cached it.
  EXPECT_EQ(kv.acquire_cached_prefix(1, prompt), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(2, prompt), 0);
  ASSERT_TRUE(kv.allocate(1, 9));
  ASSERT_TRUE(kv.allocate(2, 9));
  kv.cache_computed(1, prompt, 9);
  kv.cache_computed(2, prompt, 9);
  EXPECT_EQ(table_of(kv, 1), (Table{0, 1, 2}));
  EXPECT_EQ(table_of(kv, 2), (Table{3, 4, 5}));  // not remapped

  EXPECT_EQ(kv.acquire_cached_prefix(3, prompt), 8);
  EXPECT_EQ(table_of(kv, 3), (Table{0, 1}));  // request 1's blocks

  // Request 2's next full block chains on the cached copy of its prefix.
  auto longer = iota_tokens(13);
  ASSERT_TRUE(kv.allocate(2, 12));
  kv.cache_computed(2, longer, 12);
  EXPECT_EQ(kv.acquire_cached_prefix(4, longer), 12);
  EXPECT_EQ(table_of(kv, 4), (Table{0, 1, 5}));

  // Request 2's duplicates carry no entry: freed, they are the first to be reused.
  kv.free(2);
  ASSERT_TRUE(kv.allocate(5, 8));
  EXPECT_EQ(table_of(kv, 5), (Table{3, 4}));
}

TEST(KvCacheManagerTest, HashCollisionsAreSettledByTokensAndParent) {
  KvCacheManager kv(16, 4, true, &colliding_hash);
  run_prompt(kv, 1, {1, 2, 3, 4, 5});  // block 0 registered under hash 42
  const std::vector<int32_t> other = {9, 9, 9, 9, 5};
  EXPECT_EQ(kv.acquire_cached_prefix(2, other), 0);  // same hash, other tokens
  ASSERT_TRUE(kv.allocate(2, 5));
  kv.cache_computed(2, other, 5);  // block 2 shares the bucket
  EXPECT_EQ(table_of(kv, 2), (Table{2, 3}));

  EXPECT_EQ(kv.acquire_cached_prefix(3, std::vector<int32_t>{9, 9, 9, 9, 1}), 4);
  EXPECT_EQ(table_of(kv, 3), (Table{2}));
  EXPECT_EQ(kv.acquire_cached_prefix(4, std::vector<int32_t>{1, 2, 3, 4, 1}), 4);
  EXPECT_EQ(table_of(kv, 4), (Table{0}));
  // Block 2's tokens and hash at position 1, but its parent is the root, not block 0.
  EXPECT_EQ(kv.acquire_cached_prefix(5, std::vector<int32_t>{1, 2, 3, 4, 9, 9, 9, 9, 1}), 4);
  EXPECT_EQ(table_of(kv, 5), (Table{0}));

  // Unregistering one block of a shared bucket keeps the other findable.
  for (RequestId id : {1, 3, 4, 5}) kv.free(id);
  kv.free(2);                           // queue: 3 1 4 5 ... 15 0 2 (blocks without an entry at the front)
  ASSERT_TRUE(kv.allocate(6, 4 * 15));  // every block but one: evicts block 0, keeps block 2
  EXPECT_EQ(kv.num_free_blocks(), 1);
  kv.free(6);
  EXPECT_EQ(kv.acquire_cached_prefix(7, std::vector<int32_t>{1, 2, 3, 4, 1}), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(8, other), 4);
  EXPECT_EQ(table_of(kv, 8), (Table{2}));
}

TEST(KvCacheManagerTest, HashChainsOverParentAndTokens) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const uint64_t h = KvCacheManager::hash_block(kRootBlockHash, tokens);
  EXPECT_EQ(h, KvCacheManager::hash_block(kRootBlockHash, tokens));
  EXPECT_NE(h, KvCacheManager::hash_block(h, tokens));
  EXPECT_NE(h, KvCacheManager::hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 4, 3}));
  EXPECT_NE(h, KvCacheManager::hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 3, 5}));
}

TEST(KvCacheManagerTest, DisabledPrefixCachingNeverHits) {
  KvCacheManager kv(8, 4, false);
  const auto prompt = iota_tokens(9);
  EXPECT_EQ(run_prompt(kv, 1, prompt), 0);
  EXPECT_EQ(run_prompt(kv, 2, prompt), 0);
  EXPECT_EQ(table_of(kv, 2), (Table{3, 4, 5}));
  kv.free(1);
  EXPECT_EQ(kv.acquire_cached_prefix(3, prompt), 0);
  EXPECT_TRUE(kv.block_table(3).empty());
  const auto stats = kv.stats();
  EXPECT_EQ(stats.prefix_queries_tokens, 0);
  EXPECT_EQ(stats.prefix_hit_tokens, 0);
  EXPECT_TRUE(kv.reset_prefix_cache());  // request 2 holds blocks, but none is cached
}

TEST(KvCacheManagerTest, StatsCountQueriesAndHits) {
  KvCacheManager kv(16, 4, true);
  run_prompt(kv, 1, iota_tokens(10));                          // 10 queried, 0 hit
  EXPECT_EQ(kv.acquire_cached_prefix(2, iota_tokens(10)), 8);  // 10 queried, 8 hit
  EXPECT_EQ(kv.acquire_cached_prefix(3, iota_tokens(6)), 4);   // 6 queried, 4 hit
  const auto stats = kv.stats();
  EXPECT_EQ(stats.num_blocks, 16);
  EXPECT_EQ(stats.num_free_blocks, 13);
  EXPECT_EQ(stats.prefix_queries_tokens, 26);
  EXPECT_EQ(stats.prefix_hit_tokens, 12);
  EXPECT_DOUBLE_EQ(stats.usage(), 3.0 / 16.0);
}

TEST(KvCacheManagerTest, ResetPrefixCacheDropsOnlyFreeBlocks) {
  KvCacheManager kv(16, 4, true);
  const auto a = iota_tokens(9, 1);
  const auto b = iota_tokens(9, 100);
  run_prompt(kv, 1, a);
  run_prompt(kv, 2, b);
  kv.free(1);
  EXPECT_FALSE(kv.reset_prefix_cache());  // request 2's blocks are held and keep their entries
  EXPECT_EQ(kv.acquire_cached_prefix(3, a), 0);
  EXPECT_EQ(kv.acquire_cached_prefix(4, b), 8);
  EXPECT_EQ(kv.num_free_blocks(), 13);  // reset frees nothing, it only forgets
  kv.free(2);
  kv.free(3);
  kv.free(4);
  EXPECT_TRUE(kv.reset_prefix_cache());
  EXPECT_EQ(kv.acquire_cached_prefix(5, b), 0);
  EXPECT_TRUE(kv.reset_prefix_cache());
}

TEST(KvCacheManagerTest, SameCallsGiveSameBlocks) {
  auto run = [] {
    KvCacheManager kv(12, 2, true);
    std::vector<Table> tables;
    for (RequestId id = 0; id < 12; ++id) {
      const auto prompt = iota_tokens(3 + id % 5, static_cast<int32_t>(id % 3));
      kv.acquire_cached_prefix(id, prompt);
      if (kv.allocate(id, static_cast<int64_t>(prompt.size())))
        kv.cache_computed(id, prompt, static_cast<int64_t>(prompt.size()));
      tables.push_back(table_of(kv, id));
      if (id % 2 == 1) kv.free(id - 1);
    }
    return tables;
  };
  EXPECT_EQ(run(), run());
}

// Random requests over a two-token vocabulary (so prefixes are shared often) against a shadow of
// what each block holds: every hit must hold exactly the prompt's prefix, and the reference counts
// and the free count must match the block tables.
void check_random_workload(BlockHasher hasher) {
  constexpr int64_t kNumBlocks = 24;
  constexpr int64_t kBlockSize = 2;
  KvCacheManager kv(kNumBlocks, kBlockSize, true, hasher);
  struct Live {
    std::vector<int32_t> tokens;  // prompt, then decoded tokens
    int64_t num_computed = 0;
    int64_t num_acquired_blocks = 0;
  };
  std::map<RequestId, Live> live;
  std::vector<std::vector<int32_t>> written(kNumBlocks);  // [block] the prefix whose K/V it holds
  // Newly allocated blocks are about to be overwritten: forget what they held.
  auto allocate = [&](RequestId id, int64_t num_tokens) {
    const size_t old_size = kv.block_table(id).size();
    if (!kv.allocate(id, num_tokens)) return false;
    const auto table = kv.block_table(id);
    for (size_t i = old_size; i < table.size(); ++i) written[table[i]].clear();
    return true;
  };
  std::mt19937 rng(7);
  int64_t total_hits = 0;
  for (RequestId next_id = 0; next_id < 3000;) {
    const int op = static_cast<int>(rng() % 8);
    if (op < 3 || live.empty()) {  // admit a new request
      const RequestId id = next_id++;
      std::vector<int32_t> prompt(1 + rng() % 9);
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % 2);
      const int64_t hit = kv.acquire_cached_prefix(id, prompt);
      const auto table = kv.block_table(id);
      ASSERT_EQ(hit, static_cast<int64_t>(table.size()) * kBlockSize);
      ASSERT_LT(hit, static_cast<int64_t>(prompt.size()));
      for (size_t i = 0; i < table.size(); ++i) {
        ASSERT_EQ(written[table[i]], std::vector<int32_t>(prompt.begin(), prompt.begin() + (i + 1) * kBlockSize))
            << "request " << id << " block " << i;
      }
      total_hits += hit;
      if (!allocate(id, static_cast<int64_t>(prompt.size()))) {
        kv.free(id);
        continue;
      }
      live[id] = {prompt, hit, static_cast<int64_t>(table.size())};
    } else if (op < 6) {  // compute some tokens of a random request, decoding one if all are done
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      auto& [id, r] = *it;
      if (r.num_computed == static_cast<int64_t>(r.tokens.size())) {
        if (!allocate(id, r.num_computed + 1)) continue;
        r.tokens.push_back(static_cast<int32_t>(rng() % 2));
      }
      r.num_computed += 1 + static_cast<int64_t>(rng() % (r.tokens.size() - r.num_computed));
      kv.cache_computed(id, r.tokens, r.num_computed);
      const auto table = kv.block_table(id);
      for (int64_t i = r.num_acquired_blocks; i < r.num_computed / kBlockSize; ++i)
        written[table[i]].assign(r.tokens.begin(), r.tokens.begin() + (i + 1) * kBlockSize);
    } else if (op < 7) {
      const auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      kv.free(it->first);
      live.erase(it);
    } else if (rng() % 16 == 0) {
      kv.reset_prefix_cache();
    }
    std::vector<int64_t> refs(kNumBlocks, 0);
    for (const auto& [id, r] : live) {
      for (int32_t b : kv.block_table(id)) ++refs[b];
    }
    int64_t num_free = 0;
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      ASSERT_EQ(kv.ref_count(b), refs[b]) << "block " << b;
      num_free += refs[b] == 0;
    }
    ASSERT_EQ(kv.num_free_blocks(), num_free);
  }
  EXPECT_GT(total_hits, 1000);  // the workload does exercise the cache
}

TEST(KvCacheManagerTest, RandomWorkloadKeepsCountsAndNeverHitsWrongly) {
  check_random_workload(&KvCacheManager::hash_block);
}

TEST(KvCacheManagerTest, RandomWorkloadWithCollidingHashNeverHitsWrongly) { check_random_workload(&colliding_hash); }

TEST(KvCacheManagerTest, MisuseIsAnInternalError) {
  KvCacheManager kv(8, 4, true);
  ASSERT_TRUE(kv.allocate(1, 4));
  error_message([&] { kv.acquire_cached_prefix(1, iota_tokens(8)); }, ErrorCode::kInternal);
  error_message([&] { kv.cache_computed(1, iota_tokens(8), 8); }, ErrorCode::kInternal);  // 4-token table
  error_message([&] { kv.cache_computed(1, iota_tokens(2), 3); }, ErrorCode::kInternal);
  error_message([&] { kv.cache_computed(2, iota_tokens(2), 2); }, ErrorCode::kInternal);
  error_message([&] { kv.allocate(1, -1); }, ErrorCode::kInternal);
  error_message([&] { kv.ref_count(8); }, ErrorCode::kInvalidArgument);
  EXPECT_EQ(table_of(kv, 1), (Table{0}));
}

}  // namespace
}  // namespace ditto
