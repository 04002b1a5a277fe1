#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <functional>
#include <strings.h>
#include <random>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_input.h"
#include "model/causal_lm.h"
#include "server/async_engine.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

// SamplingParams::validate's messages start with the field's name ("top_p must be ..."); report it
// as the error's param when it is one.
std::string param_of(const std::string& message) {
  static const std::vector<std::string> fields = {
      "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k", "min_p",
      "max_tokens", "min_tokens", "logprobs", "prompt_logprobs", "stop_token_ids", "stop"};
  for (const std::string& f : fields)
    if (message.rfind(f + " ", 0) == 0 || message.rfind(f + "[", 0) == 0 || message.rfind(f + " (", 0) == 0) return f;
  if (message.rfind("the request needs", 0) == 0) return "max_tokens";  // KV cache too small for it
  return "";
}

// Calls fn(fd, local_port, peer address, peer port) for each TCP socket of this process (peer
// address empty and port -1 for one that is not connected, e.g. listening) until fn returns true.
// cpp-httplib 0.11 does not expose its sockets, so they are found in /proc/self/fd.
void for_each_socket(const std::function<bool(int fd, int local_port, const std::string& peer, int peer_port)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    auto port_of = [](const sockaddr_storage& a) {
      return a.ss_family == AF_INET    ? ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port)
             : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                       : -1;
    };
    if (port_of(local) < 0) continue;
    char addr[INET6_ADDRSTRLEN] = {};
    int peer_port = -1;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0) {
      if (peer.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, addr, sizeof addr);
      else if (peer.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, addr, sizeof addr);
      peer_port = port_of(peer);
    }
    if (fn(fd, port_of(local), addr, peer_port)) break;
  }
  closedir(dir);
}

// The file descriptor of the connection `req` came on, found by its (peer address, peer port,
// local port). The fd stays open while the handler runs (httplib closes it afterwards), even if
// the peer hangs up. -1 when not found.
int connection_fd(const httplib::Request& req) {
  int found = -1;
  for_each_socket([&](int fd, int local_port, const std::string& peer, int peer_port) {
    if (peer_port != req.remote_port || local_port != req.local_port || peer != req.remote_addr) return false;
    found = fd;
    return true;
  });
  return found;
}

// cpp-httplib 0.11 listens with a backlog of 5 (compiled into the library), so a burst of a few
// dozen connects overflows it and clients see resets. Linux lets listen() be called again on a
// listening socket to change its backlog: find ours by its local port and do that.
void widen_listen_backlog(int port, int backlog) {
  for_each_socket([&](int fd, int local_port, const std::string&, int) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (local_port == port && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening)
      ::listen(fd, backlog);
    return false;
  });
}

// True when the peer of `fd` has hung up (or the socket failed). Pipelined data is left unread.
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::string model_field(const Json& v) {
  if (!v.is_string()) throw_bad_param("model", "field 'model' must be a string, got " + json_excerpt(v));
  return v.get<std::string>();
}

// One HTTP generation request: its engine requests (one per prompt) and their outputs so far.
struct Job {
  ApiRequest request;
  std::string id;
  int64_t created = 0;
  std::vector<std::string> engine_ids;  // by slot
  std::vector<ApiResult> results;       // by slot
  std::vector<bool> finished;           // by slot
  size_t num_finished = 0;
  std::shared_ptr<OutputChannel> channel = std::make_shared<OutputChannel>();
  bool complete = false;                // every slot finished and the response was written
  int connection_fd = -1;               // to notice a client that hangs up while it waits
};

}  // namespace

struct HttpServer::Impl {
  Impl(LLM& l, const ServerOptions& o)
      : llm(l), options(o), metrics(o.served_model_name),
        engine(l, AsyncEngineConfig{.max_queued_requests = o.max_queued_requests}, metrics) {
    std::random_device rd;
    id_prefix = (uint64_t{rd()} << 32) ^ rd();
  }

  LLM& llm;
  ServerOptions options;
  ServerMetrics metrics;
  AsyncEngine engine;
  httplib::Server server;
  uint64_t id_prefix = 0;
  std::atomic<uint64_t> next_id{0};
  int bound_port = -1;
  std::atomic<int64_t> open_responses{0};  // generation responses not yet fully written

