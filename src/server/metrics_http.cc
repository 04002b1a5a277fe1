#include "server/metrics_http.h"

#include <charconv>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/http_responses.h"

namespace ditto {

void serve_metrics(const ServerMetrics& metrics, const httplib::Request& req, httplib::Response& res) {
  std::vector<std::string> names;
  const auto [first, last] = req.params.equal_range("name[]");
  for (auto it = first; it != last; ++it) names.push_back(it->second);
  const MetricsFormat format = metrics_format_for(req.get_header_value("Accept"));
  auto body = std::make_shared<const std::string>(metrics.render(format, names));
  res.status = 200;
  if (body->empty()) {
    res.set_content("", metrics_content_type(format));
    return;
  }
  // httplib compresses a text body given to set_content when the client accepts gzip or br; a
  // content provider of known length goes out as it is.
  res.set_content_provider(body->size(), metrics_content_type(format),
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(body->data() + offset, length);
                           });
}

HttpExchange http_exchange(const httplib::Request& req, const httplib::Response& res) {
  const AccessRecord& record = access_record();
  HttpExchange x;
  x.method = req.method;
  if (!req.matches.empty()) x.handler = req.path;
  x.status = res.status;
  x.client_closed = record.client_closed;
  x.generation_started = !record.request_id.empty();
  // A stream that ended with an error event: its status was already 200 (respond_stream).
  x.stream_failed = res.status == 200 && !record.client_closed && !record.error.empty() &&
                    res.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0;
  const std::string length = req.get_header_value("Content-Length");
  std::from_chars(length.data(), length.data() + length.size(), x.request_bytes);
  x.response_bytes = static_cast<int64_t>(res.body.empty() ? res.content_length_ : res.body.size());
  if (record.start) x.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *record.start).count();
  return x;
}

}  // namespace ditto
