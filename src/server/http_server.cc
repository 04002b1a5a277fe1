#include "server/http_server.h"

#include <httplib.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_input.h"
#include "engine/beam_search.h"
#include "engine/llm_engine.h"
#include "engine/sampling_params_json.h"
#include "server/async_engine.h"
#include "server/connection_queue.h"
#include "server/http_responses.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/openai_api.h"
#include "server/pooling_api.h"
#include "server/rl_api.h"
#include "server/sockets.h"
#include "server/web_ui.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

std::string model_field(const Json& v) {
  return read_field("model", [&] { return json_string(v, "model"); });
}

// Whether a chat's chat_template_kwargs (JSON text, checked at the door) say enable_thinking false.
bool thinking_disabled(const std::string& chat_template_kwargs) {
  const Json kwargs = Json::parse(chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
  return kwargs.is_object() && kwargs.contains("enable_thinking") && kwargs["enable_thinking"] == false;
}

// One HTTP generation request: its engine requests (one per prompt, a slot each). A streamed job's
// reports go to the formatter as they come; a non-streamed one's final outputs wait in `outputs`.
struct Job {
  ApiRequest request;
  std::string id;
  int64_t created = 0;
  std::vector<std::string> engine_ids;    // by slot
  std::vector<std::string> prompt_texts;  // by slot: the prompt as text (echo)
  std::vector<RequestOutput> outputs;     // by slot: the final outputs (not streamed)
  std::vector<bool> finished;             // by slot
  size_t num_finished = 0;
  // Reports that came while start_job waited for the last prompt to be accepted: a prompt may
  // finish (max_tokens 1, an end-of-sequence token first) before a later one is in the engine.
  std::vector<std::pair<size_t, RequestOutput>> early_reports;
  std::shared_ptr<OutputChannel> channel = std::make_shared<OutputChannel>();
  bool complete = false;   // every slot finished and the response was written
  int connection_fd = -1;  // to notice a client that hangs up while it waits
};

// A fresh X-Request-Id, as vLLM's uuid4().hex: 32 hex digits.
std::string random_hex_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, rng(), rng());
  return buf;
}

AsyncEngineConfig async_engine_config(const ServerOptions& o) {
  AsyncEngineConfig c;
  c.max_queued_requests = o.max_queued_requests;
  c.log_format = o.log_format;
  return c;
}

}  // namespace

struct HttpServer::Impl {
  Impl(LLMEngine& l, const ServerOptions& o)
      : llm(l),
        options(o),
        metrics(o.served_model_name),
        engine(l, async_engine_config(o), metrics),
        rl(l, engine, [this](const std::string& id) { return engine_ids_of(id); }) {
    std::random_device rd;
    id_prefix = (uint64_t{rd()} << 32) ^ rd();
  }

  LLMEngine& llm;
  ServerOptions options;
  ServerMetrics metrics;
  AsyncEngine engine;
  RlApi rl;  // the development routes for RL (server/rl_api.h), with options.dev_mode
  httplib::Server server;
  uint64_t id_prefix = 0;
  std::atomic<uint64_t> next_id{0};
  int bound_port = -1;
  std::atomic<int64_t> open_responses{0};  // generation responses not yet fully written
  std::atomic<bool> draining{false};       // drain(): new requests get 503
  // listen() and a stop that may come before it (a signal right after the port is printed):
  // httplib's stop() does nothing until its accept loop runs, so each side tells the other.
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> listen_entered{false};
  std::atomic<bool> listen_returned{false};
  ConnectionQueue* connections = nullptr;  // owned by `server` (its task queue), set at the first listen

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

  // The engine ids of recent generation responses (the last kRecentResponses), by response id, for
  // /abort_requests: a client knows a response's id, the engine its prompts' own ids.
  static constexpr size_t kRecentResponses = 4096;
  std::mutex recent_mu;
  std::deque<std::pair<std::string, std::vector<std::string>>> recent_responses;
  void remember_response(const std::string& response_id, const std::vector<std::string>& engine_ids) {
    std::lock_guard lock(recent_mu);
    recent_responses.emplace_back(response_id, engine_ids);
    if (recent_responses.size() > kRecentResponses) recent_responses.pop_front();
  }
  std::vector<std::string> engine_ids_of(const std::string& response_id) {
    std::lock_guard lock(recent_mu);
    std::vector<std::string> ids;
    for (const auto& [id, engine_ids] : recent_responses)
      if (id == response_id) ids.insert(ids.end(), engine_ids.begin(), engine_ids.end());
    return ids;
  }

  int64_t context() const { return llm.max_model_len(); }

  int64_t max_tokens_per_request() const {
    return options.max_tokens_per_request > 0 ? options.max_tokens_per_request
                                              : std::max<int64_t>(int64_t{1} << 20, context());
  }
  // Refuses a request asking for more tokens than --max-tokens-per-request (prompt tokens plus
  // n × max_tokens, over its prompts), naming the field that makes it large.
  void check_tokens_per_request(const std::vector<EngineRequest>& requests, const ApiRequest& r) const {
    int64_t total = 0;
    for (const EngineRequest& e : requests)
      total += static_cast<int64_t>(e.prompt_token_ids.size()) + e.params.n * e.params.max_tokens;
    if (total <= max_tokens_per_request()) return;
    const std::string field = r.params.n > 1 ? "n" : r.prompts.size() > 1 ? "prompt" : r.max_tokens_field;
    throw_bad_param(
        field, "the request asks for " + std::to_string(total) + " tokens (prompt tokens + n × " + r.max_tokens_field +
                   " over its " + std::to_string(r.prompts.size()) + " prompt(s)" +
                   (r.max_tokens_given ? "" : ", " + r.max_tokens_field + " defaulting to the rest of the context") +
                   "), more than this server allows per request (--max-tokens-per-request " +
                   std::to_string(max_tokens_per_request()) + ")");
  }
  int64_t vocab_size() const { return llm.input_processor().limits().vocab_size; }

