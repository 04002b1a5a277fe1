#include "server/web_ui.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "server/http_server.h"

namespace ditto {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file of web/dist is embedded byte for byte, under its path, and nothing else is.
TEST(WebUiTest, EmbedsEveryFileOfTheBuiltPageByteForByte) {
  const std::filesystem::path dist = DITTO_WEB_DIST_DIR;
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dist)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    std::string path = "/";
    path.append(std::filesystem::relative(entry.path(), dist).generic_string());
    const WebAsset* asset = find_web_asset(path);
    ASSERT_NE(asset, nullptr) << path;
    EXPECT_TRUE(asset->body == read_file(entry.path())) << path << ": the binary holds another version";
  }
  EXPECT_EQ(web_assets().size(), files);
  EXPECT_GE(files, 3u);  // index.html, its script and its style sheet
}

TEST(WebUiTest, RootIsThePageAndEveryFileItLoadsIsEmbedded) {
  const WebAsset* root = find_web_asset("/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root, find_web_asset("/index.html"));
  EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
  const std::string html(root->body);
  const std::regex ref(R"#((?:src|href)="([^"]*)")#");
  int local = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
    const std::string url = (*it)[1];
    if (url.rfind("data:", 0) == 0) continue;
    EXPECT_EQ(url.find("//"), std::string::npos) << "the page loads " << url << " from another host";
    ASSERT_EQ(url.rfind("./", 0), 0u) << url << ": the page's URLs must be relative (--root-path)";
    EXPECT_NE(find_web_asset(url.substr(1)), nullptr) << url;
    ++local;
  }
  EXPECT_GE(local, 2);
  EXPECT_EQ(find_web_asset("/nowhere.js"), nullptr);
  EXPECT_EQ(find_web_asset("/v1/models"), nullptr);
}

TEST(WebUiTest, ThePageIsOpenUnderAnApiKeyAndNothingElseIs) {
  EXPECT_FALSE(path_needs_api_key("/", true));
  EXPECT_FALSE(path_needs_api_key("/index.html", true));
  EXPECT_FALSE(path_needs_api_key(std::string(web_assets()[0].path), true));
  for (const char* guarded : {"/v1/models", "/metrics", "/v1/chat/completions", "/assets/", "/assets/x.js"})
    EXPECT_TRUE(path_needs_api_key(guarded, true)) << guarded;
  EXPECT_TRUE(path_needs_api_key("/", false));
}

TEST(WebUiTest, ContentSecurityPolicyAllowsOnlyTheServerItself) {
  const std::string csp(web_ui_content_security_policy());
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("http"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
}

}  // namespace
}  // namespace ditto
