// The HTTP side of `ditto serve` that is not about the API: JSON and error responses, the access
// log (one line per request), the request framing checks made from the headers before any body is
// read, the body size limit, the bodies of httplib's own errors and the 405s of known routes.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"
#include "server/server_log.h"

namespace ditto {

// What the access log says about the request this HTTP thread serves: handlers fill it in, the
// logger writes it and starts the next (a streamed response's provider runs on the same thread,
// and httplib logs after the last byte is written).
struct AccessRecord {
  std::optional<std::chrono::steady_clock::time_point> start;
  std::string request_id;
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  std::vector<std::string> finish_reasons;  // distinct, in the order first seen
  std::string error;                        // the message of a 4xx/5xx
  // A streamed response: `stream_open` from its header until its [DONE] is written,
  // `stream_running` while some of its choices have not finished.
  bool stream_open = false;
  bool stream_running = false;
  // The client went away before the stream's end: logged (and counted in /metrics) as 499,
  // nginx's "client closed request", though the header said 200.
  bool client_closed = false;
  void finished(const std::string& reason);
  // Called once the response is over (the logger): a stream still open did not reach its end
  // because its client left (httplib ends a stream only then, or when the provider does) —
  // client_closed, the error says so, and "abort" is the finish reason of what was still running
  // (the stream's releaser aborts it).
  void end_response();
  // The status the log and /metrics report: 499 for a closed client, else the response's.
  int status(const httplib::Response& res) const { return client_closed ? 499 : res.status; }
};
// This HTTP thread's record.
AccessRecord& access_record();

// JSON text with invalid UTF-8 replaced (U+FFFD), as every response body is written.
std::string dump_json(const nlohmann::ordered_json& j);
// `body` as the response, status `status`, Content-Type application/json (invalid UTF-8 replaced).
void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body);
// An OpenAI error object; its message goes to the access record.
void send_error(httplib::Response& res, const ApiError& e);
// One line per request on stderr (vLLM's and llama-server's access lines, with the engine's
// numbers): text, or a JSON object per line with format "json".
void log_access(const std::string& format, const httplib::Request& req, const httplib::Response& res);

// The HTTP reason phrase of `status` ("Not Found"): the `type` of the errors vLLM's HTTPException
// handler writes, and so of the ones ditto answers from the headers alone.
std::string http_reason_phrase(int status);

// A POST to a JSON route whose Content-Type's media type is not application/json (or that has none):
// vLLM's validate_json_request, answered as its validation handler does (400 "Bad Request", the
// message "... Unsupported Media Type: Only 'application/json' is allowed"). nullopt when it is JSON.
std::optional<ApiError> json_content_type_error(const httplib::Request& req);

// The request's framing from its headers alone, before any body is read: more than one
// Content-Length (400), one that is not a byte count (400), one above `max_body_bytes` (413), a
// POST with neither Content-Length nor a chunked body (411). nullopt when the framing is fine.
// bodiless_post_ok: a POST with neither Content-Length nor Transfer-Encoding has an empty body (RFC
// 9110 §8.6) rather than a 411 — the routes whose body is optional (`curl -X POST .../pause`).
std::optional<ApiError> framing_error(const httplib::Request& req, int64_t max_body_bytes,
                                      bool bodiless_post_ok = false);

// Reads a POST body through httplib's content reader, counting bytes as they come, so a chunked
// body meets the same limit as one that announces its size. Past the limit the rest is read and
// dropped (up to 64 MiB more), so the client, still sending, reads the 413 instead of a reset.
// Returns the error to send (413, or 400 when the body could not be read) or nullopt with `body`.
std::optional<ApiError> read_body(const httplib::ContentReader& reader, int64_t max_body_bytes, std::string& body);

// 413 naming --max-request-body-bytes and its value.
ApiError body_too_large(int64_t max_body_bytes);

// The body of an error httplib answers by itself (`res.status` set: 400 malformed framing, 404 no
// route, 413, 414 …).
ApiError http_status_error(const httplib::Request& req, int status);

// `text` with the regex metacharacters of httplib's route patterns (std::regex ECMAScript) escaped.
std::string regex_escape(std::string_view text);
// The regex httplib matches a route with: `path` itself, and under `root_path` (--root-path) when
// one is given ("/llm": "(?:/llm)?/v1/models"). `path` may itself be a regex ("/v1/models/(.+)").
std::string route_pattern(const std::string& root_path, const std::string& path);
// `path` with `root_path` taken off its front (when it starts there).
std::string strip_root_path(const std::string& root_path, const std::string& path);

// Known routes with the wrong method: 405 naming the one that works ({path, "GET" | "POST"}).
void refuse_other_methods(httplib::Server& server, const std::string& root_path,
                          const std::vector<std::pair<std::string, std::string>>& routes);

}  // namespace ditto