  std::string new_id(const char* prefix) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%016" PRIx64 "%08" PRIx64, prefix, id_prefix, next_id.fetch_add(1));
    return buf;
  }

  void check_model(const std::optional<std::string>& model) const {
    const std::vector<std::string>& aliases = options.served_model_aliases;
    // An empty name is no name (vLLM serves it as the served model, as when `model` is left out).
    if (!model || model->empty() || *model == options.served_model_name || *model == options.model_path ||
        std::find(aliases.begin(), aliases.end(), *model) != aliases.end())
      return;
    // vLLM's words; the model's path on this machine is not told to clients.
    throw Error(ErrorCode::kNotFound, "The model `" + *model + "` does not exist.", "model");
  }

  // The model card of /v1/models and /v1/models/{model}.
  Json model_card(const std::string& name) const {
    return {{"id", name},
            {"object", "model"},
            {"created", static_cast<int64_t>(std::time(nullptr))},
            {"owned_by", "ditto"},
            {"root", options.model_path},
            {"parent", nullptr},
            {"max_model_len", context()}};
  }
  std::vector<std::string> served_names() const {
    std::vector<std::string> names = {options.served_model_name};
    names.insert(names.end(), options.served_model_aliases.begin(), options.served_model_aliases.end());
    return names;
  }

  // vLLM's _base_request_id: the X-Request-Id header, else the body's request_id, names the
  // response ("" when neither does: the server's own id is used).
  static std::string client_request_id(const httplib::Request& req, const Json& body) {
    if (const std::string h = req.get_header_value("X-Request-Id"); !h.empty()) return h;
    if (!body.is_object() || !body.contains("request_id") || body["request_id"].is_null()) return "";
    return read_field("request_id", [&] { return json_string(body["request_id"], "request_id"); });
  }

  Json parse_body(const httplib::Request& req) const { return parse_json_input<Json>(req.body, "request body"); }

  // vLLM's rule: a request's own chat template is Jinja run on this server, so it is taken only
  // from trusted clients (--trust-request-chat-template).
  void check_request_chat_template(const PromptInput& prompt) const {
    if (prompt.chat_template.empty() || options.trust_request_chat_template) return;
    throw_bad_param("chat_template",
                    "Chat template is passed with request, but --trust-request-chat-template is not set. Refused "
                    "request with untrusted chat template.");
  }

  void warn_ignored(const std::vector<std::string>& fields) const {
    if (fields.empty()) return;
    std::string names;
    for (const std::string& f : fields) names += (names.empty() ? "" : ", ") + f;
    log_event(options.log_format, "warning", "ignoring unsupported fields: " + names);
  }

  void routes();
  void web_ui_routes();
  template <typename Guarded, typename WithBody>
  void rl_routes(const Guarded& guarded, const WithBody& with_body);
  // use_beam_search: each prompt's beams by run_beam_search, every step's beams submitted to the
  // engine as one-token requests beside whatever else runs; the answer is whole (a stream gets it
  // as one report), as vLLM's server gives it.
  void respond_beam_search(ApiRequest&& request, const char* id_prefix, const std::string& client_id,
                           httplib::Response& res, int connection_fd);
  void handle_generate(ApiEndpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void respond_whole(Job& job, const ApiFormatter& formatter, httplib::Response& res);
  // Waits for every slot's final output (job.outputs), calling `submit_more` before each wait; aborts
  // the job and throws Error(kCancelled) when the client leaves first.
  void await_outputs(Job& job, const std::function<void()>& submit_more = {});
  // /v1/embeddings, /pooling, /score, /rerank: every input (or pair) through process_pooling, run as
  // an engine request of its own beside whatever else runs; the response once all are pooled.
  void handle_pooling(PoolingEndpoint endpoint, const httplib::Request& req, httplib::Response& res);
  // Throws Error(kInvalidArgument, "model") when this model cannot answer `endpoint`.
  void check_pooling_model(PoolingEndpoint endpoint) const;
  // Runs `requests` (from process_pooling) as job `id`'s slots, a window of them in the engine at
  // once; returns each one's output (RequestOutput::pooled), in order.
  std::vector<RequestOutput> run_pooling(std::vector<EngineRequest> requests, const std::string& id, int connection_fd);
  void respond_stream(const std::shared_ptr<Job>& job, const std::shared_ptr<ApiFormatter>& formatter,
                      const std::shared_ptr<OpenResponse>& open, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<Job> start_job(ApiRequest&& request, const char* id_prefix);
  void abort_job(const Job& job) {
    for (size_t s = 0; s < job.engine_ids.size(); ++s)
      if (!job.finished[s]) engine.abort(job.engine_ids[s]);
  }
  // Takes the job's channel items: marks acceptances and finished slots and returns the reports
  // (slot, report) in the order they came. Throws Error for an error item (after aborting the rest).
  std::vector<std::pair<size_t, RequestOutput>> apply(Job& job, std::vector<OutputChannel::Item>& items,
                                                      std::vector<bool>* accepted);
};

std::vector<std::pair<size_t, RequestOutput>> HttpServer::Impl::apply(Job& job, std::vector<OutputChannel::Item>& items,
                                                                      std::vector<bool>* accepted) {
  std::vector<std::pair<size_t, RequestOutput>> reports;
  for (OutputChannel::Item& item : items) {
    if (!item.error.empty()) {
      job.finished[item.slot] = true;
      abort_job(job);
      const std::string where = job.finished.size() > 1 ? "prompt " + std::to_string(item.slot) + ": " : "";
      throw Error(item.internal_error ? ErrorCode::kInternal : ErrorCode::kInvalidArgument, where + item.error);
    }
    if (item.accepted) {
      if (accepted) (*accepted)[item.slot] = true;
      continue;
    }
    if (!item.report) continue;
    if (item.report->finished && !job.finished[item.slot]) {
      job.finished[item.slot] = true;
      ++job.num_finished;
    }
    reports.emplace_back(item.slot, std::move(*item.report));
  }
  return reports;
}

std::shared_ptr<Job> HttpServer::Impl::start_job(ApiRequest&& request, const char* prefix) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  ApiRequest& r = job->request;
  // The front door: every prompt rendered, tokenized and checked before any is submitted, so a
  // bad one refuses the whole request.
  const MaxTokensRule rule = max_tokens_rule(r);
  // A request without a seed gets one, reported in its response ("seed"), so it can be repeated.
  if (!r.params.seed) r.params.seed = draw_seed();
  // A stream takes each step's new tokens; a response waits for the whole output.
  r.params.output_kind = r.stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  std::vector<EngineRequest> engine_requests;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    try {
      try {
        engine_requests.push_back(llm.input_processor().process(r.prompts[i], r.params, rule, r.max_tokens_field));
      } catch (const Error& e) {
        rethrow_naming_constraint_field(e, r.constraint_field);
      }
    } catch (const Error& e) {
      if (r.prompts.size() == 1) throw;
      throw Error(e.code(), "prompt " + std::to_string(i) + ": " + e.what(), e.param());
    }
    job->prompt_texts.push_back(r.echo && r.prompts[i].token_ids
                                    ? llm.input_processor().decode(engine_requests.back().prompt_token_ids)
                                    : engine_requests.back().prompt);
  }
  check_tokens_per_request(engine_requests, r);
  job->id = new_id(prefix);
  job->created = static_cast<int64_t>(std::time(nullptr));
  job->finished.assign(r.prompts.size(), false);
  job->outputs.resize(r.prompts.size());
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::string engine_id = r.prompts.size() > 1 ? job->id + "-" + std::to_string(i) : job->id;
    engine_requests[i].request_id = engine_id;
    engine_requests[i].output_parsers = r.parsers;
    try {
      engine.submit(std::move(engine_requests[i]), job->channel, i);
    } catch (const Error& e) {
      abort_job(*job);
      throw;  // kResourceExhausted (queue full, shutting down) → 503
    }
    job->engine_ids.push_back(engine_id);
  }
  // Wait until the engine has taken every prompt, so a refusal is an HTTP error, not a broken
  // stream.
  std::vector<bool> accepted(r.prompts.size(), false);
  while (!std::all_of(accepted.begin(), accepted.end(), [](bool a) { return a; })) {
    std::vector<OutputChannel::Item> items = job->channel->pop(std::chrono::milliseconds(1000));
    for (auto& report : apply(*job, items, &accepted)) job->early_reports.push_back(std::move(report));
  }
  return job;
}

