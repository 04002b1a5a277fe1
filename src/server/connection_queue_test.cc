#include "server/connection_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "core/error.h"

namespace ditto {
namespace {

using namespace std::chrono_literals;

// Polls `done` for up to 10 s.
template <typename F>
bool eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(ConnectionQueueTest, ServesUpToItsThreadsHoldsUpToItsLimitAndRefusesBeyond) {
  ConnectionQueue q(/*max_threads=*/2, /*max_connections=*/3, /*idle_timeout=*/50ms);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> served{0}, refused{0}, running{0};
  auto connection = [&] {
    if (ConnectionQueue::refusing()) {
      ++refused;
      return;
    }
    ++running;
    released.wait();
    --running;
    ++served;
  };
  for (int i = 0; i < 3; ++i) q.enqueue(connection);  // 2 served, 1 waiting for a thread
  ASSERT_TRUE(eventually([&] { return running.load() == 2; }));
  EXPECT_EQ(q.threads(), 2u);
  EXPECT_EQ(q.held(), 3u);
  q.enqueue(connection);  // the 4th: beyond max_connections
  q.enqueue(connection);  // the 5th too
  ASSERT_TRUE(eventually([&] { return refused.load() == 2; }));
  EXPECT_EQ(q.refused(), 2u);
  EXPECT_FALSE(ConnectionQueue::refusing());  // only on the refusal thread
  release.set_value();
  ASSERT_TRUE(eventually([&] { return served.load() == 3; }));
  // Idle threads go away, and come back when connections do.
  ASSERT_TRUE(eventually([&] { return q.threads() == 0; }));
  EXPECT_EQ(q.held(), 0u);
  q.enqueue(connection);
  ASSERT_TRUE(eventually([&] { return served.load() == 4; }));
  q.shutdown();
  EXPECT_EQ(q.threads(), 0u);
  EXPECT_EQ(refused.load(), 2);
}

TEST(ConnectionQueueTest, ShutdownServesWhatWasHandedOver) {
  std::atomic<int> served{0};
  {
    ConnectionQueue q(1, 100, std::chrono::seconds(60));
    for (int i = 0; i < 20; ++i)
      q.enqueue([&] {
        std::this_thread::sleep_for(1ms);
        ++served;
      });
    q.shutdown();
    EXPECT_EQ(served.load(), 20);
    EXPECT_EQ(q.threads(), 0u);
  }
}

TEST(ConnectionQueueTest, RefusesImpossibleLimits) {
  EXPECT_THROW(ConnectionQueue(0, 10, 1s), Error);
  EXPECT_THROW(ConnectionQueue(4, 3, 1s), Error);
}

}  // namespace
}  // namespace ditto
