// The server's lifetime: a stop or drain that comes at any moment after bind() — before listen(),
// while it starts, or while it serves — makes listen() return (a SIGTERM sent right after the
// port is printed once left `ditto serve` running until it was killed).
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include "../../tests/tiny_model.h"
#include "core/test_support.h"
#include "engine/llm_engine.h"

namespace ditto {
namespace {

using testing::TempDir;

class HttpServerLifetimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_tiny_model(*dir_, "qwen3");
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      std::filesystem::copy_file(std::string(DITTO_QWEN3_TOKENIZER_DIR) + "/" + f, dir_->file(f));
    EngineArgs o;
    o.model = dir_->path().string();
    o.threads = 1;
    o.kv_cache_memory = 4 << 20;
    llm_ = new LLMEngine(o);
  }
  static void TearDownTestSuite() {
    delete llm_;
    delete dir_;
  }
  static ServerOptions options() {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "tiny";
    o.http_threads = 4;
    return o;
  }
  // Runs listen() on its own thread; true when it returned within 20 s.
  static bool listen_returns(HttpServer& server, const std::function<void()>& stopper) {
    std::packaged_task<void()> task([&server] { server.listen(); });
    std::future<void> done = task.get_future();
    std::thread listener(std::move(task));
    stopper();
    const bool returned = done.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    if (!returned) server.stop();  // one more try, so that the test ends either way
    listener.join();
    return returned;
  }
  static TempDir* dir_;
  static LLMEngine* llm_;
};
TempDir* HttpServerLifetimeTest::dir_ = nullptr;
LLMEngine* HttpServerLifetimeTest::llm_ = nullptr;

TEST_F(HttpServerLifetimeTest, StopBeforeListenMakesListenReturn) {
  HttpServer server(*llm_, options());
  ASSERT_GT(server.bind(), 0);
  server.stop();
  EXPECT_TRUE(listen_returns(server, [] {}));
}

TEST_F(HttpServerLifetimeTest, DrainAtAnyMomentAroundListenStartMakesListenReturn) {
  // The drain lands before, during and after listen()'s start, over many tries.
  for (int delay_us : {0, 0, 0, 1, 5, 20, 50, 100, 200, 500, 1000, 5000}) {
    HttpServer server(*llm_, options());
    ASSERT_GT(server.bind(), 0);
    EXPECT_TRUE(listen_returns(server,
                               [&server, delay_us] {
                                 std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
                                 server.drain(1);
                               }))
        << "drain " << delay_us << " us after listen() was started";
  }
}

TEST_F(HttpServerLifetimeTest, StopWhileServingMakesListenReturn) {
  HttpServer server(*llm_, options());
  ASSERT_GT(server.bind(), 0);
  EXPECT_TRUE(listen_returns(server, [&server] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server.stop();
  }));
}

}  // namespace
}  // namespace ditto
