// `ditto serve MODEL`: the OpenAI-compatible server (src/server/http_server.h).
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/hub.h"
#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory_info.h"
#include "core/thread_pool.h"
#include "engine/generation_defaults.h"
#include "engine/llm_engine.h"
#include "engine/speculative.h"
#include "model_options.h"
#include "server/http_responses.h"
#include "server/http_server.h"
#include "vllm_flags.h"

namespace ditto {
namespace {

struct ServeOptions {
  EngineArgs engine;  // engine.model: the positional MODEL (or --model, as vLLM's)
  std::string model_flag;
  std::string tokenizer;  // vLLM's --tokenizer: only the model's own
  std::vector<std::string> served_model_names;
  ServerOptions server;
  std::string max_request_body = "32MiB";
  int shutdown_timeout = 60;  // vLLM's --shutdown-timeout: SIGTERM's grace for requests in flight
  // vLLM's CORS flags, as given: a JSON list ('["http://a", "http://b"]') or one or more values.
  std::vector<std::string> allowed_origins, allowed_methods, allowed_headers;
  VllmFlagReport vllm_flags;
};

// MODEL as a positional argument or as vLLM's --model (one of them; both only when they agree), and
// vLLM's --tokenizer only when it names the model itself.
void settle_model(ServeOptions& o) {
  if (!o.model_flag.empty()) {
    if (!o.engine.model.empty() && o.engine.model != o.model_flag)
      throw_invalid_argument("MODEL is given twice, as '" + o.engine.model + "' and as --model '" + o.model_flag +
                             "'; give one");
    o.engine.model = o.model_flag;
  }
  if (o.engine.model.empty()) throw_invalid_argument("give the model: ditto serve MODEL (or --model MODEL)");
  if (!o.tokenizer.empty() && o.tokenizer != o.engine.model &&
      resolve_model_path(o.tokenizer) != resolve_model_path(o.engine.model))
    throw_invalid_argument("--tokenizer " + o.tokenizer +
                           ": ditto reads the model's own tokenizer; a separate one is not supported yet — refused "
                           "rather than run with another tokenizer");
  // Several occurrences add names; a name given twice counts once.
  for (const std::string& name : o.served_model_names) {
    if (o.server.served_model_name.empty()) {
      o.server.served_model_name = name;
    } else if (name != o.server.served_model_name &&
               std::find(o.server.served_model_aliases.begin(), o.server.served_model_aliases.end(), name) ==
                   o.server.served_model_aliases.end()) {
      o.server.served_model_aliases.push_back(name);
    }
  }
}

// vLLM's CORS list flags take a JSON list ('["http://a"]', as vLLM's own json.loads reads them);
// plain values are taken as the list's items. Empty (the flag not given): the default, ["*"].
std::vector<std::string> cors_list(const std::vector<std::string>& given, const char* flag) {
  if (given.empty()) return {"*"};
  std::vector<std::string> out;
  for (const std::string& v : given) {
    if (v.empty() || v[0] != '[') {
      out.push_back(v);
      continue;
    }
    const auto list = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array()) throw_invalid_argument(std::string(flag) + ": '" + v + "' is not a JSON list of strings");
    for (const auto& item : list) {
      if (!item.is_string()) throw_invalid_argument(std::string(flag) + ": '" + v + "' is not a JSON list of strings");
      out.push_back(item.get<std::string>());
    }
  }
  return out;
}

// vLLM's VLLM_API_KEY: the key when --api-key is not given. The log says where the key came from,
// never the key.
void api_key_from_environment(ServerOptions& server) {
  const char* env = std::getenv("VLLM_API_KEY");
  if (!server.api_key.empty() || env == nullptr || *env == '\0') return;
  server.api_key = env;
  log_event(server.log_format, "info",
            "API key taken from the environment (VLLM_API_KEY): every route but /health, /ping, /load and "
            "/version needs 'Authorization: Bearer <key>'");
}

// vLLM's VLLM_SERVER_DEV_MODE=1: the development routes for RL (weight transfer, pause, sleep;
// docs/RL.md), which the log names since they let any client change the weights.
void dev_mode_from_environment(ServerOptions& server) {
  const char* env = std::getenv("VLLM_SERVER_DEV_MODE");
  if (env == nullptr || std::string(env) != "1") return;
  server.dev_mode = true;
  log_event(server.log_format, "warning",
            "VLLM_SERVER_DEV_MODE=1: the development routes are on (/init_weight_transfer_engine, "
            "/start_weight_update, /update_weights, /finish_weight_update, /weight_info, /pause, /resume, "
            "/abort_requests, /sleep, /wake_up): any client that can reach the server can change its weights");
}

// VLLM_BATCH_INVARIANT and DITTO_BATCH_INVARIANT, as vLLM users set them: "1" (or unset) is what
// ditto always does; "0" asks for a faster non-invariant mode that ditto does not have (its
// invariant kernels are its fast ones), which one line says.
void check_batch_invariant_env(const std::string& log_format) {
  for (const char* name : {"DITTO_BATCH_INVARIANT", "VLLM_BATCH_INVARIANT"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::string(value) == "0") {
      log_event(log_format, "warning",
                std::string(name) +
                    "=0 ignored: ditto has no non-invariant mode, its batch-invariant kernels are its fast ones "
                    "(README, Benchmarks: the comparison with llama.cpp)");
      return;
    }
  }
}

// One start-up line about the engine (vLLM prints its KV block count): threads, kernel path,
// context, and what the KV cache holds; a warning when it cannot hold one full-length request.
void print_engine_summary(const LLMEngine& llm, const std::string& log_format) {
  const EngineArgs& a = llm.args();
  const int64_t blocks = kv_blocks_for_memory(llm.model().config(), a.block_size, a.kv_cache_memory);
  const int64_t tokens = blocks * a.block_size;
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(a.kv_cache_memory) / (1 << 20));
  auto n = [](int64_t v) { return std::to_string(v); };
  log_event(log_format, "info",
            "engine: " + n(a.threads > 0 ? a.threads : default_num_threads()) + " threads, " +
                std::string(isa_name(active_isa())) + " kernels, context " + n(llm.max_model_len()) +
                " tokens, KV cache " +
                (a.kv_cache_memory >= (int64_t{1} << 30) ? format_gib(a.kv_cache_memory) : size) + " = " + n(tokens) +
                " tokens (" + n(blocks) + " blocks of " + n(a.block_size) + "), at most " + n(a.max_num_seqs) +
                " sequences and " + n(a.max_num_batched_tokens) + " tokens per step");
  if (const PoolerConfig& p = llm.pooler(); p.pooling) {
    const std::string how = p.task == PoolingTask::kEmbed
                                ? std::string(pooling_type_name(p.pooling_type)) + " pooling, " +
                                      (p.normalize ? "normalized" : "not normalized") +
                                      ", routes /v1/embeddings, /pooling, /score, /rerank"
                                : "a reranker's yes/no score, routes /score, /rerank, /pooling";
    log_event(log_format, "info",
              std::string("pooling: ") + pooling_task_name(p.task) + " (" + how + "; from " + p.source +
                  "); generation runs beside it");
  }
  if (tokens < llm.max_model_len())
    log_event(log_format, "warning",
              "the KV cache holds " + n(tokens) + " tokens, less than one full-length request (context " +
                  n(llm.max_model_len()) +
                  "): a request longer than that is refused and a chat's default max_tokens is cut to it; raise "
                  "--kv-cache-memory or lower --max-model-len");
}