void HttpServer::Impl::handle_generate(ApiEndpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto open = std::make_shared<OpenResponse>(open_responses);  // a stream hands it to its releaser
  const Json body = parse_body(req);
  const std::string client_id = client_request_id(req, body);
  ApiRequest request =
      parse_api_request(endpoint, body, llm.args().max_logprobs, llm.input_processor().default_sampling_params());
  check_model(request.model);
  warn_ignored(request.ignored_fields);
  const bool chat = endpoint == ApiEndpoint::kChatCompletions;
  if (chat) check_request_chat_template(request.prompts[0]);
  request.system_fingerprint = llm.system_fingerprint();
  request.report_weight_version = options.dev_mode;
  request.prompt_tokens_details = options.enable_prompt_tokens_details;
  request.return_tokens_as_token_ids = request.return_tokens_as_token_ids || options.return_tokens_as_token_ids;
  // Current vLLM's --enable-force-include-usage: usage on every chunk (continuous) and at the end.
  if (request.stream && options.enable_force_include_usage)
    request.include_usage = request.continuous_usage_stats = true;
  if (chat) {
    if (request.tool_choice_none && options.exclude_tools_when_tool_choice_none) request.prompts[0].tools.clear();
    request.prompts[0].chat_template_content_format = options.chat_template_content_format;
    request.parsers.reasoning = !options.reasoning_parser.empty();
    // vLLM's qwen3 parser: a request that turns thinking off has no reasoning (output_parsers.h).
    request.parsers.thinking_disabled =
        options.reasoning_parser == "qwen3" && thinking_disabled(request.prompts[0].chat_template_kwargs);
    // vLLM's rule: tools without tool_choice mean "auto", which needs the server's tool-call parser;
    // "required" and a named function need none (the output is constrained to the calls).
    const bool auto_tools = !request.prompts[0].tools.empty() && !request.tool_choice_none &&
                            request.forced_tool_choice == ForcedToolChoice::kNone;
    if (!options.enable_auto_tool_choice && auto_tools)
      throw Error(ErrorCode::kInvalidArgument,
                  "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                  "tool_choice");
    // A constrained output starts at its first token (the grammar admits no <think> block), so it is
    // never reasoning: the reasoning parser would take an output without </think> as all reasoning.
    if (request.params.structured_outputs) request.parsers.reasoning = false;
    if (options.enable_auto_tool_choice && auto_tools) {
      request.parsers.tool_call_parser = *tool_call_parser_named(options.tool_call_parser);
      request.parsers.tools = request.prompts[0].tools;
    }
  }
  if (request.use_beam_search)
    return respond_beam_search(std::move(request), chat ? "chatcmpl-" : "cmpl-", client_id, res,
                               connection_fd(req.remote_addr, req.remote_port, req.local_port));
  const char* prefix = chat ? "chatcmpl-" : "cmpl-";
  std::shared_ptr<Job> job = start_job(std::move(request), prefix);
  // The engine's ids stay the server's own (unique); the client's id names only the response.
  const std::string response_id = client_id.empty() ? job->id : prefix + client_id;
  access_record().request_id = response_id;
  remember_response(response_id, job->engine_ids);
  job->connection_fd = connection_fd(req.remote_addr, req.remote_port, req.local_port);
  auto formatter = std::make_shared<ApiFormatter>(job->request, llm.input_processor(), response_id, job->created,
                                                  options.served_model_name, job->prompt_texts);

  if (job->request.stream) {
    respond_stream(job, formatter, open, res);
  } else {
    respond_whole(*job, *formatter, res);
  }
}

void HttpServer::Impl::respond_beam_search(ApiRequest&& request, const char* id_prefix, const std::string& client_id,
                                           httplib::Response& res, int connection_fd) {
  ApiRequest& r = request;
  BeamSearchParams bp;
  bp.beam_width = r.params.n;
  bp.max_tokens = r.params.max_tokens;
  bp.ignore_eos = r.params.ignore_eos;
  bp.temperature = r.params.temperature;
  bp.length_penalty = r.length_penalty;
  bp.include_stop_str_in_output = r.params.include_stop_str_in_output;
  try {
    bp.validate(llm.args().max_logprobs);
  } catch (const Error& e) {  // beam_width is the request's n
    throw Error(e.code(),
                e.param() == "beam_width" ? std::string("use_beam_search: n is the beam width; ") + e.what()
                                          : std::string(e.what()),
                e.param() == "beam_width" ? "n" : e.param());
  }
  if (!r.params.seed) r.params.seed = draw_seed();
  // The front door for each prompt as the request gives it (length, vocabulary, max_tokens).
  SamplingParams door = r.params;
  door.n = 1;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    EngineRequest e = llm.input_processor().process(r.prompts[i], door, max_tokens_rule(r), r.max_tokens_field);
    bp.max_tokens = std::min(bp.max_tokens, e.params.max_tokens);
    prompt_ids.push_back(e.prompt_token_ids);
    prompt_texts.push_back(r.echo && r.prompts[i].token_ids ? llm.input_processor().decode(e.prompt_token_ids)
                                                            : e.prompt);
  }
  const std::string id = new_id(id_prefix);  // the engine's; the client's own names the response
  const std::string response_id = client_id.empty() ? id : id_prefix + client_id;
  access_record().request_id = response_id;
  const int64_t context = llm.max_model_len();
  int64_t counter = 0;
  const BeamStepFn step = [&](const std::vector<BeamStepRequest>& requests) {
    auto channel = std::make_shared<OutputChannel>();
    Job job;
    job.channel = channel;
    std::vector<std::optional<SampledToken>> out(requests.size());
    std::vector<size_t> slot_of(requests.size(), SIZE_MAX);
    for (size_t k = 0; k < requests.size(); ++k) {
      if (static_cast<int64_t>(requests[k].tokens->size()) >= context) continue;  // the beam cannot grow
      SamplingParams p;
      p.max_tokens = 1;
      p.ignore_eos = true;
      p.temperature = bp.temperature;
      p.logprobs = 2 * bp.beam_width;
      p.seed = requests[k].seed;
      EngineRequest e = llm.input_processor().process(PromptInput{.token_ids = *requests[k].tokens}, p,
                                                      MaxTokensRule::kClipToContext);
      e.request_id = id + "-beam-" + std::to_string(counter++);
      slot_of[k] = job.engine_ids.size();
      job.engine_ids.push_back(e.request_id);
      engine.submit(std::move(e), channel, slot_of[k]);
    }
    job.finished.assign(job.engine_ids.size(), false);
    std::vector<RequestOutput> results(job.engine_ids.size());
    try {
      while (job.num_finished < job.engine_ids.size()) {
        std::vector<OutputChannel::Item> items = channel->pop(std::chrono::milliseconds(200));
        for (auto& [slot, output] : apply(job, items, nullptr)) results[slot] = std::move(output);
        if (job.num_finished < job.engine_ids.size() && peer_closed(connection_fd))
          throw Error(ErrorCode::kCancelled, "the client disconnected before the response was ready");
      }
    } catch (...) {
      abort_job(job);
      throw;
    }
    for (size_t k = 0; k < requests.size(); ++k)
      if (slot_of[k] != SIZE_MAX) out[k] = std::move(results[slot_of[k]].outputs.at(0).logprobs.at(0));
    return out;
  };
  const std::vector<BeamSearchOutput> beams =
      run_beam_search(prompt_ids, bp, llm.eos_token_ids(), *r.params.seed, step);
  // Each prompt's beams as its RequestOutput: choice i is beam i (best first).
  std::vector<RequestOutput> outputs(beams.size());
  access_record().prompt_tokens = access_record().completion_tokens = 0;
  for (size_t i = 0; i < beams.size(); ++i) {
    RequestOutput& o = outputs[i];
    o.request_id = id;
    o.prompt_token_ids = prompt_ids[i];
    o.seed = *r.params.seed;
    o.finished = true;
    access_record().prompt_tokens += static_cast<int64_t>(prompt_ids[i].size());
    for (size_t b = 0; b < beams[i].sequences.size(); ++b) {
      const BeamSearchSequence& s = beams[i].sequences[b];
      CompletionOutput c;
      c.index = static_cast<int64_t>(b);
      c.token_ids.assign(s.tokens.begin() + s.num_prompt_tokens, s.tokens.end());
      // A final EOS is text only with include_stop_str_in_output (vLLM's beam search rule).
      std::vector<int32_t> text_ids = c.token_ids;
      if (s.finish_reason == "stop" && !bp.include_stop_str_in_output && !text_ids.empty()) text_ids.pop_back();
      c.text = llm.input_processor().decode(text_ids, r.params.skip_special_tokens);
      c.cumulative_logprob = s.cum_logprob;
      c.finish_reason = s.finish_reason;
      if (r.logprobs)
        for (SampledToken t : s.logprobs) {
          if (t.top_logprobs.size() > static_cast<size_t>(*r.logprobs))
            t.top_logprobs.resize(static_cast<size_t>(*r.logprobs));
          c.logprobs.push_back(std::move(t));
        }
      access_record().completion_tokens += static_cast<int64_t>(c.token_ids.size());
      access_record().finished(c.finish_reason);
      o.outputs.push_back(std::move(c));
    }
  }
  ApiFormatter formatter(r, llm.input_processor(), response_id, static_cast<int64_t>(std::time(nullptr)),
                         options.served_model_name, prompt_texts);
  if (!r.stream) return send_json(res, 200, formatter.response(outputs));
  std::string body;
  for (size_t i = 0; i < outputs.size(); ++i)
    for (const Json& chunk : formatter.stream_chunks(i, outputs[i])) body += "data: " + dump_json(chunk) + "\n\n";
  if (r.include_usage) body += "data: " + dump_json(formatter.usage_chunk()) + "\n\n";
  body += "data: [DONE]\n\n";
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_content(body, "text/event-stream");
}

