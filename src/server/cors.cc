#include "server/cors.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace ditto {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

bool has_star(const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), "*") != v.end(); }

bool origin_allowed(const CorsOptions& cors, const std::string& origin) {
  return has_star(cors.allowed_origins) ||
         std::find(cors.allowed_origins.begin(), cors.allowed_origins.end(), origin) != cors.allowed_origins.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The origin to allow: "*" for any origin without credentials, else the request's own (Starlette
// echoes it when credentials are allowed, since browsers refuse "*" with them).
void allow_origin(const CorsOptions& cors, const std::string& origin, httplib::Response& res) {
  if (has_star(cors.allowed_origins) && !cors.allow_credentials) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (cors.allow_credentials) res.set_header("Access-Control-Allow-Credentials", "true");
}

}  // namespace

bool is_cors_preflight(const httplib::Request& req) {
  return req.method == "OPTIONS" && req.has_header("Origin") && req.has_header("Access-Control-Request-Method");
}

void answer_cors_preflight(const CorsOptions& cors, const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  const std::string method = req.get_header_value("Access-Control-Request-Method");
  const std::string requested_headers = req.get_header_value("Access-Control-Request-Headers");
  std::vector<std::string> failures;
  if (!origin_allowed(cors, origin)) failures.push_back("origin");
  if (!has_star(cors.allowed_methods) &&
      std::find(cors.allowed_methods.begin(), cors.allowed_methods.end(), method) == cors.allowed_methods.end())
    failures.push_back("method");
  // Starlette always allows the CORS-safelisted request headers.
  std::set<std::string> headers = {"accept", "accept-language", "content-language", "content-type"};
  for (const std::string& h : cors.allowed_headers) headers.insert(lower(h));
  if (!has_star(cors.allowed_headers)) {
    std::stringstream s(requested_headers);
    for (std::string h; std::getline(s, h, ',');)
      if (!trim(h).empty() && !headers.contains(lower(trim(h)))) {
        failures.push_back("headers");
        break;
      }
  }
  if (!failures.empty()) {
    res.status = 400;
    res.set_content("Disallowed CORS " + join(failures), "text/plain; charset=utf-8");
    return;
  }
  allow_origin(cors, origin, res);
  res.set_header("Access-Control-Allow-Methods", has_star(cors.allowed_methods)
                                                     ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
                                                     : join(cors.allowed_methods));
  res.set_header("Access-Control-Max-Age", "600");
  if (has_star(cors.allowed_headers)) {
    if (!requested_headers.empty()) res.set_header("Access-Control-Allow-Headers", requested_headers);
  } else {
    res.set_header("Access-Control-Allow-Headers", join({headers.begin(), headers.end()}));
  }
  res.status = 200;
  res.set_content("OK", "text/plain; charset=utf-8");
}

void add_cors_headers(const CorsOptions& cors, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Origin")) return;
  const std::string origin = req.get_header_value("Origin");
  if (origin_allowed(cors, origin)) allow_origin(cors, origin, res);
}

}  // namespace ditto
