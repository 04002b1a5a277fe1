#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    for (size_t n : {0u, 1u, 2u, 5u, 64u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadPoolTest, RethrowsWorkerExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(10,
                                 [](size_t b, size_t) {
                                   if (b > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // The pool is still usable afterwards.
  std::atomic<int> count{0};
  pool.parallel_for(10, [&](size_t b, size_t e) { count += static_cast<int>(e - b); });
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPoolTest, RejectsThreadCountsOutsideTheRange) {
  for (int n : {0, -1, ThreadPool::kMaxThreads + 1, 100000000}) {
    try {
      ThreadPool pool(n);
      FAIL() << n;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos);
    }
  }
}

TEST(ThreadPoolTest, DynamicChunksCoverEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{97}, size_t{1000}}) {
      for (size_t grain : {size_t{0}, size_t{1}, size_t{7}, size_t{2000}}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for_dynamic(n, grain, [&](size_t b, size_t e) {
          EXPECT_LT(b, e);
          if (threads > 1) {
            EXPECT_LE(e - b, std::max<size_t>(grain, 1));  // one thread: one call
          }
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n << " grain " << grain << " i " << i;
      }
    }
  }
}

TEST(ThreadPoolTest, DynamicChunksRethrowWorkerExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for_dynamic(100, 3,
                                         [](size_t b, size_t) {
                                           if (b >= 50) throw Error(ErrorCode::kInternal, "boom");
                                         }),
               Error);
  // The pool still works afterwards.
  std::atomic<int> count{0};
  pool.parallel_for_dynamic(10, 1, [&](size_t b, size_t e) { count += static_cast<int>(e - b); });
  EXPECT_EQ(count.load(), 10);
}

}  // namespace
}  // namespace ditto