void HttpServer::Impl::await_outputs(Job& job, const std::function<void()>& submit_more) {
  for (auto& [slot, output] : std::exchange(job.early_reports, {})) job.outputs[slot] = std::move(output);
  try {
    while (job.num_finished < job.outputs.size()) {
      if (submit_more) submit_more();
      std::vector<OutputChannel::Item> items = job.channel->pop(std::chrono::milliseconds(200));
      for (auto& [slot, output] : apply(job, items, nullptr)) job.outputs[slot] = std::move(output);
      if (job.num_finished < job.outputs.size() && peer_closed(job.connection_fd))
        throw Error(ErrorCode::kCancelled, "the client disconnected before the response was ready");
    }
  } catch (...) {
    abort_job(job);  // nobody will read the answer: free the engine for others
    throw;
  }
}

// A non-streamed response: waits for every slot's final output, aborting if the client leaves.
void HttpServer::Impl::respond_whole(Job& job, const ApiFormatter& formatter, httplib::Response& res) {
  await_outputs(job);
  job.complete = true;
  access_record().prompt_tokens = access_record().completion_tokens = 0;
  for (const RequestOutput& out : job.outputs) {
    access_record().prompt_tokens += static_cast<int64_t>(out.prompt_token_ids.size());
    for (const CompletionOutput& c : out.outputs) {
      access_record().completion_tokens += static_cast<int64_t>(c.token_ids.size());
      access_record().finished(c.finish_reason);
    }
  }
  send_json(res, 200, formatter.response(job.outputs));
}

// A streamed response: each report's chunks as it arrives, then the usage chunk and [DONE]; the
// releaser aborts the job if the client left first.
void HttpServer::Impl::respond_stream(const std::shared_ptr<Job>& job, const std::shared_ptr<ApiFormatter>& formatter,
                                      const std::shared_ptr<OpenResponse>& open, httplib::Response& res) {
  res.status = 200;
  access_record().stream_open = access_record().stream_running = true;  // until [DONE] (AccessRecord::end_response)
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, formatter](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        std::vector<std::pair<size_t, RequestOutput>> reports = std::exchange(job->early_reports, {});
        if (reports.empty()) {
          std::vector<OutputChannel::Item> items = job->channel->pop(std::chrono::milliseconds(200));
          if (items.empty() && peer_closed(job->connection_fd)) return false;  // gone before a write noticed
          try {
            reports = apply(*job, items, nullptr);
          } catch (const Error& e) {
            access_record().error = e.what();
            send(dump_json(to_api_error(e).body()));
            send("[DONE]");
            job->complete = true;
            access_record().stream_open = false;
            sink.done();
            return true;
          }
        }
        std::vector<Json> chunks;
        for (const auto& [slot, report] : reports) {
          for (const CompletionOutput& c : report.outputs) access_record().finished(c.finish_reason);
          for (Json& chunk : formatter->stream_chunks(slot, report)) chunks.push_back(std::move(chunk));
        }
        // The record first: a failed write below ends the response (AccessRecord::end_response).
        std::tie(access_record().prompt_tokens, access_record().completion_tokens) = formatter->streamed_tokens();
        access_record().stream_running = job->num_finished < job->outputs.size();
        for (const Json& chunk : chunks)
          if (!send(dump_json(chunk))) return false;  // the client is gone: the releaser aborts
        if (job->num_finished == job->outputs.size()) {
          if (job->request.include_usage && !send(dump_json(formatter->usage_chunk()))) return false;
          if (!send("[DONE]")) return false;
          job->complete = true;
          access_record().stream_open = false;
          sink.done();
        }
        return true;
      },
      [this, job, open](bool) {
        if (!job->complete) abort_job(*job);
      });
}