  // Counts a generation response as open until the guard (or the stream releaser) goes.
  struct OpenResponse {
    explicit OpenResponse(std::atomic<int64_t>& n) : n_(&n) { ++*n_; }
    // The last open response gone, hand the pages freed by this burst back to the OS: glibc keeps
    // them in per-thread arenas otherwise, and a server's RSS would only ever grow.
    ~OpenResponse() {
      if (--*n_ == 0) malloc_trim(0);
    }
    OpenResponse(const OpenResponse&) = delete;
    OpenResponse& operator=(const OpenResponse&) = delete;
    std::atomic<int64_t>* n_;
  };

  int64_t context() const { return llm.model().config().max_position_embeddings; }

  std::string new_id(const char* prefix) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%016" PRIx64 "%08" PRIx64, prefix, id_prefix, next_id.fetch_add(1));
    return buf;
  }

  void check_model(const std::optional<std::string>& model) const {
    if (model && *model != options.served_model_name && *model != options.model_path)
      throw ApiError(404, "invalid_request_error", "The model `" + *model + "` does not exist.", "model",
                     "model_not_found");
  }

  Json parse_body(const httplib::Request& req) const {
    try {
      return parse_json_input<Json>(req.body, "request body");
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error", e.what());
    }
  }

  void routes();
  void handle_generate(ApiEndpoint endpoint, const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<Job> start_job(ApiRequest&& request, const char* id_prefix);
  void abort_job(const Job& job) {
    for (size_t s = 0; s < job.engine_ids.size(); ++s)
      if (!job.finished[s]) engine.abort(job.engine_ids[s]);
  }
  // Applies channel items to the job. Throws ApiError for an error item (after aborting the rest).
  // Returns the slots that got a report.
  std::vector<size_t> apply(Job& job, std::vector<OutputChannel::Item>& items, std::vector<bool>* accepted);
};

std::vector<size_t> HttpServer::Impl::apply(Job& job, std::vector<OutputChannel::Item>& items,
                                            std::vector<bool>* accepted) {
  std::vector<size_t> touched;
  for (OutputChannel::Item& item : items) {
    if (!item.error.empty()) {
      job.finished[item.slot] = true;
      abort_job(job);
      const std::string where = job.results.size() > 1 ? "prompt " + std::to_string(item.slot) + ": " : "";
      if (item.internal_error) throw ApiError(500, "internal_error", where + item.error);
      throw ApiError(400, "invalid_request_error", where + item.error, param_of(item.error));
    }
    if (item.accepted) {
      if (accepted) (*accepted)[item.slot] = true;
      continue;
    }
    if (!item.report) continue;
    const bool done = item.report->finished;
    append_delta(job.results[item.slot].output, std::move(*item.report));
    if (done && !job.finished[item.slot]) {
      job.finished[item.slot] = true;
      ++job.num_finished;
    }
    touched.push_back(item.slot);
  }
  return touched;
}

