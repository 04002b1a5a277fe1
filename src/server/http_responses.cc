#include "server/http_responses.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string_view>

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

}  // namespace

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void AccessRecord::finished(const std::string& reason) {
  if (!reason.empty() && std::find(finish_reasons.begin(), finish_reasons.end(), reason) == finish_reasons.end())
    finish_reasons.push_back(reason);
}

void AccessRecord::end_response() {
  if (!stream_open) return;
  stream_open = false;
  client_closed = true;
  error = "the client disconnected before the stream's end";
  if (stream_running) finished("abort");
}

AccessRecord& access_record() {
  thread_local AccessRecord record;
  return record;
}

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  access_record().error = e.what();
  send_json(res, e.status(), e.body());
}

void log_access(const std::string& format, const httplib::Request& req, const httplib::Response& res) {
  const AccessRecord& a = access_record();
  const double latency_ms =
      a.start ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - *a.start).count() : -1.0;
  std::string finish;
  for (const std::string& r : a.finish_reasons) finish += (finish.empty() ? "" : ",") + r;
  std::string line;
  if (format == "json") {
    nlohmann::ordered_json j = {{"time", log_time()},
                                {"remote", req.remote_addr + ":" + std::to_string(req.remote_port)},
                                {"method", req.method},
                                {"path", req.path},
                                {"status", a.status(res)}};
    if (!a.request_id.empty()) j["request_id"] = a.request_id;
    if (a.prompt_tokens >= 0) j["prompt_tokens"] = a.prompt_tokens;
    if (a.completion_tokens >= 0) j["completion_tokens"] = a.completion_tokens;
    if (!finish.empty()) j["finish_reason"] = finish;
    if (latency_ms >= 0) j["latency_ms"] = std::round(latency_ms * 10) / 10;
    if (a.status(res) >= 400) j["error"] = a.error;
    line = dump_json(j);
  } else {
    char head[64];
    std::snprintf(head, sizeof head, "\" %d", a.status(res));
    line = "ditto serve: " + req.remote_addr + ":" + std::to_string(req.remote_port) + " \"" + req.method + " " +
           req.path + head;
    if (!a.request_id.empty()) line += " id=" + a.request_id;
    if (a.prompt_tokens >= 0) line += " prompt_tokens=" + std::to_string(a.prompt_tokens);
    if (a.completion_tokens >= 0) line += " completion_tokens=" + std::to_string(a.completion_tokens);
    if (!finish.empty()) line += " finish_reason=" + finish;
    if (latency_ms >= 0) {
      char ms[32];
      std::snprintf(ms, sizeof ms, " latency_ms=%.1f", latency_ms);
      line += ms;
    }
    if (a.status(res) >= 400)
      line += " error=" + nlohmann::json(a.error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines from threads do not interleave
}

std::string http_reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Request Entity Too Large";
    case 414: return "Request-URI Too Long";
    case 415: return "Unsupported Media Type";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "HTTP " + std::to_string(status);
  }
}

std::optional<ApiError> json_content_type_error(const httplib::Request& req) {
  std::string media_type = req.get_header_value("Content-Type");
  media_type = media_type.substr(0, media_type.find(';'));
  std::transform(media_type.begin(), media_type.end(), media_type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (media_type == "application/json") return std::nullopt;
  // vLLM's validate_json_request raises a RequestValidationError, which its handler answers as a
  // 400 "Bad Request" listing the one error.
  return ApiError(400, http_reason_phrase(400),
                  "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed");
}

std::optional<ApiError> framing_error(const httplib::Request& req, int64_t max_body_bytes, bool bodiless_post_ok) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths > 1) return ApiError(400, http_reason_phrase(400), "more than one Content-Length header");
  if (lengths == 1) {
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return ApiError(400, http_reason_phrase(400), "Content-Length '" + v + "' is not a byte count");
    if (std::stoull(v) > static_cast<uint64_t>(max_body_bytes))
      return ApiError(413, http_reason_phrase(413),
                      "the request body (" + v +
                          " bytes) is larger than the server accepts "
                          "(--max-request-body-bytes " +
                          std::to_string(max_body_bytes) + ")");
  } else if (req.method == "POST" && !req.has_header("Transfer-Encoding") && !bodiless_post_ok) {
    return ApiError(411, http_reason_phrase(411), "a POST needs a Content-Length header or a chunked body");
  }
  return std::nullopt;
}

std::optional<ApiError> read_body(const httplib::ContentReader& reader, int64_t max_body_bytes, std::string& body) {
  const auto limit = static_cast<size_t>(max_body_bytes);
  bool too_large = false;
  size_t dropped = 0;
  const bool ok = reader([&](const char* data, size_t n) {
    if (too_large || body.size() + n > limit) {
      too_large = true;
      body.clear();
      body.shrink_to_fit();
      dropped += n;
      return dropped <= (size_t{64} << 20);
    }
    body.append(data, n);
    return true;
  });
  if (too_large) return body_too_large(max_body_bytes);
  if (!ok) return ApiError(400, http_reason_phrase(400), "could not read the request body");
  return std::nullopt;
}

ApiError body_too_large(int64_t max_body_bytes) {
  return ApiError(413, http_reason_phrase(413),
                  "the request body is larger than the server accepts (--max-request-body-bytes " +
                      std::to_string(max_body_bytes) + ")");
}

ApiError http_status_error(const httplib::Request& req, int status) {
  switch (status) {
    case 413:
      return ApiError(413, http_reason_phrase(413),
                      "the request body is larger than the server accepts (--max-request-body-bytes)");
    case 404: return ApiError(404, http_reason_phrase(404), "no route " + req.method + " " + req.path);
    case 400:
      return ApiError(400, http_reason_phrase(400),
                      "malformed HTTP request (request line, headers or chunked framing)");
    case 414: return ApiError(414, http_reason_phrase(414), "the request path is too long");
    default: return ApiError(status, http_reason_phrase(status), "HTTP error " + std::to_string(status));
  }
}

std::string regex_escape(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::string route_pattern(const std::string& root_path, const std::string& path) {
  if (root_path.empty()) return path;
  return "(?:" + regex_escape(root_path) + ")?" + path;
}

std::string strip_root_path(const std::string& root_path, const std::string& path) {
  if (root_path.empty() || path.rfind(root_path, 0) != 0) return path;
  if (path.size() > root_path.size() && path[root_path.size()] != '/') return path;  // "/llmx" is not under "/llm"
  return path.size() == root_path.size() ? "/" : path.substr(root_path.size());
}

void refuse_other_methods(httplib::Server& server, const std::string& root_path,
                          const std::vector<std::pair<std::string, std::string>>& routes) {
  for (const auto& [plain_path, allowed] : routes) {
    const std::string path = route_pattern(root_path, plain_path);
    auto refuse = [allowed = allowed](const httplib::Request& req, httplib::Response& res) {
      send_error(res, ApiError(405, http_reason_phrase(405),
                               req.method + " is not allowed on " + req.path + "; use " + allowed));
      res.set_header("Allow", allowed);
    };
    if (allowed == "POST")
      server.Get(path, refuse);
    else
      server.Post(path, refuse);
    server.Put(path, refuse);
    server.Delete(path, refuse);
    server.Patch(path, refuse);
  }
}

}  // namespace ditto