void HttpServer::Impl::check_pooling_model(PoolingEndpoint endpoint) const {
  const PoolerConfig& pooler = llm.pooler();
  const char* route = endpoint == PoolingEndpoint::kEmbeddings ? "/v1/embeddings"
                      : endpoint == PoolingEndpoint::kPooling  ? "/pooling"
                      : endpoint == PoolingEndpoint::kScore    ? "/score"
                                                               : "/rerank";
  if (!pooler.pooling)
    throw_bad_param("model", "The model `" + options.served_model_name + "` runs generation and does not answer " +
                                 route +
                                 ": start the server with --runner pooling (an embedding model) or --task score (a "
                                 "reranker)");
  if (endpoint == PoolingEndpoint::kEmbeddings && pooler.task == PoolingTask::kScore)
    throw_bad_param("model", "The model `" + options.served_model_name +
                                 "` is a reranker (task score): it answers /score, /rerank and /pooling, not "
                                 "/v1/embeddings");
}

std::vector<RequestOutput> HttpServer::Impl::run_pooling(std::vector<EngineRequest> requests, const std::string& id,
                                                         int connection_fd) {
  // A request of many inputs enters the engine a window at a time, so it never fills the queue
  // (--max-queued-requests) by itself; which requests share a step changes no bit.
  const auto window = static_cast<size_t>(std::clamp<int64_t>(options.max_queued_requests / 2, 1, 256));
  Job job;
  job.id = id;
  job.connection_fd = connection_fd;
  job.finished.assign(requests.size(), false);
  job.outputs.resize(requests.size());
  size_t next = 0;
  await_outputs(job, [&] {
    for (; next < requests.size() && next - job.num_finished < window; ++next) {
      const std::string engine_id = requests.size() > 1 ? id + "-" + std::to_string(next) : id;
      requests[next].request_id = engine_id;
      requests[next].params.output_kind = RequestOutputKind::kFinalOnly;
      engine.submit(std::move(requests[next]), job.channel, next);  // kResourceExhausted → 503
      job.engine_ids.push_back(engine_id);
    }
  });
  for (size_t i = 0; i < job.outputs.size(); ++i)
    if (job.outputs[i].pooled.empty())  // aborted: the server is shutting down
      throw Error(ErrorCode::kResourceExhausted, "input " + std::to_string(i) + " was aborted before it was pooled");
  return std::move(job.outputs);
}

void HttpServer::Impl::handle_pooling(PoolingEndpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  OpenResponse open(open_responses);
  const Json body = parse_body(req);
  const std::string client_id = client_request_id(req, body);
  PoolingApiRequest r = parse_pooling_request(endpoint, body);
  check_model(r.model);
  warn_ignored(r.ignored_fields);
  check_pooling_model(endpoint);
  const bool pairs = endpoint == PoolingEndpoint::kScore || endpoint == PoolingEndpoint::kRerank;
  for (PromptInput& p : r.inputs) {  // a client's chats (a score pair's template is the server's own)
    if (!p.messages) continue;
    check_request_chat_template(p);
    p.chat_template_content_format = options.chat_template_content_format;
  }
  ScorePlan plan;
  std::vector<PromptInput> prompts = std::move(r.inputs);
  if (pairs) {
    plan = plan_scores(llm.pooler(), r.text_1, r.text_2, r.chat_template_kwargs);
    if (plan.task != "score" && !r.chat_template_kwargs.empty())
      throw Error(ErrorCode::kInvalidArgument,
                  "chat_template_kwargs apply to a reranker's score template; this model scores by embeddings",
                  "chat_template_kwargs");
    prompts = plan.prompts;
    r.params.task = plan.task;
  }
  // Where a prompt came from, for its errors: "input 3", or the score field holding its text.
  const auto origin = [&](size_t i) -> std::pair<std::string, std::string> {
    const std::string input_field = r.chat ? "messages" : "input";
    if (!pairs) return {input_field, "input " + std::to_string(i)};
    if (plan.task == "score") return {r.text_2_field, "pair " + std::to_string(i)};
    const bool first = std::find(r.text_1.begin(), r.text_1.end(), *prompts[i].text) != r.text_1.end();
    return {first ? r.text_1_field : r.text_2_field, "text '" + prompts[i].text->substr(0, 40) + "'"};
  };
  std::vector<EngineRequest> requests;
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      requests.push_back(llm.input_processor().process_pooling(prompts[i], r.params));
    } catch (const Error& e) {
      // The front door names "input"; on /score and /rerank that is one of the request's texts.
      const auto [field, where] = origin(i);
      const std::string param = e.param() == "input" ? field : e.param();
      if (prompts.size() == 1) throw Error(e.code(), e.what(), param);
      throw Error(e.code(), where + ": " + e.what(), param);
    }
    prompt_tokens += static_cast<int64_t>(requests.back().prompt_token_ids.size());
  }
  if (prompt_tokens > max_tokens_per_request())
    throw_bad_param(origin(0).first, "the request has " + std::to_string(prompt_tokens) +
                                         " prompt tokens, more than this server allows per request "
                                         "(--max-tokens-per-request " +
                                         std::to_string(max_tokens_per_request()) + ")");
  const char* prefix = endpoint == PoolingEndpoint::kEmbeddings ? "embd-"
                       : endpoint == PoolingEndpoint::kPooling  ? "pool-"
                       : endpoint == PoolingEndpoint::kScore    ? "score-"
                                                                : "rerank-";
  const std::string id = new_id(prefix);  // the engine's; the client's own names the response
  const std::string response_id = client_id.empty() ? id : prefix + client_id;
  access_record().request_id = response_id;
  const std::vector<RequestOutput> outputs =
      run_pooling(std::move(requests), id, connection_fd(req.remote_addr, req.remote_port, req.local_port));
  std::vector<std::vector<float>> data;
  if (pairs) {
    for (const auto& [a, b] : plan.pairs) data.push_back({plan.score(outputs[a].pooled, outputs[b].pooled)});
  } else {
    for (const RequestOutput& o : outputs) data.push_back(o.pooled);
  }
  access_record().prompt_tokens = prompt_tokens;
  access_record().completion_tokens = 0;
  access_record().finished("stop");
  send_json(res, 200,
            pooling_response(r, response_id, static_cast<int64_t>(std::time(nullptr)), options.served_model_name, data,
                             prompt_tokens));
}