std::shared_ptr<Job> HttpServer::Impl::start_job(ApiRequest&& request, const char* prefix) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  ApiRequest& r = job->request;
  const bool chat = r.endpoint == ApiEndpoint::kChatCompletions;
  const Tokenizer& tok = llm.tokenizer();
  const int64_t ctx = context();
  const char* prompt_param = chat ? "messages" : "prompt";
  std::vector<std::vector<int32_t>> ids(r.prompts.size());
  std::vector<SamplingParams> params(r.prompts.size(), r.params);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const PromptInput& p = r.prompts[i];
    ApiResult result;
    try {
      if (chat) {
        result.prompt_text = llm.render_chat(*p.messages, p.tools, r.add_generation_prompt, p.chat_template_kwargs);
        if (r.continue_final_message) {
          // The template closes the last (assistant) message; continue it instead (vLLM's rule:
          // cut the rendered text after the final message's content).
          const Json& last = p.messages->back();
          const std::string content = last.contains("content") && last["content"].is_string() ? last["content"].get<std::string>() : "";
          const size_t at = content.empty() ? std::string::npos : result.prompt_text.rfind(content);
          if (at == std::string::npos)
            throw_bad_param("continue_final_message", "the final message's content was not found in the rendered prompt");
          result.prompt_text.resize(at + content.size());
        }
        ids[i] = tok.encode(result.prompt_text, /*add_special_tokens=*/false);
      } else if (p.text) {
        result.prompt_text = *p.text;
        ids[i] = tok.encode(*p.text, /*add_special_tokens=*/true);
      } else {
        ids[i] = *p.token_ids;
        for (size_t t = 0; t < ids[i].size(); ++t)
          if (ids[i][t] >= llm.model().config().vocab_size)
            throw_bad_param(prompt_param, "prompt token " + std::to_string(t) + " = " + std::to_string(ids[i][t]) +
                                              " is outside the vocabulary [0, " +
                                              std::to_string(llm.model().config().vocab_size) + ")");
        if (r.echo) result.prompt_text = tok.decode(ids[i], /*skip_special_tokens=*/false);
      }
    } catch (const Error& e) {
      throw_bad_param(prompt_param, e.what());
    }
    const auto n = static_cast<int64_t>(ids[i].size());
    const std::string which = r.prompts.size() > 1 ? "prompt " + std::to_string(i) + " has" : "the prompt has";
    if (n == 0) throw_bad_param(prompt_param, "the prompt is empty");
    if (n >= ctx)
      throw_bad_param(prompt_param, "This model's maximum context length is " + std::to_string(ctx) + " tokens; " +
                                        which + " " + std::to_string(n) + " tokens, which leaves no room for output.");
    SamplingParams& sp = params[i];
    if (r.max_tokens_given) {
      if (n + sp.max_tokens > ctx)
        throw_bad_param(chat ? "max_completion_tokens" : "max_tokens",
                        "This model's maximum context length is " + std::to_string(ctx) + " tokens. However, you requested " +
                            std::to_string(n + sp.max_tokens) + " tokens (" + std::to_string(n) + " in the " +
                            (chat ? "messages" : "prompt") + ", " + std::to_string(sp.max_tokens) +
                            " in the completion). Please reduce the length of the " + (chat ? "messages" : "prompt") +
                            " or completion.");
    } else if (chat) {
      sp.max_tokens = std::max<int64_t>(1, std::min(ctx, llm.kv_cache_tokens()) - n);
    } else {
      sp.max_tokens = std::min<int64_t>(16, ctx - n);
    }
    if (sp.min_tokens > sp.max_tokens && !r.max_tokens_given) sp.min_tokens = sp.max_tokens;
    try {
      sp.validate(llm.model().config().vocab_size);
    } catch (const Error& e) {
      throw_bad_param(param_of(e.what()), e.what());
    }
    job->results.push_back(std::move(result));
  }
  job->id = new_id(prefix);
  job->created = static_cast<int64_t>(std::time(nullptr));
  job->finished.assign(r.prompts.size(), false);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::string engine_id = r.prompts.size() > 1 ? job->id + "-" + std::to_string(i) : job->id;
    try {
      engine.submit(engine_id, std::move(ids[i]), params[i], job->results[i].prompt_text, job->channel, i);
    } catch (const Error& e) {
      abort_job(*job);
      if (e.code() == ErrorCode::kResourceExhausted) throw ApiError(503, "server_overloaded", e.what());
      throw ApiError(500, "internal_error", e.what());
    }
    job->engine_ids.push_back(engine_id);
  }
  // Wait until the engine has taken every prompt, so a refusal is an HTTP error, not a broken
  // stream.
  std::vector<bool> accepted(r.prompts.size(), false);
  while (!std::all_of(accepted.begin(), accepted.end(), [](bool a) { return a; })) {
    std::vector<OutputChannel::Item> items = job->channel->pop(std::chrono::milliseconds(1000));
    apply(*job, items, &accepted);
  }
  return job;
}

