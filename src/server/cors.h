// Cross-origin requests as vLLM answers them: its CORSMiddleware (Starlette's) with the flags
// --allowed-origins, --allowed-methods, --allowed-headers and --allow-credentials, whose defaults
// ("*", "*", "*", off) let any page call the server. A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered here, before the API key is checked: browsers send
// it without credentials. Stateless; safe from any thread.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace ditto {

struct CorsOptions {
  std::vector<std::string> allowed_origins = {"*"};  // "*": any origin
  std::vector<std::string> allowed_methods = {"*"};  // "*": any method
  std::vector<std::string> allowed_headers = {"*"};  // "*": any header
  bool allow_credentials = false;                    // Access-Control-Allow-Credentials: true
};

// OPTIONS with an Origin and an Access-Control-Request-Method header. A bare OPTIONS is not one,
// and meets the API key like any other request.
bool is_cors_preflight(const httplib::Request& req);

// Answers a preflight as Starlette's CORSMiddleware does: 200 "OK" with the Access-Control-Allow-*
// headers, or 400 "Disallowed CORS origin, method, headers" naming what was refused.
void answer_cors_preflight(const CorsOptions& cors, const httplib::Request& req, httplib::Response& res);

// Any other request with an Origin header: Access-Control-Allow-Origin ("*", or the origin itself
// when it is listed or credentials are allowed) and Access-Control-Allow-Credentials.
void add_cors_headers(const CorsOptions& cors, const httplib::Request& req, httplib::Response& res);

}  // namespace ditto