void HttpServer::Impl::routes() {
  auto guarded = [](auto handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
      } catch (const Error& e) {
        send_error(res, to_api_error(e));
      } catch (const std::bad_alloc&) {
        send_error(res, to_api_error(Error(ErrorCode::kInternal, "out of memory")));
      }
    };
  };

  // POST bodies are read here, within --max-request-body-bytes (read_body). With optional_body an
  // empty body needs no JSON Content-Type (POST /pause?mode=keep).
  auto with_body = [this, guarded](auto handler, bool optional_body = false) {
    return [this, optional_body, h = guarded(handler)](const httplib::Request& req, httplib::Response& res,
                                                       const httplib::ContentReader& reader) {
      std::string body;
      // A bodiless POST (framing_error lets one through only where optional_body) has nothing to read.
      const bool bodiless = !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding");
      if (const std::optional<ApiError> e =
              optional_body && bodiless ? std::nullopt : read_body(reader, options.max_request_body_bytes, body);
          e || res.status == 413) {
        send_error(res, e ? *e : body_too_large(options.max_request_body_bytes));
        res.set_header("Connection", "close");
        return;
      }
      if (!(optional_body && body.empty()))
        if (const std::optional<ApiError> e = json_content_type_error(req)) return send_error(res, *e);
      httplib::Request with = req;
      with.body = std::move(body);
      h(with, res);
    };
  };
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    access_record() = AccessRecord{};  // the access log's record of this request starts here
    access_record().start = std::chrono::steady_clock::now();
    if (options.enable_request_id_headers)
      res.set_header("X-Request-Id",
                     req.has_header("X-Request-Id") ? req.get_header_value("X-Request-Id") : random_hex_id());
    // vLLM's CORSMiddleware answers a preflight; its AuthenticationMiddleware lets preflights by.
    if (is_cors_preflight(req)) {
      answer_cors_preflight(options.cors, req, res);
      return R::Handled;
    }
    add_cors_headers(options.cors, req, res);
    if (ConnectionQueue::refusing() || draining.load()) {
      const bool busy = ConnectionQueue::refusing();
      send_error(res,
                 ApiError(503, http_reason_phrase(503),
                          busy ? "the server holds its limit of " + std::to_string(connections->max_connections()) +
                                     " connections (--max-connections); retry later"
                               : "the server is shutting down; retry on another replica or later"));
      res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      return R::Handled;
    }
    // Framing first, from the headers alone, before any body is read.
    if (const std::optional<ApiError> e = framing_error(
            req, options.max_request_body_bytes, is_rl_post_route(strip_root_path(options.root_path, req.path)))) {
      send_error(res, *e);
      res.set_header("Connection", "close");
      return R::Handled;
    }
    if (options.api_key.empty() ||
        !path_needs_api_key(strip_root_path(options.root_path, req.path), options.enable_web_ui))
      return R::Unhandled;
    // "Bearer" is case-insensitive (RFC 9110 §11.1); the key is not.
    if (bearer_token_matches(req.get_header_value("Authorization"), options.api_key)) return R::Unhandled;
    send_error(res, to_api_error(Error(ErrorCode::kUnauthenticated,
                                       req.has_header("Authorization")
                                           ? "Incorrect API key provided."
                                           : "Missing API key: send 'Authorization: Bearer <key>'.")));
    return R::Handled;
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) send_error(res, http_status_error(req, res.status));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, to_api_error(Error(ErrorCode::kInternal, what)));
  });
  server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    access_record().end_response();
    metrics.record_http(http_exchange(req, res));
    if (!options.disable_log_requests) log_access(options.log_format, req, res);
    access_record() = AccessRecord{};
  });

  auto at = [this](const std::string& path) { return route_pattern(options.root_path, path); };
  server.Post(at("/v1/completions"), with_body([this](const httplib::Request& req, httplib::Response& res) {
                handle_generate(ApiEndpoint::kCompletions, req, res);
              }));
  server.Post(at("/v1/chat/completions"), with_body([this](const httplib::Request& req, httplib::Response& res) {
                handle_generate(ApiEndpoint::kChatCompletions, req, res);
              }));
  // SageMaker's /invocations (vLLM's): a body with messages is a chat, one with a prompt a completion.
  server.Post(at("/invocations"), with_body([this](const httplib::Request& req, httplib::Response& res) {
                const Json body = parse_body(req);
                if (body.is_object() && body.contains("messages"))
                  return handle_generate(ApiEndpoint::kChatCompletions, req, res);
                if (body.is_object() && body.contains("prompt"))
                  return handle_generate(ApiEndpoint::kCompletions, req, res);
                throw_invalid_argument(
                    "Cannot find suitable handler for request. Expected one of: ['ChatCompletionRequest' (with "
                    "messages), 'CompletionRequest' (with prompt)]");
              }));
  const std::pair<const char*, PoolingEndpoint> pooling_routes[] = {{"/v1/embeddings", PoolingEndpoint::kEmbeddings},
                                                                    {"/pooling", PoolingEndpoint::kPooling},
                                                                    {"/score", PoolingEndpoint::kScore},
                                                                    {"/v1/score", PoolingEndpoint::kScore},
                                                                    {"/rerank", PoolingEndpoint::kRerank},
                                                                    {"/v1/rerank", PoolingEndpoint::kRerank},
                                                                    {"/v2/rerank", PoolingEndpoint::kRerank}};
  for (const auto& [path, endpoint] : pooling_routes)
    server.Post(at(path), with_body([this, e = endpoint](const httplib::Request& req, httplib::Response& res) {
                  handle_pooling(e, req, res);
                }));
  server.Get(at("/v1/models"), guarded([this](const httplib::Request&, httplib::Response& res) {
               Json data = Json::array();
               for (const std::string& name : served_names()) data.push_back(model_card(name));
               send_json(res, 200, {{"object", "list"}, {"data", std::move(data)}});
             }));
  // The OpenAI client's models.retrieve: one model's card, by any name it is served as.
  server.Get(at("/v1/models/(.+)"), guarded([this](const httplib::Request& req, httplib::Response& res) {
               const std::string name = req.matches[1];
               const std::vector<std::string> names = served_names();
               if (std::find(names.begin(), names.end(), name) == names.end()) check_model(name);  // throws 404
               send_json(res, 200, model_card(name));
             }));
  refuse_other_methods(server, options.root_path,
                       {{"/v1/completions", "POST"},
                        {"/v1/chat/completions", "POST"},
                        {"/invocations", "POST"},
                        {"/v1/embeddings", "POST"},
                        {"/pooling", "POST"},
                        {"/score", "POST"},
                        {"/v1/score", "POST"},
                        {"/rerank", "POST"},
                        {"/v1/rerank", "POST"},
                        {"/v2/rerank", "POST"},
                        {"/tokenize", "POST"},
                        {"/detokenize", "POST"},
                        {"/v1/models", "GET"},
                        {"/health", "GET"},
                        {"/version", "GET"},
                        {"/load", "GET"}});
  server.Get(at("/health"), [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  // SageMaker's health check (vLLM's): /health by another name, GET or POST.
  server.Get(at("/ping"), [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Post(at("/ping"), [](const httplib::Request&, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string ignored;
    (void)read_body(reader, 1 << 20, ignored);
    res.status = 200;
  });
  server.Get(at("/version"), [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", options.version}});
  });
  // vLLM's server load: the generation requests whose responses are not fully written yet.
  server.Get(at("/load"), [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"server_load", open_responses.load()}});
  });
  if (options.enable_tokenizer_info_endpoint) {
    server.Get(at("/tokenizer_info"), guarded([this](const httplib::Request&, httplib::Response& res) {
                 Json info = Json::parse(llm.input_processor().tokenizer_config().dump());
                 if (!info.contains("tokenizer_class")) info["tokenizer_class"] = "PreTrainedTokenizerFast";
                 send_json(res, 200, info);
               }));
  }
  // Every method, as vLLM's mounted metrics app (metrics_http.h).
  const auto metrics_handler = [this](const httplib::Request& req, httplib::Response& res) {
    serve_metrics(metrics, req, res);
  };
  server.Get(at("/metrics"), metrics_handler);
  server.Post(at("/metrics"), metrics_handler);
  server.Put(at("/metrics"), metrics_handler);
  server.Patch(at("/metrics"), metrics_handler);
  server.Delete(at("/metrics"), metrics_handler);
  server.Options(at("/metrics"), metrics_handler);
  server.Post(at("/tokenize"),
              with_body([this](const httplib::Request& req, httplib::Response& res) { handle_tokenize(req, res); }));
  if (options.enable_web_ui) web_ui_routes();
  rl_routes(guarded, with_body);
  server.Post(at("/detokenize"),
              with_body([this](const httplib::Request& req, httplib::Response& res) { handle_detokenize(req, res); }));
}