void HttpServer::Impl::handle_generate(ApiEndpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto open = std::make_shared<OpenResponse>(open_responses);  // a stream hands it to its releaser
  const Json body = parse_body(req);
  ApiRequest request = parse_api_request(endpoint, body);
  check_model(request.model);
  if (!request.ignored_fields.empty()) {
    std::string names;
    for (const std::string& f : request.ignored_fields) names += (names.empty() ? "" : ", ") + f;
    std::fprintf(stderr, "ditto serve: ignoring unsupported fields: %s\n", names.c_str());
  }
  const bool chat = endpoint == ApiEndpoint::kChatCompletions;
  if (chat) {
    request.parsers.reasoning = !options.reasoning_parser.empty();
    request.parsers.tool_calls = options.enable_auto_tool_choice && !request.prompts[0].tools.is_null();
  }
  std::shared_ptr<Job> job = start_job(std::move(request), chat ? "chatcmpl-" : "cmpl-");
  job->connection_fd = connection_fd(req);
  auto formatter = std::make_shared<ApiFormatter>(job->request, llm.tokenizer(), job->id, job->created,
                                                  options.served_model_name);

  if (!job->request.stream) {
    try {
      while (job->num_finished < job->results.size()) {
        std::vector<OutputChannel::Item> items = job->channel->pop(std::chrono::milliseconds(200));
        apply(*job, items, nullptr);
        if (job->num_finished < job->results.size() && peer_closed(job->connection_fd)) {
          abort_job(*job);  // nobody will read the answer: free the engine for others
          throw ApiError(400, "invalid_request_error", "the client disconnected before the response was ready");
        }
      }
    } catch (...) {
      abort_job(*job);
      throw;
    }
    job->complete = true;
    send_json(res, 200, formatter->response(job->results));
    return;
  }

  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, formatter](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        std::vector<OutputChannel::Item> items = job->channel->pop(std::chrono::milliseconds(200));
        if (items.empty() && peer_closed(job->connection_fd)) return false;  // gone before a write noticed
        std::vector<size_t> touched;
        try {
          touched = apply(*job, items, nullptr);
        } catch (const ApiError& e) {
          send(dump(e.body()));
          send("[DONE]");
          job->complete = true;
          sink.done();
          return true;
        }
        std::sort(touched.begin(), touched.end());
        touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
        for (size_t slot : touched)
          for (const Json& chunk : formatter->stream_chunks(slot, job->results[slot]))
            if (!send(dump(chunk))) return false;  // the client is gone: the releaser aborts
        if (job->num_finished == job->results.size()) {
          if (job->request.include_usage && !send(dump(formatter->usage_chunk(job->results)))) return false;
          if (!send("[DONE]")) return false;
          job->complete = true;
          sink.done();
        }
        return true;
      },
      [this, job, open](bool) {
        if (!job->complete) abort_job(*job);
      });
}

