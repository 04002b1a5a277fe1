// /metrics over HTTP, and what the server's logger tells the metrics of each exchange
// (server/metrics.h holds the series).
#pragma once

#include <httplib.h>

#include "server/metrics.h"

namespace ditto {

// Answers /metrics as vLLM's server does (its prometheus_client app, mounted for every method):
// Prometheus text 0.0.4, or OpenMetrics 1.0.0 when the Accept header asks for it; ?name[]=NAME
// (repeatable) keeps only the samples of those names (an empty body when none matches). Never
// compressed, whatever Accept-Encoding says: vLLM's test_metrics_filter asserts no
// Content-Encoding, and a scrape is a few tens of KiB, read by a scraper nearby.
void serve_metrics(const ServerMetrics& metrics, const httplib::Request& req, httplib::Response& res);

// The exchange the logger just finished, from httplib's request and response and this thread's
// AccessRecord (http_responses.h): its route (httplib matched one when req.matches is set), status,
// whether the client left, whether the engine took the request, whether a stream broke off with an
// error, its sizes and duration.
HttpExchange http_exchange(const httplib::Request& req, const httplib::Response& res);

}  // namespace ditto
