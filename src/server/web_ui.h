// The web page `ditto serve` shows at `/` (web/: TypeScript built by Vite into web/dist, which the
// build embeds in the binary, so the page works offline and from the Python package): a chat
// playground, the invariance contract live, and the server's state. The page itself is public
// under --api-key (it asks for the key; every route it calls still needs it); --disable-web-ui
// turns it off.
#pragma once

#include <span>
#include <string_view>

namespace ditto {

/** One file of the built page, embedded at build time (cmake/EmbedWebAssets.cmake). */
struct WebAsset {
  std::string_view path;          // URL path under the server's root, e.g. "/assets/app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;          // the file's bytes
};

/** Every embedded file, sorted by path (generated source). */
std::span<const WebAsset> web_assets();

/**
 * The file served at `path` (already stripped of --root-path): "/" and "/index.html" give the page;
 * nullptr when the path is not one of the page's files.
 */
const WebAsset* find_web_asset(std::string_view path);

/**
 * The Content-Security-Policy the page is served with: everything from the server itself, nothing
 * from anywhere else (no CDN, no external request), no inline script.
 */
std::string_view web_ui_content_security_policy();

}  // namespace ditto