void HttpServer::Impl::routes() {
  auto guarded = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(e.code() == ErrorCode::kInvalidArgument ? 400 : 500,
                                 e.code() == ErrorCode::kInvalidArgument ? "invalid_request_error" : "internal_error",
                                 e.what()));
      } catch (const std::bad_alloc&) {
        send_error(res, ApiError(500, "internal_error", "out of memory"));
      }
    };
  };

  // POST bodies are read here, counting bytes as they come, so a chunked body (no Content-Length)
  // meets the same limit as one that announces its size.
  auto with_body = [this, guarded](auto handler) {
    return [this, h = guarded(handler)](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
      const auto limit = static_cast<size_t>(options.max_request_body_bytes);
      std::string body;
      bool too_large = false;
      // Past the limit the rest is read and dropped (up to 64 MiB more), so the client, still
      // sending, reads the 413 instead of a reset connection.
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
      if (too_large || res.status == 413) {
        send_error(res, ApiError(413, "invalid_request_error",
                                 "the request body is larger than the server accepts (--max-request-body-bytes " +
                                     std::to_string(limit) + ")"));
        res.set_header("Connection", "close");
        return;
      }
      if (!ok) {
        send_error(res, ApiError(400, "invalid_request_error", "could not read the request body"));
        res.set_header("Connection", "close");
        return;
      }
      httplib::Request with = req;
      with.body = std::move(body);
      h(with, res);
    };
  };
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    // Framing first, from the headers alone, before any body is read.
    const size_t lengths = req.get_header_value_count("Content-Length");
    if (lengths > 1) {
      send_error(res, ApiError(400, "invalid_request_error", "more than one Content-Length header"));
      res.set_header("Connection", "close");
      return R::Handled;
    }
    if (lengths == 1) {
      const std::string v = req.get_header_value("Content-Length");
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
        send_error(res, ApiError(400, "invalid_request_error", "Content-Length '" + v + "' is not a byte count"));
        res.set_header("Connection", "close");
        return R::Handled;
      }
      if (std::stoull(v) > static_cast<uint64_t>(options.max_request_body_bytes)) {
        send_error(res, ApiError(413, "invalid_request_error",
                                 "the request body (" + v + " bytes) is larger than the server accepts "
                                 "(--max-request-body-bytes " + std::to_string(options.max_request_body_bytes) + ")"));
        res.set_header("Connection", "close");
        return R::Handled;
      }
    } else if (req.method == "POST" && !req.has_header("Transfer-Encoding")) {
      send_error(res, ApiError(411, "invalid_request_error", "a POST needs a Content-Length header or a chunked body"));
      res.set_header("Connection", "close");
      return R::Handled;
    }
    if (options.api_key.empty() || req.path.rfind("/v1", 0) != 0) return R::Unhandled;
    // "Bearer" is case-insensitive (RFC 9110 §11.1); the key is not.
    const std::string auth = req.get_header_value("Authorization");
    const std::string scheme = auth.substr(0, std::min<size_t>(auth.size(), 7));
    if (auth.size() > 7 && strcasecmp(scheme.c_str(), "Bearer ") == 0 && auth.substr(7) == options.api_key)
      return R::Unhandled;
    send_error(res, ApiError(401, "invalid_request_error",
                             req.has_header("Authorization") ? "Incorrect API key provided." : "Missing API key: send 'Authorization: Bearer <key>'.",
                             "", "invalid_api_key"));
    return R::Handled;
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, ApiError(413, "invalid_request_error", "the request body is larger than the server accepts (--max-request-body-bytes)"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "invalid_request_error", "no route " + req.method + " " + req.path));
    else if (res.status == 400)
      send_error(res, ApiError(400, "invalid_request_error", "malformed HTTP request (request line, headers or chunked framing)"));
    else if (res.status == 414)
      send_error(res, ApiError(414, "invalid_request_error", "the request path is too long"));
    else
      send_error(res, ApiError(res.status, "invalid_request_error", "HTTP error " + std::to_string(res.status)));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "internal_error", what));
  });
  server.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics.record_http_status(res.status); });

  server.Post("/v1/completions", with_body([this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(ApiEndpoint::kCompletions, req, res);
  }));
  server.Post("/v1/chat/completions", with_body([this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(ApiEndpoint::kChatCompletions, req, res);
  }));
  server.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    Json model = {{"id", options.served_model_name},
                  {"object", "model"},
                  {"created", static_cast<int64_t>(std::time(nullptr))},
                  {"owned_by", "ditto"},
                  {"root", options.model_path},
                  {"parent", nullptr},
                  {"max_model_len", context()}};
    send_json(res, 200, {{"object", "list"}, {"data", Json::array({model})}});
  }));
  // Known routes with the wrong method: 405 naming the one that works.
  for (const auto& [path, allowed] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/tokenize", "POST"},
           {"/detokenize", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/version", "GET"}, {"/metrics", "GET"}}) {
    auto refuse = [path, allowed](const httplib::Request& req, httplib::Response& res) {
      send_error(res, ApiError(405, "invalid_request_error", req.method + " is not allowed on " + path + "; use " + allowed));
      res.set_header("Allow", allowed);
    };
    if (allowed == "POST") server.Get(path, refuse);
    else server.Post(path, refuse);
    server.Put(path, refuse);
    server.Delete(path, refuse);
    server.Patch(path, refuse);
  }
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Get("/version", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", options.version}});
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Post("/tokenize", with_body([this](const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req);
    if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
    if (body.contains("model") && !body["model"].is_null())
      check_model(model_field(body["model"]));
    std::vector<int32_t> ids;
    try {
      if (body.contains("messages")) {
        const Json messages = normalize_chat_messages(body["messages"]);
        const bool agp = body.contains("add_generation_prompt") ? json_bool(body["add_generation_prompt"], "add_generation_prompt") : true;
        const Json kwargs = body.contains("chat_template_kwargs") ? body["chat_template_kwargs"] : Json::object();
        const Json tools = body.contains("tools") ? body["tools"] : Json(nullptr);
        ids = llm.tokenizer().encode(llm.render_chat(messages, tools, agp, kwargs), false);
      } else if (body.contains("prompt")) {
        const bool special = body.contains("add_special_tokens") ? json_bool(body["add_special_tokens"], "add_special_tokens") : true;
        ids = llm.tokenizer().encode(json_string(body["prompt"], "prompt"), special);
      } else {
        throw_bad_param("prompt", "give 'prompt' (a string) or 'messages'");
      }
    } catch (const Error& e) {
      throw_bad_param(body.contains("messages") ? "messages" : "prompt", e.what());
    }
    Json strs = nullptr;
    if (body.contains("return_token_strs") && json_bool(body["return_token_strs"], "return_token_strs")) {
      strs = Json::array();
      for (int32_t id : ids) strs.push_back(llm.tokenizer().id_to_token(id).value_or(""));
    }
    send_json(res, 200, {{"count", ids.size()}, {"max_model_len", context()}, {"tokens", ids}, {"token_strs", strs}});
  }));
  server.Post("/detokenize", with_body([this](const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req);
    if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
    if (body.contains("model") && !body["model"].is_null()) check_model(model_field(body["model"]));
    if (!body.contains("tokens")) throw_bad_param("tokens", "field 'tokens' is required");
    std::vector<int32_t> ids;
    try {
      ids = json_token_ids(body["tokens"], "tokens");
    } catch (const Error& e) {
      throw_bad_param("tokens", e.what());
    }
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= llm.model().config().vocab_size)
        throw_bad_param("tokens", "tokens[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                      " is outside the vocabulary [0, " + std::to_string(llm.model().config().vocab_size) + ")");
    send_json(res, 200, {{"prompt", llm.tokenizer().decode(ids, false)}});
  }));
}

