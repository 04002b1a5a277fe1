// The server's lifetime: a stop or drain that comes at any moment after bind() — before listen(),
// while it starts, or while it serves — makes listen() return (a SIGTERM sent right after the
// port is printed once left `ditto serve` running until it was killed).
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

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

// vLLM's AuthenticationMiddleware rule (vLLM main, PR #58028): only the liveness probes are open.
TEST(HttpServerRoutesTest, OnlyLivenessProbesAreOpenUnderAnApiKey) {
  for (const char* open : {"/health", "/health/", "/ping", "/load", "/version"})
    EXPECT_FALSE(path_needs_api_key(open)) << open;
  for (const char* guarded : {"/v1/models", "/v1/models/", "/tokenize", "/detokenize", "/metrics", "/invocations",
                              "/tokenizer_info", "/healthcheck", "/", "/nowhere"})
    EXPECT_TRUE(path_needs_api_key(guarded)) << guarded;
}

// Serving: the API key, CORS preflights, --root-path, the Content-Type check, /ping and
// /v1/models/{model}, over HTTP.
TEST_F(HttpServerLifetimeTest, VllmRoutesAuthenticationAndRootPath) {
  ServerOptions o = options();
  o.api_key = "k";
  o.root_path = "/llm";
  o.enable_request_id_headers = true;
  o.model_path = "/secret/place/of/the/model";
  HttpServer server(*llm_, o);
  const int port = server.bind();
  ASSERT_GT(port, 0);
  EXPECT_TRUE(listen_returns(server, [&server, port] {
    httplib::Client c("127.0.0.1", port);
    const httplib::Headers key = {{"Authorization", "Bearer k"}};
    EXPECT_EQ(c.Get("/health")->status, 200);
    EXPECT_EQ(c.Get("/llm/ping")->status, 200);
    EXPECT_EQ(c.Post("/ping", "", "application/json")->status, 200);
    EXPECT_EQ(c.Get("/metrics")->status, 401);
    auto unauthorized = c.Post("/tokenize", R"({"prompt": "hi"})", "application/json");
    EXPECT_EQ(unauthorized->status, 401);
    EXPECT_EQ(nlohmann::json::parse(unauthorized->body)["error"]["code"], 401);
    EXPECT_EQ(c.Get("/metrics", key)->status, 200);
    EXPECT_EQ(c.Get("/llm/v1/models", key)->status, 200);
    EXPECT_EQ(c.Get("/llm/v1/models")->status, 401);
    // A preflight carries no key and gets the CORS answer; a bare OPTIONS meets the key.
    auto pre = c.Options("/v1/models", {{"Origin", "http://page"}, {"Access-Control-Request-Method", "GET"}});
    EXPECT_EQ(pre->status, 200);
    EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
    EXPECT_EQ(c.Options("/v1/models")->status, 401);
    // One model's card; an unknown one is vLLM's 404, without the model's path on this machine.
    auto card = c.Get("/v1/models/tiny", key);
    EXPECT_EQ(card->status, 200);
    EXPECT_EQ(nlohmann::json::parse(card->body)["id"], "tiny");
    auto unknown = c.Get("/v1/models/other", key);
    EXPECT_EQ(unknown->status, 404);
    const auto err = nlohmann::json::parse(unknown->body)["error"];
    EXPECT_EQ(err["type"], "NotFoundError");
    EXPECT_EQ(err["code"], 404);
    EXPECT_EQ(err["message"], "The model `other` does not exist.");
    EXPECT_EQ(unknown->body.find("/secret/place"), std::string::npos);
    // A JSON route refuses another Content-Type, as vLLM's validate_json_request.
    for (const char* type : {"application/x-www-form-urlencoded", "text/plain"}) {
      auto wrong = c.Post("/tokenize", key, R"({"prompt": "hi"})", type);
      EXPECT_EQ(wrong->status, 400) << type;
      EXPECT_NE(wrong->body.find("Only 'application/json' is allowed"), std::string::npos) << wrong->body;
    }
    auto ok = c.Post("/llm/tokenize", key, R"({"prompt": "hi"})", "application/json; charset=utf-8");
    EXPECT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(ok->get_header_value("X-Request-Id").size(), 32u);
    httplib::Headers with_id = key;
    with_id.emplace("X-Request-Id", "mine");
    EXPECT_EQ(c.Get("/v1/models", with_id)->get_header_value("X-Request-Id"), "mine");
    server.stop();
  }));
}

// The web page: served at / and under --root-path with its security headers, open under an API key
// while the routes it calls are not; --disable-web-ui serves nothing there.
TEST_F(HttpServerLifetimeTest, WebPageIsServedOpenUnderAnApiKeyAndCanBeTurnedOff) {
  ServerOptions o = options();
  o.api_key = "k";
  o.root_path = "/llm";
  HttpServer server(*llm_, o);
  const int port = server.bind();
  ASSERT_GT(port, 0);
  EXPECT_TRUE(listen_returns(server, [&server, port] {
    httplib::Client c("127.0.0.1", port);
    for (const char* path : {"/", "/llm/", "/index.html"}) {
      auto page = c.Get(path);
      ASSERT_TRUE(page) << path;
      EXPECT_EQ(page->status, 200) << path;
      EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8") << path;
      EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
      EXPECT_NE(page->body.find("<title>ditto</title>"), std::string::npos) << path;
    }
    auto script = c.Get("/llm/assets/app.js");
    EXPECT_EQ(script->status, 200);
    EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
    auto bare = c.Get("/llm");
    EXPECT_EQ(bare->status, 301);
    EXPECT_EQ(bare->get_header_value("Location"), "/llm/");
    EXPECT_EQ(c.Get("/v1/models")->status, 401);
    EXPECT_EQ(c.Get("/metrics")->status, 401);
    EXPECT_EQ(c.Get("/assets/other.js")->status, 401);
    server.stop();
  }));
  ServerOptions off = options();
  off.enable_web_ui = false;
  HttpServer without(*llm_, off);
  const int port_off = without.bind();
  ASSERT_GT(port_off, 0);
  EXPECT_TRUE(listen_returns(without, [&without, port_off] {
    httplib::Client c("127.0.0.1", port_off);
    EXPECT_EQ(c.Get("/")->status, 404);
    EXPECT_EQ(c.Get("/assets/app.js")->status, 404);
    EXPECT_EQ(c.Get("/health")->status, 200);
    without.stop();
  }));
}

}  // namespace
}  // namespace ditto