// vLLM's development routes for RL (server/rl_api.h), with VLLM_SERVER_DEV_MODE=1 (options.dev_mode);
// without it each answers 404 saying how to turn them on.
template <typename Guarded, typename WithBody>
void HttpServer::Impl::rl_routes(const Guarded& guarded, const WithBody& with_body) {
  const auto dev = [this](const std::string& path) {
    if (!options.dev_mode)
      throw Error(ErrorCode::kNotFound, path + " is a development route: start the server with VLLM_SERVER_DEV_MODE=1");
  };
  const auto query = [](const httplib::Request& req, const char* key, const std::string& fallback) {
    return req.has_param(key) ? req.get_param_value(key) : fallback;
  };
  const auto body_or_null = [this](const httplib::Request& req) {
    return req.body.empty() ? Json(nullptr) : parse_body(req);
  };
  auto at = [this](const std::string& path) { return route_pattern(options.root_path, path); };
  using Handler = std::function<Json(const httplib::Request&)>;
  const auto post = [&](const std::string& path, Handler h) {
    server.Post(at(path), with_body(
                              [path, h, dev](const httplib::Request& req, httplib::Response& res) {
                                dev(path);
                                send_json(res, 200, h(req));
                              },
                              /*optional_body=*/true));
  };
  const auto get = [&](const std::string& path, Handler h) {
    server.Get(at(path), guarded([path, h, dev](const httplib::Request& req, httplib::Response& res) {
                 dev(path);
                 send_json(res, 200, h(req));
               }));
  };
  post("/pause", [this, query](const httplib::Request& req) { return rl.pause(query(req, "mode", "abort")); });
  post("/resume", [this](const httplib::Request&) { return rl.resume(); });
  get("/is_paused", [this](const httplib::Request&) { return rl.is_paused(); });
  post("/abort_requests",
       [this, body_or_null](const httplib::Request& req) { return rl.abort_requests(body_or_null(req)); });
  post("/sleep", [this, query](const httplib::Request& req) {
    const std::string level = query(req, "level", "1");
    if (level != "1" && level != "2") throw_invalid_field("level", "field 'level' must be 1 or 2, got '" + level + "'");
    return rl.sleep(level == "1" ? 1 : 2);
  });
  post("/wake_up", [this](const httplib::Request&) { return rl.wake_up(); });
  get("/is_sleeping", [this](const httplib::Request&) { return rl.is_sleeping(); });
  post("/init_weight_transfer_engine",
       [this, body_or_null](const httplib::Request& req) { return rl.init_weight_transfer_engine(body_or_null(req)); });
  post("/start_weight_update", [this](const httplib::Request&) { return rl.start_weight_update(); });
  post("/update_weights",
       [this, body_or_null](const httplib::Request& req) { return rl.update_weights(body_or_null(req)); });
  post("/finish_weight_update",
       [this, body_or_null](const httplib::Request& req) { return rl.finish_weight_update(body_or_null(req)); });
  get("/weight_info", [this](const httplib::Request&) { return rl.weight_info(); });
}

// The web page's files (server/web_ui.h) at "/", "/index.html" and "/assets/...", under --root-path
// too; "<root-path>" without its slash is sent to "<root-path>/", where the page's relative URLs work.
void HttpServer::Impl::web_ui_routes() {
  const auto serve = [](const WebAsset& asset) {
    return [&asset](const httplib::Request&, httplib::Response& res) {
      res.set_content(asset.body.data(), asset.body.size(), std::string(asset.content_type).c_str());
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy", std::string(web_ui_content_security_policy()));
      res.set_header("Referrer-Policy", "no-referrer");
    };
  };
  for (const WebAsset& asset : web_assets())
    server.Get(route_pattern(options.root_path, regex_escape(asset.path)), serve(asset));
  server.Get(route_pattern(options.root_path, "/"), serve(*find_web_asset("/")));
  if (!options.root_path.empty())
    server.Get(regex_escape(options.root_path), [this](const httplib::Request&, httplib::Response& res) {
      res.set_redirect(options.root_path + "/", 301);
    });
}

// POST /tokenize (vLLM's): a prompt or chat messages through the front door's encoder.
void HttpServer::Impl::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_body(req);
  if (!body.is_object()) throw_invalid_argument("the request body must be a JSON object");
  if (body.contains("model") && !body["model"].is_null()) check_model(model_field(body["model"]));
  PromptInput prompt;
  auto flag = [&](const char* key, bool fallback) {
    return body.contains(key) ? read_field(key, [&] { return json_bool(body[key], key); }) : fallback;
  };
  if (body.contains("messages")) {
    prompt.messages = body["messages"].dump();
    prompt.chat_template_content_format = options.chat_template_content_format;
    // vLLM's: continue_final_message continues the last message instead of opening a new turn;
    // both given as true is refused.
    prompt.continue_final_message = flag("continue_final_message", false);
    if (prompt.continue_final_message && flag("add_generation_prompt", false))
      throw_bad_param("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
    prompt.add_generation_prompt = !prompt.continue_final_message && flag("add_generation_prompt", true);
    if (body.contains("chat_template") && !body["chat_template"].is_null())
      prompt.chat_template =
          read_field("chat_template", [&] { return json_string(body["chat_template"], "chat_template"); });
    check_request_chat_template(prompt);
    if (body.contains("chat_template_kwargs")) prompt.chat_template_kwargs = body["chat_template_kwargs"].dump();
    if (body.contains("tools")) prompt.tools = body["tools"].dump();
  } else if (body.contains("prompt")) {
    prompt.text = read_field("prompt", [&] { return json_string(body["prompt"], "prompt"); });
    prompt.add_special_tokens = flag("add_special_tokens", true);
  } else {
    throw_bad_param("prompt", "give 'prompt' (a string) or 'messages'");
  }
  const std::vector<int32_t> ids = llm.input_processor().encode(prompt).first;
  Json strs = nullptr;
  if (flag("return_token_strs", false)) strs = llm.input_processor().token_strings(ids);
  send_json(res, 200, {{"count", ids.size()}, {"max_model_len", context()}, {"tokens", ids}, {"token_strs", strs}});
}

