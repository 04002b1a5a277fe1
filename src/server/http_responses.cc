#include "server/http_responses.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

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

std::optional<ApiError> framing_error(const httplib::Request& req, int64_t max_body_bytes) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths > 1) return ApiError(400, "invalid_request_error", "more than one Content-Length header");
  if (lengths == 1) {
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return ApiError(400, "invalid_request_error", "Content-Length '" + v + "' is not a byte count");
    if (std::stoull(v) > static_cast<uint64_t>(max_body_bytes))
      return ApiError(413, "invalid_request_error",
                      "the request body (" + v +
                          " bytes) is larger than the server accepts "
                          "(--max-request-body-bytes " +
                          std::to_string(max_body_bytes) + ")");
  } else if (req.method == "POST" && !req.has_header("Transfer-Encoding")) {
    return ApiError(411, "invalid_request_error", "a POST needs a Content-Length header or a chunked body");
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
  if (!ok) return ApiError(400, "invalid_request_error", "could not read the request body");
  return std::nullopt;
}

ApiError body_too_large(int64_t max_body_bytes) {
  return ApiError(413, "invalid_request_error",
                  "the request body is larger than the server accepts (--max-request-body-bytes " +
                      std::to_string(max_body_bytes) + ")");
}

ApiError http_status_error(const httplib::Request& req, int status) {
  switch (status) {
    case 413:
      return ApiError(413, "invalid_request_error",
                      "the request body is larger than the server accepts (--max-request-body-bytes)");
    case 404: return ApiError(404, "invalid_request_error", "no route " + req.method + " " + req.path);
    case 400:
      return ApiError(400, "invalid_request_error",
                      "malformed HTTP request (request line, headers or chunked framing)");
    case 414: return ApiError(414, "invalid_request_error", "the request path is too long");
    default: return ApiError(status, "invalid_request_error", "HTTP error " + std::to_string(status));
  }
}

void refuse_other_methods(httplib::Server& server, const std::vector<std::pair<std::string, std::string>>& routes) {
  for (const auto& [path, allowed] : routes) {
    auto refuse = [path = path, allowed = allowed](const httplib::Request& req, httplib::Response& res) {
      send_error(
          res, ApiError(405, "invalid_request_error", req.method + " is not allowed on " + path + "; use " + allowed));
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