void run_serve(ServeOptions o) {
  if (serve_as_tensor_parallel_rank(o.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  check_batch_invariant_env(o.server.log_format);
  settle_model(o);
  apply_vllm_flag_report(o.vllm_flags, o.server.log_format);
  // SIGINT/SIGTERM are taken by one thread with sigwait, so every other thread (created below,
  // inheriting this mask) never runs a handler; that thread stops the server cleanly.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a dead server
  // Hundreds of HTTP threads would each get a glibc malloc arena (up to 8 per core), holding freed
  // pages apart; a few shared arenas keep the server's RSS near its working set.
  mallopt(M_ARENA_MAX, 4);

  o.server.max_request_body_bytes = parse_size_bytes(o.max_request_body, "--max-request-body-bytes");
  api_key_from_environment(o.server);
  o.server.cors.allowed_origins = cors_list(o.allowed_origins, "--allowed-origins");
  o.server.cors.allowed_methods = cors_list(o.allowed_methods, "--allowed-methods");
  o.server.cors.allowed_headers = cors_list(o.allowed_headers, "--allowed-headers");
  if (o.server.served_model_name.empty()) o.server.served_model_name = o.engine.model;
  validate_server_options(o.server);  // before the (long) model load
  check_listen_address(o.server);
  if (const std::string note = random_weights_note(o.engine.model); !note.empty())
    log_event(o.server.log_format, "note", note);
  dev_mode_from_environment(o.server);
  LLMEngine llm(o.engine);
  const std::string& log_format = o.server.log_format;
  print_engine_summary(llm, log_format);
  {
    char cost[64];
    std::snprintf(cost, sizeof cost, "%.3f s", llm.fingerprint_seconds());
    log_event(log_format, "info",
              "system_fingerprint " + llm.system_fingerprint() + " (weights, numerics version, ISA class; the weight " +
                  "files hashed in " + cost + "): answers are the same bits wherever it is the same");
  }
  if (const GenerationDefaults& g = llm.input_processor().generation_defaults(); !g.describe().empty())
    log_event(log_format, "info",
              "default sampling parameters from " + g.source + ": " + g.describe() +
                  " (a request's own values win; --generation-config vllm for none)");
  o.server.model_path = resolve_model_path(o.engine.model);
  o.server.version = DITTO_VERSION;
  if (o.server.http_threads == 0)
    o.server.http_threads = static_cast<int>(std::max<int64_t>(128, o.engine.max_num_seqs + 64));
  HttpServer server(llm, o.server);
  const int port = server.bind();

  // The first SIGTERM/SIGINT drains: new requests get 503, requests in flight run on for up to
  // --shutdown-timeout seconds (0: aborted at once), then whatever still runs is aborted. A second
  // one stops at once.
  std::atomic<bool> done{false};
  std::thread drainer;
  const int grace = o.shutdown_timeout;
  std::thread waiter([&server, &done, &drainer, signals, grace, log_format] {
    for (int received = 0;;) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (done.load()) return;  // our own wake-up after listen() returned
      const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
      if (++received == 1) {
        log_event(log_format, "info",
                  std::string(name) + " received, draining: new requests get 503; requests in flight get up to " +
                      std::to_string(grace) + " s (--shutdown-timeout), then are aborted; a second signal stops now");
        drainer = std::thread([&server, grace] { server.drain(grace); });
      } else {
        log_event(log_format, "info", std::string(name) + " received again, stopping now");
        server.stop();
      }
    }
  });
  const std::string base = "http://" + o.server.host + ":" + std::to_string(port) + o.server.root_path;
  std::printf("ditto serve: listening on %s (model \"%s\", %s)\n", base.c_str(), o.server.served_model_name.c_str(),
              o.server.model_path.c_str());
  std::printf(
      "  try: curl %s/v1/completions -H 'Content-Type: application/json'%s -d '{\"model\": \"%s\", "
      "\"prompt\": \"The future of AI is\", \"max_tokens\": 32, \"temperature\": 0.7, \"seed\": 42}'\n",
      base.c_str(), o.server.api_key.empty() ? "" : " -H \"Authorization: Bearer $KEY\"",
      o.server.served_model_name.c_str());
  if (!o.server.api_key.empty()) std::printf("  (set KEY to the API key first: KEY=...)\n");
  std::printf("  or any OpenAI client with base_url %s/v1; Ctrl-C stops.\n", base.c_str());
  if (o.server.enable_web_ui)
    std::printf("  web page (chat, the contract live, the server's state): %s/%s\n", base.c_str(),
                o.server.api_key.empty() ? "" : " (it asks for the API key)");
  std::fflush(stdout);
  server.listen();
  // listen() returned: drained or stopped by a signal, or the socket failed. Wake the waiter.
  done = true;
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (drainer.joinable()) drainer.join();
  log_event(log_format, "info", "stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions (streaming or not), /v1/models, "
      "/tokenize, /detokenize, /health, /version, /metrics. Every answer is the same bits under any load.");
  cmd->add_option("model", o->engine.model, "Model directory, GGUF file, or a hub id in the local Hugging Face cache");
  cmd->add_option("--model", o->model_flag, "The model, as vLLM's flag (instead of MODEL)");
  cmd->add_option("--tokenizer", o->tokenizer, "vLLM's; only the model itself (ditto reads the model's tokenizer)");
  cmd->add_option("--host", o->server.host,
                  "Address to listen on (vLLM's default: every interface; 127.0.0.1 for this machine only)")
      ->capture_default_str();
  cmd->add_option("--port", o->server.port, "Port to listen on (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_names,
                  "The model name(s) clients send; responses carry the first (default: MODEL as given)")
      ->expected(1, 64);
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health, /ping, /load and /version "
                  "and the web page's files (vLLM's rule; default: the VLLM_API_KEY environment variable)");
  cmd->add_flag_function(
      "--disable-web-ui", [o](std::int64_t) { o->server.enable_web_ui = false; },
      "Serve no web page at / (by default: a chat, the invariance contract live and the server's state)");
  cmd->add_option("--root-path", o->server.root_path,
                  "Also serve every route under this prefix, as behind a path-based proxy (vLLM's, uvicorn's "
                  "root_path; e.g. /llm)");
  cmd->add_flag("--enable-request-id-headers", o->server.enable_request_id_headers,
                "Every response carries X-Request-Id: the request's own, or a fresh one (vLLM's flag)");
  cmd->add_option("--allowed-origins", o->allowed_origins,
                  "CORS: origins allowed, a JSON list or values (vLLM's; default [\"*\"])")
      ->expected(1, 64);
  cmd->add_option("--allowed-methods", o->allowed_methods,
                  "CORS: methods allowed, a JSON list or values (vLLM's; default [\"*\"])")
      ->expected(1, 64);
  cmd->add_option("--allowed-headers", o->allowed_headers,
                  "CORS: request headers allowed, a JSON list or values (vLLM's; default [\"*\"])")
      ->expected(1, 64);
  cmd->add_flag("--allow-credentials", o->server.cors.allow_credentials,
                "CORS: Access-Control-Allow-Credentials: true (vLLM's flag)");
  add_engine_flags(cmd, o->engine);
  cmd->add_flag("--disable-log-requests", o->server.disable_log_requests,
                "No access-log line per request on stderr (vLLM's flag)");
  cmd->add_option("--log-format", o->server.log_format,
                  "Access log on stderr: text (one line per request) or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", o->server.max_queued_requests,
                  "Requests (choices) waiting for the engine beyond which new ones get HTTP 503")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-request-body-bytes", o->max_request_body, "Largest request body accepted (else HTTP 413)")
      ->capture_default_str();
  cmd->add_option("--max-connections", o->server.max_connections,
                  "Connections held at once (served, or waiting for an HTTP thread); beyond, HTTP 503 and closed")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--max-tokens-per-request", o->server.max_tokens_per_request,
                  "Most tokens one request may ask for: prompt tokens + n x max_tokens over its prompts (else HTTP "
                  "400); 0: the larger of 1048576 and --max-model-len")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--timeout", o->server.timeout_seconds,
                  "Seconds a client may stall while sending a request or reading the response")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout,
                  "On SIGTERM, seconds requests in flight may run on before they are aborted (0: at once; vLLM's "
                  "flag); new requests get 503 meanwhile")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option(
      "--reasoning-parser", o->server.reasoning_parser,
      "Split <think>...</think> off chat replies into reasoning (and reasoning_content): qwen3 or deepseek_r1");
  cmd->add_flag(
      "--enable-auto-tool-choice", o->server.enable_auto_tool_choice,
      "Return the tool calls in chat replies to requests with tools as tool_calls (needs --tool-call-parser)");
  cmd->add_option("--tool-call-parser", o->server.tool_call_parser,
                  "Tool-call format: hermes (Qwen2.5, Qwen3), llama3_json (Llama 3.x) or qwen3_coder (Qwen3-Coder)");
  cmd->add_flag("--enable-prompt-tokens-details", o->server.enable_prompt_tokens_details,
                "usage.prompt_tokens_details.cached_tokens: prompt tokens the prefix cache held (vLLM's flag)");
  cmd->add_flag("--return-tokens-as-token-ids", o->server.return_tokens_as_token_ids,
                "Logprob tokens as \"token_id:N\" in every response (vLLM's flag)");
  cmd->add_flag("--enable-force-include-usage", o->server.enable_force_include_usage,
                "Every streamed chunk carries the usage so far and the stream ends with a usage chunk, asked for or "
                "not (current vLLM's flag)");
  cmd->add_option("--chat-template-content-format", o->server.chat_template_content_format,
                  "How chat message content reaches the template (vLLM's flag): string (text parts joined), openai "
                  "(a list of parts, extra fields kept) or auto (openai when the template loops over a message's "
                  "content)")
      ->check(CLI::IsMember({"auto", "string", "openai"}));
  cmd->add_flag("--exclude-tools-when-tool-choice-none", o->server.exclude_tools_when_tool_choice_none,
                "tool_choice \"none\" leaves the tools out of the prompt (vLLM's flag; by default they stay and no "
                "tool calls are returned)");
  cmd->add_flag("--enable-tokenizer-info-endpoint", o->server.enable_tokenizer_info_endpoint,
                "GET /tokenizer_info: the tokenizer's configuration and chat template (vLLM's; off: 404)");
  cmd->add_flag("--trust-request-chat-template", o->server.trust_request_chat_template,
                "Accept a chat request's own chat_template (Jinja run on this server; vLLM's flag; without it such "
                "a request gets 400)");
  add_vllm_serve_flags(cmd, o->engine, o->vllm_flags);
  cmd->add_flag_callback(
      "--enable-log-requests", [] {}, "vLLM's; ditto logs every request unless --disable-log-requests");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace ditto
