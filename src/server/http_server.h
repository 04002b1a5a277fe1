// `ditto serve`: the OpenAI-compatible HTTP server (cpp-httplib). HTTP threads parse and check
// requests, hand them to the AsyncEngine's queue and write its reports back, as one JSON body or
// as server-sent events; the one engine thread runs every request exactly as if it were alone.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /v1/models/{model},
// POST /invocations, GET /health, GET|POST /ping, GET /version, GET /load, POST /tokenize,
// POST /detokenize, GET /metrics; on a pooling model (--runner pooling, --task embed|score) also
// POST /v1/embeddings, /pooling, /score (/v1/score), /rerank (/v1/rerank, /v2/rerank)
// (server/pooling_api.h), beside generation (all also under --root-path). Errors are vLLM's error objects
// (type the error's name, code the HTTP status): 400 invalid parameter (named in `param`) or a body
// that is not application/json, 401 missing or wrong API key, 404 unknown model or route, 413 body
// too large, 503 queue full, 500 internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ditto/llm.h"
#include "server/cors.h"

namespace httplib {
class Server;
}

namespace ditto {

class AsyncEngine;
class ServerMetrics;

struct ServerOptions {
  std::string host = "0.0.0.0";   // every IPv4 interface, as vLLM's default
  int port = 8000;                // 0: any free port (see bind())
  std::string served_model_name;  // the `model` clients name; requests naming another get 404
  // Further names a request may give (vLLM's `--served-model-name a b`: the first is the one
  // responses carry); /v1/models lists every name.
  std::vector<std::string> served_model_aliases;
  std::string model_path;  // reported as the model's root in /v1/models
  // empty: no authentication. Else vLLM's rule (its AuthenticationMiddleware as of vLLM main,
  // PR #58028): every route needs "Authorization: Bearer KEY" except the liveness probes /health,
  // /ping, /load and /version (a trailing slash allowed) and CORS preflights.
  std::string api_key;
  // The web page at `/` (server/web_ui.h): a chat, the contract live, the server's state. The page
  // and its files are public under api_key (it asks for the key); --disable-web-ui turns it off.
  bool enable_web_ui = true;
  // vLLM's VLLM_SERVER_DEV_MODE=1: the development routes for RL (server/rl_api.h: weight transfer,
  // /pause, /resume, /abort_requests, /sleep, /wake_up, /weight_info). Off: they answer 404.
  bool dev_mode = false;
  // uvicorn's root_path as vLLM's --root-path: every route is served both as itself and under this
  // prefix ("/llm": /llm/v1/completions and /v1/completions). Empty, or "/..." without a trailing "/".
  std::string root_path;
  // vLLM's --enable-request-id-headers: every response carries X-Request-Id (the request's own, or
  // a fresh one). Whatever this says, a request's X-Request-Id (else its body's request_id) names
  // its response: id "cmpl-<it>" / "chatcmpl-<it>", as vLLM's _base_request_id.
  bool enable_request_id_headers = false;
  CorsOptions cors;  // vLLM's --allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials
  int64_t max_request_body_bytes = int64_t{32} << 20;
  int64_t max_queued_requests = 1024;  // beyond this, 503
  int http_threads = 0;                // connections served at once (threads started on demand); 0: 192
  // Connections held at once (served, or waiting for an HTTP thread); beyond, 503 and closed.
  // http_threads is lowered to it when higher.
  int64_t max_connections = 1024;
  // Tokens one request may ask for: over its prompts, prompt tokens + n × max_tokens (max_tokens as
  // resolved: the default of a chat is the rest of the context). 0: max(1048576, max_model_len).
  int64_t max_tokens_per_request = 0;
  // A client that stalls this long while sending or reading is dropped (--timeout). How long
  // requests in flight may run on after a SIGTERM is drain()'s argument (--shutdown-timeout).
  int timeout_seconds = 60;
  std::string version;  // for GET /version
  // The access log on stderr: one line per request (route, status, request id, prompt and
  // completion tokens, finish reason, latency, and the error of a 4xx/5xx). log_format "text" or
  // "json" (one JSON object per line); disable_log_requests (vLLM's --disable-log-requests) drops it.
  bool disable_log_requests = false;
  std::string log_format = "text";
  // Chat output parsing (vLLM's flags): "qwen3" / "deepseek_r1" split <think>…</think> into
  // reasoning; with enable_auto_tool_choice and tool_call_parser "hermes", "llama3_json" or
  // "qwen3_coder", requests that send tools get their calls as tool_calls (engine/output_parsers.h).
  std::string reasoning_parser;
  bool enable_auto_tool_choice = false;
  // tool_choice "none" leaves the tools out of the prompt (vLLM's flag; by default they stay, and
  // only the parsing of tool calls is off).
  bool exclude_tools_when_tool_choice_none = false;
  // usage.prompt_tokens_details.cached_tokens in every response (vLLM's flag; off as in vLLM).
  bool enable_prompt_tokens_details = false;
  // Logprob tokens as "token_id:N" for every request (vLLM's --return-tokens-as-token-ids; a
  // request may also ask for it itself).
  bool return_tokens_as_token_ids = false;
  // Every streamed chunk carries the usage so far and the stream ends with a usage chunk, whatever
  // stream_options says (current vLLM's --enable-force-include-usage).
  bool enable_force_include_usage = false;
  // A chat request's own `chat_template` (Jinja run on this server) is accepted (vLLM's
  // --trust-request-chat-template); without it such a request gets 400 naming chat_template.
  bool trust_request_chat_template = false;
  // How chat message content reaches the template (vLLM's --chat-template-content-format): auto,
  // string or openai (PromptInput::chat_template_content_format).
  std::string chat_template_content_format = "auto";
  // GET /tokenizer_info (vLLM's --enable-tokenizer-info-endpoint): the tokenizer's configuration
  // (tokenizer_config.json as read, with its chat_template); off: the route is 404, as vLLM's.
  bool enable_tokenizer_info_endpoint = false;
  std::string tool_call_parser;
};

// Throws Error(kInvalidArgument) naming the flag for an empty served name, a --root-path that does
// not start with "/" (or ends with one), a queue limit < 1, a
// body limit < 1 KiB, a connection limit < 1, a negative tokens-per-request limit, an unknown
// parser, auto tool choice without a parser, or a log format other than text or json.
void validate_server_options(const ServerOptions& options);

// Before the (long) model load: throws Error(kInvalidArgument) naming host:port and the operating
// system's reason ("Address already in use") when the server could not listen there now. Port 0
// (any free port) always passes.
void check_listen_address(const ServerOptions& options);

// vLLM's AuthenticationMiddleware rule: whether a request to `path` (--root-path already removed)
// needs the API key. Every path does but /health, /ping, /load and /version (with or without a
// trailing slash; "/healthcheck" is not "/health"), and, when `web_ui` is on, the web page's own
// files ("/", "/index.html", "/assets/..."), which hold no data: the page asks for the key.
bool path_needs_api_key(const std::string& path, bool web_ui = false);

class HttpServer {
 public:
  // Starts the engine thread. `llm` must outlive the server. Throws Error(kInvalidArgument) for
  // bad options.
  HttpServer(LLMEngine& llm, const ServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; returns the port bound. Throws Error(kInvalidArgument) when it cannot
  // (address in use, bad host).
  int bind();
  // Serves until stop() or drain() (from another thread or a signal handler's helper thread).
  void listen();
  // Stops now: requests in flight end with finish_reason "abort" (their responses are written).
  void stop();
  // Stops gracefully (SIGTERM): new requests get 503 (and their connections are closed) while the
  // requests in flight run on for up to `grace_seconds`; those still running then are aborted as
  // by stop(). Returns when listen() may return.
  void drain(int grace_seconds);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ditto