// POST /detokenize (vLLM's): token ids back to text.
void HttpServer::Impl::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_body(req);
  if (!body.is_object()) throw_invalid_argument("the request body must be a JSON object");
  if (body.contains("model") && !body["model"].is_null()) check_model(model_field(body["model"]));
  if (!body.contains("tokens")) throw_bad_param("tokens", "field 'tokens' is required");
  const std::vector<int32_t> ids = read_field("tokens", [&] { return json_token_ids(body["tokens"], "tokens"); });
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab_size())
      throw_bad_param("tokens", "tokens[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                    " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
  send_json(res, 200, {{"prompt", llm.input_processor().decode(ids)}});
}

bool path_needs_api_key(const std::string& path, bool web_ui) {
  if (web_ui && find_web_asset(path) != nullptr) return false;
  std::string p = path;
  if (p.size() > 1 && p.back() == '/') p.pop_back();
  for (const char* open : {"/health", "/ping", "/load", "/version"})
    if (p == open) return false;
  return true;
}

void validate_server_options(const ServerOptions& options) {
  if (options.served_model_name.empty()) throw_invalid_argument("--served-model-name must not be empty");
  if (!options.root_path.empty() && (options.root_path[0] != '/' || options.root_path.back() == '/'))
    throw_invalid_argument("--root-path must start with '/' and not end with one (e.g. /llm), got '" +
                           options.root_path + "'");
  for (const std::string& a : options.served_model_aliases)
    if (a.empty()) throw_invalid_argument("--served-model-name: a name must not be empty");
  if (options.max_queued_requests < 1) throw_invalid_argument("--max-queued-requests must be at least 1");
  if (options.max_request_body_bytes < 1024) throw_invalid_argument("--max-request-body-bytes must be at least 1024");
  if (options.max_connections < 1) throw_invalid_argument("--max-connections must be at least 1");
  if (options.max_tokens_per_request < 0)
    throw_invalid_argument("--max-tokens-per-request must be positive (or 0 for the default)");
  if (!options.reasoning_parser.empty() && options.reasoning_parser != "qwen3" &&
      options.reasoning_parser != "deepseek_r1")
    throw_invalid_argument("--reasoning-parser must be qwen3 or deepseek_r1, got '" + options.reasoning_parser + "'");
  if (!options.tool_call_parser.empty() && !tool_call_parser_named(options.tool_call_parser))
    throw_invalid_argument(std::string("--tool-call-parser must be ") + tool_call_parser_names() + ", got '" +
                           options.tool_call_parser + "'");
  if (options.enable_auto_tool_choice && options.tool_call_parser.empty())
    throw_invalid_argument("--enable-auto-tool-choice needs --tool-call-parser (hermes for Qwen3)");
  if (options.log_format != "text" && options.log_format != "json")
    throw_invalid_argument("--log-format must be text or json, got '" + options.log_format + "'");
}

namespace {

[[noreturn]] void throw_cannot_listen(const ServerOptions& o, const std::string& why) {
  throw_invalid_argument("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + why +
                         " (--host, --port)");
}

}  // namespace

void check_listen_address(const ServerOptions& options) {
  if (options.port == 0) return;
  if (const std::string why = bind_failure(options.host, options.port); !why.empty()) throw_cannot_listen(options, why);
}

HttpServer::HttpServer(LLMEngine& llm, const ServerOptions& options)
    : impl_((validate_server_options(options), std::make_unique<Impl>(llm, options))) {
  Impl& s = *impl_;
  (void)llm.tokenizer();  // throws Error(kNotFound) for a model without tokenizer.json: text in, text out
  const auto max_connections = static_cast<size_t>(options.max_connections);
  const size_t threads =
      std::min(max_connections, static_cast<size_t>(options.http_threads > 0 ? options.http_threads : 128 + 64));
  s.server.new_task_queue = [&s, threads, max_connections] {
    auto* q = new ConnectionQueue(threads, max_connections, std::chrono::seconds(10));
    s.connections = q;
    return q;
  };
  s.server.set_payload_max_length(static_cast<size_t>(options.max_request_body_bytes));
  s.server.set_read_timeout(options.timeout_seconds, 0);
  s.server.set_write_timeout(options.timeout_seconds, 0);
  s.server.set_keep_alive_timeout(5);
  s.server.set_socket_options([](socket_t fd) { listening_socket_options(fd); });
  s.routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  Impl& s = *impl_;
  const int port = s.options.port == 0 ? s.server.bind_to_any_port(s.options.host)
                                       : (s.server.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
  if (port < 0) {
    const std::string why = bind_failure(s.options.host, s.options.port);
    throw_cannot_listen(s.options, why.empty() ? "address in use, or not an address of this machine" : why);
  }
  s.bound_port = port;
  widen_listen_backlog(port, 1024);
  return port;
}

void HttpServer::listen() {
  Impl& s = *impl_;
  s.listen_entered = true;
  if (!s.stop_requested) s.server.listen_after_bind();
  s.listen_returned = true;
}

void HttpServer::stop() { drain(0); }

void HttpServer::drain(int grace_seconds) {
  Impl& s = *impl_;
  // New requests get 503 (and their connections close) while the ones in flight finish. The
  // listening socket stays open until then: httplib ends every stream in progress once it is closed.
  s.draining = true;
  const auto wait_for_responses = [&s](std::chrono::steady_clock::duration d) {
    const auto deadline = std::chrono::steady_clock::now() + d;
    while (s.open_responses.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  wait_for_responses(std::chrono::seconds(grace_seconds));
  // What is still running ends now (finish_reason "abort"); give those responses, streams
  // included, a moment to be written in full before the sockets close.
  s.engine.abort_all();
  wait_for_responses(std::chrono::seconds(5));
  // httplib's stop() returns at once (listen() returns once every HTTP thread is done), but does
  // nothing before its accept loop has started: a stop that comes between bind() and that start
  // would be lost and listen() would run on. listen() checks stop_requested before it starts;
  // if it had already passed that check, wait for the loop to run and stop it then.
  s.stop_requested = true;
  if (!s.listen_entered) return;  // listen() will see stop_requested and not start
  while (!s.listen_returned) {
    if (s.server.is_running()) {
      s.server.stop();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace ditto
