// vLLM's CORS behaviour (Starlette's CORSMiddleware) with its defaults and with lists.
#include "server/cors.h"

#include <gtest/gtest.h>

namespace ditto {
namespace {

httplib::Request preflight(const std::string& origin, const std::string& method, const std::string& headers = "") {
  httplib::Request req;
  req.method = "OPTIONS";
  req.path = "/v1/models";
  req.headers.emplace("Origin", origin);
  req.headers.emplace("Access-Control-Request-Method", method);
  if (!headers.empty()) req.headers.emplace("Access-Control-Request-Headers", headers);
  return req;
}

TEST(CorsTest, APreflightNeedsOriginAndRequestMethod) {
  EXPECT_TRUE(is_cors_preflight(preflight("http://a", "GET")));
  httplib::Request bare;
  bare.method = "OPTIONS";
  EXPECT_FALSE(is_cors_preflight(bare));
  bare.headers.emplace("Access-Control-Request-Method", "GET");
  EXPECT_FALSE(is_cors_preflight(bare));  // no Origin: not a preflight
}

TEST(CorsTest, DefaultsAllowAnyOriginMethodAndHeader) {
  httplib::Response res;
  answer_cors_preflight(CorsOptions{}, preflight("http://a", "POST", "Authorization, X-Custom"), res);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Headers"), "Authorization, X-Custom");
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Methods"), "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_FALSE(res.has_header("Access-Control-Allow-Credentials"));
}

TEST(CorsTest, ListsRefuseWhatTheyDoNotName) {
  CorsOptions cors;
  cors.allowed_origins = {"http://a"};
  cors.allowed_methods = {"GET"};
  cors.allowed_headers = {"authorization"};
  cors.allow_credentials = true;
  httplib::Response ok;
  answer_cors_preflight(cors, preflight("http://a", "GET", "Authorization, Content-Type"), ok);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.get_header_value("Access-Control-Allow-Origin"), "http://a");  // echoed with credentials
  EXPECT_EQ(ok.get_header_value("Access-Control-Allow-Credentials"), "true");
  httplib::Response bad;
  answer_cors_preflight(cors, preflight("http://b", "POST", "X-Other"), bad);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body, "Disallowed CORS origin, method, headers");
}

TEST(CorsTest, SimpleRequestsGetTheOriginHeaderOnlyWhenAllowed) {
  CorsOptions cors;
  cors.allowed_origins = {"http://a"};
  httplib::Request req;
  req.method = "GET";
  req.headers.emplace("Origin", "http://b");
  httplib::Response res;
  add_cors_headers(cors, req, res);
  EXPECT_FALSE(res.has_header("Access-Control-Allow-Origin"));
  httplib::Request any;
  any.headers.emplace("Origin", "http://b");
  add_cors_headers(CorsOptions{}, any, res);
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "*");
}

}  // namespace
}  // namespace ditto
