#include "server/web_ui.h"

#include <algorithm>

namespace ditto {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  const std::span<const WebAsset> assets = web_assets();
  const auto it = std::find_if(assets.begin(), assets.end(), [&](const WebAsset& a) { return a.path == path; });
  return it == assets.end() ? nullptr : &*it;
}

std::string_view web_ui_content_security_policy() {
  return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
         "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

}  // namespace ditto