void validate_server_options(const ServerOptions& options) {
  if (options.served_model_name.empty()) throw_invalid_argument("--served-model-name must not be empty");
  if (options.max_queued_requests < 1) throw_invalid_argument("--max-queued-requests must be at least 1");
  if (options.max_request_body_bytes < 1024) throw_invalid_argument("--max-request-body-bytes must be at least 1024");
  if (!options.reasoning_parser.empty() && options.reasoning_parser != "qwen3" && options.reasoning_parser != "deepseek_r1")
    throw_invalid_argument("--reasoning-parser must be qwen3 or deepseek_r1, got '" + options.reasoning_parser + "'");
  if (!options.tool_call_parser.empty() && options.tool_call_parser != "hermes")
    throw_invalid_argument("--tool-call-parser must be hermes, got '" + options.tool_call_parser + "'");
  if (options.enable_auto_tool_choice && options.tool_call_parser.empty())
    throw_invalid_argument("--enable-auto-tool-choice needs --tool-call-parser (hermes for Qwen3)");
}

HttpServer::HttpServer(LLM& llm, const ServerOptions& options)
    : impl_((validate_server_options(options), std::make_unique<Impl>(llm, options))) {
  Impl& s = *impl_;
  const int threads = options.http_threads > 0 ? options.http_threads : 128 + 64;
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.server.set_payload_max_length(static_cast<size_t>(options.max_request_body_bytes));
  s.server.set_read_timeout(options.timeout_seconds, 0);
  s.server.set_write_timeout(options.timeout_seconds, 0);
  s.server.set_keep_alive_timeout(5);
  s.routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  Impl& s = *impl_;
  const int port = s.options.port == 0 ? s.server.bind_to_any_port(s.options.host)
                                       : (s.server.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
  if (port < 0)
    throw_invalid_argument("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                           " (address in use, or not an address of this machine)");
  s.bound_port = port;
  widen_listen_backlog(port, 1024);
  return port;
}

void HttpServer::listen() { impl_->server.listen_after_bind(); }

void HttpServer::stop() {
  // In-flight requests end now (finish_reason "abort"); give their responses, streams included, a
  // moment to be written in full before the sockets close.
  impl_->engine.abort_all();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (impl_->open_responses.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->server.stop();
}

}  // namespace ditto
