#include "server/openai_api.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/base64.h"
#include "core/error.h"
#include "core/json_input.h"
#include "engine/routed_experts.h"
#include "engine/sampling_params_json.h"

namespace ditto {

bool bearer_token_matches(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "bearer ";
  unsigned diff = authorization.size() != kScheme.size() + api_key.size() ? 1u : 0u;
  if (api_key.empty()) return false;
  // Every byte of the header is visited whatever it holds: the scheme folded to lower case, the
  // rest against the key (cycled, so a longer header reads no further than the key).
  for (size_t i = 0; i < authorization.size(); ++i) {
    const auto c = static_cast<unsigned char>(authorization[i]);
    if (i < kScheme.size()) {
      const unsigned lower = (c >= 'A' && c <= 'Z') ? c + 32u : c;
      diff |= lower ^ static_cast<unsigned char>(kScheme[i]);
    } else {
      diff |= c ^ static_cast<unsigned char>(api_key[(i - kScheme.size()) % api_key.size()]);
    }
  }
  return diff == 0;
}
namespace {

using Json = nlohmann::ordered_json;

template <typename F>
auto field(const std::string& name, F&& read) {
  return read_field(name, std::forward<F>(read));
}

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// The body's field that set params.structured_outputs in read_sampling_params: structured_outputs
// or one of vLLM's older names ("" for none).
std::string constraint_source(const Json& body) {
  for (const char* key :
       {"structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structural_tag"})
    if (present(body, key)) return key;
  return "";
}

// response_format on top of what read_sampling_params read. As vLLM's, a structured_outputs
// object that sets only options (disable_any_whitespace, ...) takes response_format's kind; one
// that sets a kind of its own, or a guided_* field, cannot be given with it.
void read_constraint(const Json& body, ApiRequest& r) {
  SamplingParams& p = r.params;
  const std::string source = constraint_source(body);
  if (source != "structured_outputs") r.constraint_field = source;
  if (!present(body, "response_format")) return;
  std::optional<StructuredOutputsParams> format = read_response_format(body["response_format"]);
  if (!format) return;
  if (p.structured_outputs && p.structured_outputs->num_kinds() > 0)
    throw_bad_param("response_format",
                    "give response_format or " + source + ", not both (each sets the output's structure)");
  r.constraint_field = response_format_field(*format);
  if (p.structured_outputs) {  // its options, response_format's kind
    StructuredOutputsParams& so = *p.structured_outputs;
    so.json = std::move(format->json);
    so.json_object = format->json_object;
    so.structural_tag = std::move(format->structural_tag);
  } else {
    p.structured_outputs = std::move(format);
  }
}

// chat's tool_choice "required" or a named function: the output constrained to tool calls of the
// request's tools (vLLM's rules: the named function must be among them; "required" with no tools
// is "none", as OpenAI's).
void read_forced_tool_choice(const Json& tc, const Json& tools, ApiRequest& r) {
  if (tc.is_object()) {
    const std::string usage =
        "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": ...}}, got " + json_excerpt(tc);
    if (present(tc, "type") && tc["type"] != "function") throw_bad_param("tool_choice", usage);
    if (!present(tc, "function") || !tc["function"].is_object() || !present(tc["function"], "name") ||
        !tc["function"]["name"].is_string() || tc["function"]["name"].get<std::string>().empty())
      throw_bad_param("tool_choice", usage);
    r.forced_tool_choice = ForcedToolChoice::kNamed;
    r.tool_choice_name = tc["function"]["name"].get<std::string>();
  } else {
    r.forced_tool_choice = ForcedToolChoice::kRequired;
  }
  if (tools.is_null()) throw_bad_param("tool_choice", "When using `tool_choice`, `tools` must be set.");
  if (r.forced_tool_choice == ForcedToolChoice::kRequired && tools.empty()) {
    r.forced_tool_choice = ForcedToolChoice::kNone;
    r.tool_choice_none = true;
    return;
  }
  SamplingParams& p = r.params;
  if (p.structured_outputs && p.structured_outputs->num_kinds() > 0)
    throw_bad_param("tool_choice", "tool_choice " + json_excerpt(tc) +
                                       " constrains the output to tool calls; it cannot be given with " +
                                       (r.constraint_field.empty() ? "structured_outputs" : r.constraint_field));
  if (!p.structured_outputs) p.structured_outputs = StructuredOutputsParams();
  p.structured_outputs->json = tool_choice_schema(r.forced_tool_choice, tools, r.tool_choice_name);
  r.constraint_field = "tools";
}

// The fields both endpoints share: vLLM's SamplingParams (engine/sampling_params_json.h) and the
// OpenAI extras. Returns true when max_tokens was given.
bool parse_sampling(const Json& body, ApiRequest& r) {
  SamplingParams& p = r.params;
  const bool max_tokens_given = read_sampling_params(body, p);
  if (present(body, "best_of")) {
    const int64_t best_of = field("best_of", [&] { return json_int(body["best_of"], "best_of", 1); });
    if (best_of != p.n) throw_bad_param("best_of", "best_of other than n is not supported");
  }
  if (present(body, "return_tokens_as_token_ids"))
    r.return_tokens_as_token_ids = field("return_tokens_as_token_ids", [&] {
      return json_bool(body["return_tokens_as_token_ids"], "return_tokens_as_token_ids");
    });
  if (present(body, "return_token_ids"))
    r.return_token_ids =
        field("return_token_ids", [&] { return json_bool(body["return_token_ids"], "return_token_ids"); });
  if (present(body, "stream")) r.stream = field("stream", [&] { return json_bool(body["stream"], "stream"); });
  if (present(body, "stream_options")) {
    const Json& so = body["stream_options"];
    if (!so.is_object()) throw_bad_param("stream_options", "field 'stream_options' must be an object");
    if (!r.stream) throw_bad_param("stream_options", "stream_options is only allowed when stream is true");
    if (present(so, "include_usage"))
      r.include_usage =
          field("stream_options", [&] { return json_bool(so["include_usage"], "stream_options.include_usage"); });
    if (present(so, "continuous_usage_stats"))
      r.continuous_usage_stats = field("stream_options", [&] {
        return json_bool(so["continuous_usage_stats"], "stream_options.continuous_usage_stats");
      });
  }
  if (r.stream && p.prompt_logprobs)  // vLLM's rule: they come whole, with the response
    throw_bad_param("prompt_logprobs", "prompt_logprobs are not available when stream is true");
  if (present(body, "user")) field("user", [&] { return json_string(body["user"], "user"); });
  read_constraint(body, r);
  return max_tokens_given;
}

int64_t parse_max_tokens(const Json& body, const char* key) {
  return field(key, [&] { return json_int(body[key], key, 1); });
}

}  // namespace

ApiError to_api_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument: return ApiError(400, "BadRequestError", e.what(), e.param());
    case ErrorCode::kNotFound: return ApiError(404, "NotFoundError", e.what(), e.param());
    case ErrorCode::kUnauthenticated: return ApiError(401, "Unauthorized", e.what());
    case ErrorCode::kResourceExhausted: return ApiError(503, "Service Unavailable", e.what(), e.param());
    case ErrorCode::kCancelled: return ApiError(499, "Client Closed Request", e.what());
    case ErrorCode::kInternal: break;
  }
  return ApiError(500, "InternalServerError", e.what());
}

Json ApiError::body() const {
  Json e = {{"message", what()}, {"type", type_}};
  e["param"] = param_.empty() ? Json(nullptr) : Json(param_);
  e["code"] = status_;
  return {{"error", e}};
}

std::vector<PromptInput> read_prompts(const Json& v, const std::string& name) {
  if (v.is_string()) return {PromptInput{.text = v.get<std::string>()}};
  if (v.is_array() && !v.empty() && v[0].is_number())
    return {PromptInput{.token_ids = field(name, [&] { return json_token_ids(v, name); })}};
  if (!v.is_array() || v.empty())
    throw_bad_param(name, "field '" + name +
                              "' must be a string, an array of strings, an array of token ids or an array of "
                              "token-id arrays (non-empty), got " +
                              json_excerpt(v));
  std::vector<PromptInput> prompts;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = name + "[" + std::to_string(i) + "]";
    if (v[i].is_string())
      prompts.push_back(PromptInput{.text = v[i].get<std::string>()});
    else if (v[i].is_array())
      prompts.push_back(PromptInput{.token_ids = field(name, [&] { return json_token_ids(v[i], item); })});
    else
      throw_bad_param(name,
                      "field '" + item + "' must be a string or an array of token ids, got " + json_excerpt(v[i]));
  }
  return prompts;
}

void check_priority(const Json& body) {
  if (!present(body, "priority")) return;
  const int64_t priority = field("priority", [&] { return json_int(body["priority"], "priority"); });
  if (priority != 0)
    throw_bad_param("priority", "Got priority " + std::to_string(priority) +
                                    " but Priority scheduling is not enabled (ditto schedules first come, first "
                                    "served).");
}

MaxTokensRule max_tokens_rule(const ApiRequest& request) {
  if (request.max_tokens_given) return MaxTokensRule::kAsGiven;
  return request.endpoint == ApiEndpoint::kChatCompletions ? MaxTokensRule::kRestOfContext
                                                           : MaxTokensRule::kClipToContext;
}

ApiRequest parse_api_request(ApiEndpoint endpoint, const Json& body, int64_t max_logprobs,
                             const SamplingParams& defaults) {
  if (!body.is_object()) throw_invalid_argument("the request body must be a JSON object");
  ApiRequest r;
  r.endpoint = endpoint;
  r.params = defaults;
  static const std::set<std::string> shared = {"model",
                                               "best_of",
                                               "stream",
                                               "stream_options",
                                               "user",
                                               "response_format",
                                               "logprobs",
                                               "return_tokens_as_token_ids",
                                               "return_token_ids",
                                               "priority",
                                               "request_id"};
  static const std::set<std::string> completions = {"prompt", "echo", "suffix", "add_special_tokens"};
  static const std::set<std::string> chat = {"messages",
                                             "tools",
                                             "tool_choice",
                                             "parallel_tool_calls",
                                             "chat_template_kwargs",
                                             "add_generation_prompt",
                                             "continue_final_message",
                                             "max_completion_tokens",
                                             "top_logprobs",
                                             "echo",
                                             "add_special_tokens",
                                             "include_reasoning",
                                             "separate_reasoning",
                                             "reasoning_effort",
                                             "chat_template",
                                             "documents"};
  const auto& own = endpoint == ApiEndpoint::kCompletions ? completions : chat;
  for (const auto& [key, value] : body.items())
    if (!shared.contains(key) && !own.contains(key) && !sampling_params_keys().contains(key) &&
        !unimplemented_field_keys().contains(key))
      r.ignored_fields.push_back(key);
  refuse_unimplemented_fields(body, {"use_beam_search", "length_penalty"});
  if (present(body, "use_beam_search"))
    r.use_beam_search = field("use_beam_search", [&] { return json_bool(body["use_beam_search"], "use_beam_search"); });
  if (present(body, "length_penalty"))
    r.length_penalty = field("length_penalty", [&] { return json_float(body["length_penalty"], "length_penalty"); });
  if (r.use_beam_search) {
    // Beam search takes n (the width), max_tokens, temperature, ignore_eos, length_penalty and
    // include_stop_str_in_output; a field that would change a sampled answer and that a beam
    // search cannot honour is refused rather than ignored (vLLM ignores them).
    SamplingParams asked;
    read_sampling_params(body, asked);
    const SamplingParams plain;
    const std::pair<const char*, bool> unused[] = {
        {"top_p", asked.top_p != plain.top_p},
        {"top_k", asked.top_k > 0},
        {"min_p", asked.min_p != plain.min_p},
        {"presence_penalty", asked.presence_penalty != 0.0f},
        {"frequency_penalty", asked.frequency_penalty != 0.0f},
        {"repetition_penalty", asked.repetition_penalty != 1.0f},
        {"stop", !asked.stop.empty()},
        {"stop_token_ids", !asked.stop_token_ids.empty()},
        {"min_tokens", asked.min_tokens != 0},
        {"logit_bias", !asked.logit_bias.empty()},
        {"allowed_token_ids", asked.allowed_token_ids.has_value()},
        {"bad_words", !asked.bad_words.empty()},
        {"prompt_logprobs", asked.prompt_logprobs.has_value()},
        {"truncate_prompt_tokens", asked.truncate_prompt_tokens.has_value()},
        {"logprob_token_ids", asked.logprob_token_ids.has_value()},
        {"cache_salt", asked.cache_salt.has_value()},
    };
    for (const auto& [name, set] : unused)
      if (set)
        throw_bad_param(name, std::string("field '") + name +
                                  "' does not apply to beam search (use_beam_search); the request is refused "
                                  "rather than answered without it");
  }

  if (present(body, "model")) r.model = field("model", [&] { return json_string(body["model"], "model"); });
  check_priority(body);
  r.max_tokens_given = parse_sampling(body, r);
  SamplingParams& p = r.params;

  if (endpoint == ApiEndpoint::kCompletions) {
    if (!present(body, "prompt")) throw_bad_param("prompt", "field 'prompt' is required");
    r.prompts = read_prompts(body["prompt"], "prompt");
    if (r.prompts.size() > 1024) throw_bad_param("prompt", "at most 1024 prompts per request");
    if (present(body, "add_special_tokens")) {
      const bool add =
          field("add_special_tokens", [&] { return json_bool(body["add_special_tokens"], "add_special_tokens"); });
      for (PromptInput& in : r.prompts) in.add_special_tokens = add;
    }
    if (present(body, "suffix")) throw_bad_param("suffix", "suffix is not supported");
    if (present(body, "echo")) r.echo = field("echo", [&] { return json_bool(body["echo"], "echo"); });
    if (r.echo && r.max_tokens_given && p.max_tokens == 0) {
      r.echo_only = true;
      p.max_tokens = 1;
    }
    if (present(body, "logprobs"))
      r.logprobs = field("logprobs", [&] { return json_int(body["logprobs"], "logprobs"); });
    if (r.echo && r.logprobs) p.prompt_logprobs = std::max<int64_t>(p.prompt_logprobs.value_or(0), *r.logprobs);
    if (r.use_beam_search && r.echo && (r.logprobs || r.echo_only))  // vLLM refuses these too
      throw_bad_param("echo",
                      "echo with logprobs or with max_tokens 0 does not apply to beam search (use_beam_search)");
  } else {
    if (!present(body, "messages")) throw_bad_param("messages", "field 'messages' is required");
    PromptInput in;
    const Json messages = normalize_chat_messages(body["messages"]);  // checked here, so a bad one is a 400 naming it
    // The parts as sent (extra fields too): the chat template's content format decides at rendering.
    in.messages = normalize_chat_messages(body["messages"], ChatContentFormat::kOpenAi).dump();
    if (present(body, "chat_template"))  // whether the server trusts it is the server's call
      in.chat_template = field("chat_template", [&] { return json_string(body["chat_template"], "chat_template"); });
    if (present(body, "add_special_tokens"))
      in.chat_add_special_tokens =
          field("add_special_tokens", [&] { return json_bool(body["add_special_tokens"], "add_special_tokens"); });
    if (present(body, "separate_reasoning"))
      r.separate_reasoning =
          field("separate_reasoning", [&] { return json_bool(body["separate_reasoning"], "separate_reasoning"); });
    if (present(body, "prompt_token_ids"))  // vLLM's newest token input on chat
      throw_bad_param("prompt_token_ids",
                      "field 'prompt_token_ids' (token input on chat) is not supported by ditto yet; the request is "
                      "refused rather than answered without it (give a token-id prompt to /v1/completions)");
    if (present(body, "include_reasoning"))
      r.include_reasoning =
          field("include_reasoning", [&] { return json_bool(body["include_reasoning"], "include_reasoning"); });
    if (present(body, "parallel_tool_calls"))
      r.parallel_tool_calls =
          field("parallel_tool_calls", [&] { return json_bool(body["parallel_tool_calls"], "parallel_tool_calls"); });
    if (present(body, "tools")) {
      if (!body["tools"].is_array()) throw_bad_param("tools", "field 'tools' must be an array");
      for (size_t i = 0; i < body["tools"].size(); ++i) {
        const Json& t = body["tools"][i];
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
            !t["function"].contains("name") || !t["function"]["name"].is_string())
          throw_bad_param("tools", "field 'tools[" + std::to_string(i) +
                                       "]' must be {\"type\": \"function\", "
                                       "\"function\": {\"name\": ...}}");
      }
      in.tools = body["tools"].dump();
    }
    if (present(body, "tool_choice")) {
      const Json& tc = body["tool_choice"];
      if (tc == "required" || tc.is_object()) {
        read_forced_tool_choice(tc, present(body, "tools") ? body["tools"] : Json(nullptr), r);
      } else {
        if (!(tc == "none" || tc == "auto"))
          throw_bad_param("tool_choice",
                          "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": "
                          "\"function\", \"function\": {\"name\": ...}}, got " +
                              json_excerpt(tc));
        if (tc == "auto" && in.tools.empty())  // vLLM's rule ("none" needs no tools)
          throw_bad_param("tool_choice", "When using `tool_choice`, `tools` must be set.");
        // vLLM's default keeps the tools in the prompt (the same prompt tokens as with "auto") and
        // returns no tool calls; --exclude-tools-when-tool-choice-none leaves them out.
        r.tool_choice_none = tc == "none";
      }
    }
    Json kwargs = Json::object();
    if (present(body, "chat_template_kwargs")) {
      if (!body["chat_template_kwargs"].is_object())
        throw_bad_param("chat_template_kwargs", "field 'chat_template_kwargs' must be an object");
      kwargs = body["chat_template_kwargs"];
    }
    // vLLM passes reasoning_effort to the chat template (templates that know it, e.g. gpt-oss's,
    // read it; others ignore it); a chat_template_kwargs entry of the same name wins.
    if (present(body, "reasoning_effort")) {
      const std::string effort =
          field("reasoning_effort", [&] { return json_string(body["reasoning_effort"], "reasoning_effort"); });
      if (effort != "minimal" && effort != "low" && effort != "medium" && effort != "high")
        throw_bad_param("reasoning_effort", "reasoning_effort must be minimal, low, medium or high, got " +
                                                json_excerpt(body["reasoning_effort"]));
      if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = effort;
    }
    // vLLM passes documents (RAG) to the template, which may or may not use them.
    if (present(body, "documents")) {
      if (!body["documents"].is_array()) throw_bad_param("documents", "field 'documents' must be an array of objects");
      if (!kwargs.contains("documents")) kwargs["documents"] = body["documents"];
    }
    if (!kwargs.empty()) in.chat_template_kwargs = kwargs.dump();
    if (present(body, "add_generation_prompt"))
      r.add_generation_prompt = field(
          "add_generation_prompt", [&] { return json_bool(body["add_generation_prompt"], "add_generation_prompt"); });
    if (present(body, "continue_final_message"))
      r.continue_final_message = field("continue_final_message", [&] {
        return json_bool(body["continue_final_message"], "continue_final_message");
      });
    if (r.continue_final_message && r.add_generation_prompt && present(body, "add_generation_prompt"))
      throw_bad_param("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
    if (r.continue_final_message) r.add_generation_prompt = false;
    in.add_generation_prompt = r.add_generation_prompt;
    in.continue_final_message = r.continue_final_message;
    r.prompts.push_back(std::move(in));
    // vLLM's rules: the reply's role is the last message's when no generation prompt opens a new
    // turn; echo repeats the last message when it has the reply's role.
    // (Normalized messages: at least one, each with a string role and a string content.)
    const Json& last = messages.back();
    if (!r.add_generation_prompt) r.response_role = last["role"].get<std::string>();
    if (present(body, "echo")) r.echo = field("echo", [&] { return json_bool(body["echo"], "echo"); });
    if (r.echo && last["role"] == r.response_role) r.echoed_message = last["content"].get<std::string>();
    if (present(body, "max_completion_tokens")) {  // OpenAI's newer name wins over max_tokens
      p.max_tokens = parse_max_tokens(body, "max_completion_tokens");
      r.max_tokens_given = true;
      r.max_tokens_field = "max_completion_tokens";
    }
    const bool want =
        present(body, "logprobs") && field("logprobs", [&] { return json_bool(body["logprobs"], "logprobs"); });
    int64_t top = 0;
    if (present(body, "top_logprobs")) {
      top = field("top_logprobs", [&] { return json_int(body["top_logprobs"], "top_logprobs", 0, max_logprobs); });
      if (!want) throw_bad_param("top_logprobs", "top_logprobs needs logprobs set to true");
    }
    if (want) r.logprobs = top;
  }
  // vLLM's logprob_token_ids: the logprobs beside each token are those ids'; as vLLM's, the
  // request must ask for logprobs too (`logprobs`; chat: `logprobs: true`).
  if (p.logprob_token_ids && !r.logprobs)
    throw_bad_param("logprob_token_ids", "logprobs must be set when using `logprob_token_ids`");
  if (r.logprobs) p.logprobs = *r.logprobs;
  if (r.use_beam_search && p.structured_outputs) {
    std::string field = r.forced_tool_choice != ForcedToolChoice::kNone
                            ? "tool_choice"
                            : r.constraint_field.substr(0, r.constraint_field.find('.'));  // the body's own
    if (field.empty()) field = "structured_outputs";
    throw_bad_param(field, "field '" + field +
                               "' does not apply to beam search (use_beam_search); the request is refused rather "
                               "than answered without it");
  }
  // The ranges that need no model (the vocabulary and the context are checked at the front door),
  // now, so a bad body is refused before it is rendered or tokenized. A max_tokens not given is
  // settled later (the chat default is the rest of the context), so min_tokens is not held to it.
  SamplingParams check = p;
  if (!r.max_tokens_given) check.max_tokens = std::max(check.max_tokens, check.min_tokens);
  check.validate(/*vocab_size=*/INT64_MAX, max_logprobs);
  return r;
}

// ------------------------------------------------------------------------------------------------
// Responses

Json routed_experts_json(const RoutedExperts& r) {
  const std::string npy = routed_experts_npy(r);
  return base64_encode({reinterpret_cast<const unsigned char*>(npy.data()), npy.size()});
}

Json stop_reason_json(const CompletionOutput& c) {
  if (c.stop_string) return *c.stop_string;
  if (c.stop_token_id) return *c.stop_token_id;
  if (c.finish_message) return *c.finish_message;  // finish_reason "error": why
  return nullptr;
}

ApiFormatter::ApiFormatter(const ApiRequest& request, const InputProcessor& door, std::string id, int64_t created,
                           std::string model_name, std::vector<std::string> prompt_texts)
    : request_(request),
      door_(door),
      id_(std::move(id)),
      created_(created),
      model_name_(std::move(model_name)),
      prompt_texts_(std::move(prompt_texts)) {
  prompt_texts_.resize(request.prompts.size());
  streams_.resize(request.prompts.size());
  if (request.parsers.reasoning) {
    try {
      think_start_ = door.token_to_id("<think>");
      think_end_ = door.token_to_id("</think>");
    } catch (const Error&) {  // no tokenizer: every token of a reply without `</think>` is reasoning
    }
  }
  for (SlotStream& s : streams_) s.choices.resize(static_cast<size_t>(request.params.n));
}

std::string ApiFormatter::token_text(int32_t id, const std::string& text) const {
  return request_.return_tokens_as_token_ids ? "token_id:" + std::to_string(id) : text;
}

std::string ApiFormatter::token_text(const TokenLogprob& t) const { return token_text(t.token_id, t.decoded_token); }

namespace {
// A chat choice's message fields: split by the engine's output parsers when they were on, else all
// content.
ChatMessageParts message_parts(const CompletionOutput& c) {
  if (c.message) return *c.message;
  ChatMessageParts parts;
  parts.content = c.text;
  return parts;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Json bytes_json(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

Json ApiFormatter::completion_logprobs(const RequestOutput& r, const CompletionOutput& c, bool with_prompt,
                                       size_t& text_offset, bool with_output) const {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  auto add = [&](const std::string& text, std::optional<float> logprob, const SampledToken* s) {
    tokens.push_back(text);
    token_logprobs.push_back(logprob ? Json(*logprob) : Json(nullptr));
    if (s == nullptr) {
      top.push_back(nullptr);
    } else {
      Json t = Json::object();
      for (const TokenLogprob& e : s->top_logprobs) t.emplace(token_text(e), e.logprob);
      t.emplace(text, s->token.logprob);  // vLLM lists the chosen token too
      top.push_back(std::move(t));
    }
    offsets.push_back(text_offset);
    text_offset += utf8_length(text);
  };
  if (with_prompt) {
    const auto& ids = r.prompt_token_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto& e = i < r.prompt_logprobs.size() ? r.prompt_logprobs[i] : std::nullopt;
      if (e) {
        add(token_text(e->token), e->token.logprob, &*e);
      } else {
        const int32_t id[1] = {ids[i]};
        add(token_text(ids[i], door_.decode(id)), std::nullopt, nullptr);
      }
    }
  }
  if (with_output)
    for (const SampledToken& s : c.logprobs) add(token_text(s.token), s.token.logprob, &s);
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json ApiFormatter::chat_logprobs(const CompletionOutput& c) const {
  Json content = Json::array();
  for (const SampledToken& s : c.logprobs) {
    Json top = Json::array();
    for (const TokenLogprob& e : s.top_logprobs)
      top.push_back({{"token", token_text(e)}, {"logprob", e.logprob}, {"bytes", bytes_json(e.bytes)}});
    content.push_back({{"token", token_text(s.token)},
                       {"logprob", s.token.logprob},
                       {"bytes", bytes_json(s.token.bytes)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

Json ApiFormatter::usage_json(int64_t prompt, int64_t completion, int64_t cached, int64_t reasoning) const {
  Json u = {{"prompt_tokens", prompt}, {"total_tokens", prompt + completion}, {"completion_tokens", completion}};
  if (request_.prompt_tokens_details) u["prompt_tokens_details"] = {{"cached_tokens", cached}};
  if (request_.parsers.reasoning) u["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
  return u;
}

void ApiFormatter::count_reasoning(ReasoningCount& count, const std::vector<int32_t>& ids) const {
  if (!request_.parsers.reasoning || request_.parsers.thinking_disabled) return;
  for (int32_t id : ids) {
    const bool first = !count.started;
    count.started = true;
    if (count.ended || (first && id == think_start_)) continue;
    if (id == think_end_) {
      count.ended = true;
      continue;
    }
    ++count.tokens;
  }
}

Json ApiFormatter::weight_versions_json(const CompletionOutput& c) {
  Json spans = Json::array();
  for (const WeightVersionSpan& s : c.weight_versions)
    spans.push_back({{"first_token", s.first_token}, {"weight_version", s.weight_version}});
  return spans;
}

Json ApiFormatter::response(const std::vector<RequestOutput>& outputs) const {
  const bool chat = request_.endpoint == ApiEndpoint::kChatCompletions;
  Json choices = Json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
  for (size_t slot = 0; slot < outputs.size(); ++slot) {
    const RequestOutput& r = outputs[slot];
    prompt_tokens += static_cast<int64_t>(r.prompt_token_ids.size());
    cached_tokens += r.num_cached_tokens;
    for (const CompletionOutput& c : r.outputs) {
      completion_tokens += static_cast<int64_t>(c.token_ids.size());
      ReasoningCount reasoning;
      count_reasoning(reasoning, c.token_ids);
      reasoning_tokens += reasoning.tokens;
      Json choice = {{"index", static_cast<int64_t>(slot) * request_.params.n + c.index}};
      std::string finish_reason = c.finish_reason;
      if (chat) {
        ChatMessageParts view =
            request_.forced_tool_choice == ForcedToolChoice::kNone ? message_parts(c) : forced_tool_calls(c.text);
        if (!request_.separate_reasoning) {
          view.content = view.reasoning + view.content;
          view.reasoning.clear();
        }
        if (!request_.parallel_tool_calls && view.tool_calls.size() > 1) view.tool_calls.resize(1);
        Json message = {{"role", request_.response_role}};
        // Empty content is null beside tool calls or a reasoning parser (vLLM's `content or None`),
        // but "" beside the calls of tool_choice "required" or a named function (vLLM's
        // `content or ""`); echo makes it a string (vLLM's: echo + (content or "")).
        const bool null_content = view.content.empty() && !request_.echo &&
                                  request_.forced_tool_choice == ForcedToolChoice::kNone &&
                                  (!view.tool_calls.empty() || request_.parsers.reasoning);
        message["content"] = null_content ? Json(nullptr) : Json(request_.echoed_message + view.content);
        if (request_.parsers.reasoning)
          // `reasoning` is current vLLM's name; `reasoning_content` stays while clients migrate.
          for (const char* key : {"reasoning", "reasoning_content"})
            message[key] = view.reasoning.empty() || !request_.include_reasoning ? Json(nullptr) : Json(view.reasoning);
        message["tool_calls"] = tool_calls_json(view.tool_calls, 0, slot, c.index, /*streaming=*/false);
        if (!view.tool_calls.empty() && finish_reason == "stop" &&
            request_.forced_tool_choice != ForcedToolChoice::kNamed)
          finish_reason = "tool_calls";  // vLLM's (and OpenAI's): a named function's call finishes with "stop"
        choice["message"] = std::move(message);
        choice["logprobs"] = request_.logprobs ? chat_logprobs(c) : Json(nullptr);
      } else {
        choice["text"] = request_.echo_only ? prompt_texts_[slot]
                         : request_.echo    ? prompt_texts_[slot] + c.text
                                            : c.text;
        size_t text_offset = 0;
        choice["logprobs"] = request_.logprobs
                                 ? completion_logprobs(r, c, request_.echo, text_offset, !request_.echo_only)
                                 : Json(nullptr);
      }
      choice["finish_reason"] = finish_reason;
      choice["stop_reason"] = stop_reason_json(c);
      // vLLM's fields beyond OpenAI's are always there, null when not asked for.
      if (!chat) choice["prompt_logprobs"] = request_.params.prompt_logprobs ? prompt_logprobs_json(r) : Json(nullptr);
      if (!chat) choice["prompt_token_ids"] = request_.return_token_ids ? Json(r.prompt_token_ids) : Json(nullptr);
      choice["token_ids"] = request_.return_token_ids ? Json(c.token_ids) : Json(nullptr);
      if (request_.report_weight_version && c.weight_versions.size() > 1)
        choice["weight_versions"] = weight_versions_json(c);
      if (c.routed_experts) choice["routed_experts"] = routed_experts_json(*c.routed_experts);
      choices.push_back(std::move(choice));
    }
  }
  Json j = {
      {"id", id_},           {"object", chat ? "chat.completion" : "text_completion"},
      {"created", created_}, {"model", model_name_},
      {"choices", choices},  {"usage", usage_json(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens)},
      {"seed", seed_json()}};
  if (!request_.system_fingerprint.empty()) j["system_fingerprint"] = request_.system_fingerprint;
  // The weights the answer came from (docs/RL.md): the version of its latest token.
  for (const RequestOutput& r : outputs)
    if (request_.report_weight_version && !r.weight_version.empty()) j["weight_version"] = r.weight_version;
  // vLLM's chat response carries the (one) prompt's logprobs and ids beside the choices (null when
  // not asked for).
  if (chat) {
    const bool one = !outputs.empty();
    j["prompt_logprobs"] = one && request_.params.prompt_logprobs ? prompt_logprobs_json(outputs[0]) : Json(nullptr);
    j["prompt_token_ids"] = one && request_.return_token_ids ? Json(outputs[0].prompt_token_ids) : Json(nullptr);
  }
  return j;
}

Json ApiFormatter::prompt_logprobs_json(const RequestOutput& r) const {
  Json pl = Json::array();
  for (const auto& e : r.prompt_logprobs) {
    if (!e) {
      pl.push_back(nullptr);
      continue;
    }
    Json m = Json::object();
    m[std::to_string(e->token.token_id)] = {
        {"logprob", e->token.logprob}, {"rank", e->token.rank}, {"decoded_token", token_text(e->token)}};
    for (const TokenLogprob& t : e->top_logprobs)
      m[std::to_string(t.token_id)] = {{"logprob", t.logprob}, {"rank", t.rank}, {"decoded_token", token_text(t)}};
    pl.push_back(std::move(m));
  }
  return pl;
}

Json ApiFormatter::seed_json() const { return request_.params.seed ? Json(*request_.params.seed) : Json(nullptr); }

Json ApiFormatter::chunk(Json choice) const {
  const bool chat = request_.endpoint == ApiEndpoint::kChatCompletions;
  Json j = {{"id", id_},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_name_},
            {"seed", seed_json()}};
  if (!request_.system_fingerprint.empty()) j["system_fingerprint"] = request_.system_fingerprint;
  j["choices"] = choice.is_null() ? Json::array() : Json::array({std::move(choice)});
  if (request_.include_usage) j["usage"] = nullptr;
  return j;
}

Json ApiFormatter::chunk(Json choice, int64_t prompt_tokens, int64_t completion_tokens,
                         int64_t reasoning_tokens) const {
  Json j = chunk(std::move(choice));
  // vLLM's continuous usage: the chunk's prompt and its choice's tokens so far, with the reasoning
  // tokens so far when a reasoning parser is on.
  if (request_.include_usage && request_.continuous_usage_stats) {
    j["usage"] = {{"prompt_tokens", prompt_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens},
                  {"completion_tokens", completion_tokens}};
    if (request_.parsers.reasoning) j["usage"]["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  }
  return j;
}

std::vector<Json> ApiFormatter::stream_chunks(size_t slot, const RequestOutput& r) {
  const bool chat = request_.endpoint == ApiEndpoint::kChatCompletions;
  SlotStream& stream = streams_[slot];
  stream.prompt_tokens += static_cast<int64_t>(r.prompt_token_ids.size());  // the first report's
  stream.cached_tokens = r.num_cached_tokens;                               // every report carries it
  if (!r.prompt_token_ids.empty()) stream.prompt_token_ids = r.prompt_token_ids;
  std::vector<Json> out;
  for (const CompletionOutput& c : r.outputs) {
    ChoiceStream& e = stream.choices[static_cast<size_t>(c.index)];
    stream.completion_tokens += static_cast<int64_t>(c.token_ids.size());
    if (e.finished) continue;
    e.completion_tokens += static_cast<int64_t>(c.token_ids.size());
    count_reasoning(e.reasoning, c.token_ids);
    const int64_t index = static_cast<int64_t>(slot) * request_.params.n + c.index;
    auto emit = [&](Json choice, int64_t completion_tokens, int64_t reasoning_tokens) {
      out.push_back(chunk(std::move(choice), stream.prompt_tokens, completion_tokens, reasoning_tokens));
    };
    if (chat && !e.started) {
      // vLLM's first chunk holds the role alone (no token yet); with echo, the echoed message
      // follows in a chunk of its own; then the reply.
      std::vector<Json> deltas = {Json{{"role", request_.response_role}, {"content", ""}}};
      if (!request_.echoed_message.empty()) deltas.push_back(Json{{"content", request_.echoed_message}});
      for (Json& delta : deltas) {
        Json choice = {{"index", index},
                       {"delta", std::move(delta)},
                       {"logprobs", nullptr},
                       {"finish_reason", nullptr},
                       {"stop_reason", nullptr}};
        if (request_.return_token_ids) choice["token_ids"] = Json::array();  // no token in these
        emit(std::move(choice), 0, 0);
      }
      e.started = true;
    }
    const bool finishing = !c.finish_reason.empty();
    const bool started = e.started;
    Json choice = {{"index", index}};
    bool has_new = !c.token_ids.empty();
    std::string finish_reason = c.finish_reason;
    if (chat) {
      // What the report adds to the message (split by the engine's output parsers when on).
      ChatMessageParts piece = message_parts(c);
      // A named function's arguments are the output, streamed as they come (vLLM's deltas); the
      // calls of "required" are parsed when the output is whole and sent in the last chunk.
      Json named_call;
      if (request_.forced_tool_choice == ForcedToolChoice::kNamed) {
        piece = ChatMessageParts();
        if (!c.text.empty() || (finishing && e.tool_calls == 0)) {
          named_call = {{"index", 0}};
          if (e.tool_calls == 0) {
            named_call["id"] = tool_call_id(slot, c.index, 0);
            named_call["type"] = "function";
            named_call["function"] = {{"name", request_.tool_choice_name}, {"arguments", c.text}};
          } else {
            named_call["function"] = {{"arguments", c.text}};
          }
        }
      } else if (request_.forced_tool_choice == ForcedToolChoice::kRequired) {
        e.forced_text += c.text;
        piece = finishing ? forced_tool_calls(e.forced_text) : ChatMessageParts();
      }
      if (!request_.separate_reasoning) {
        piece.content = piece.reasoning + piece.content;
        piece.reasoning.clear();
      }
      if (!request_.include_reasoning) piece.reasoning.clear();
      // parallel_tool_calls false: only the first tool call (index 0) is sent, as vLLM's; the
      // later ones still count, so the finish reason stays "tool_calls".
      const size_t num_calls = piece.tool_calls.size() + (!named_call.is_null() && e.tool_calls == 0 ? 1 : 0);
      if (!request_.parallel_tool_calls)
        piece.tool_calls.resize(e.tool_calls == 0 ? std::min<size_t>(num_calls, 1) : 0);
      Json delta = Json::object();
      if (!started) delta["role"] = request_.response_role;
      if (!piece.reasoning.empty()) delta["reasoning"] = delta["reasoning_content"] = piece.reasoning;
      if (!piece.content.empty() || !started) delta["content"] = piece.content;
      if (!piece.tool_calls.empty())
        delta["tool_calls"] = tool_calls_json(piece.tool_calls, e.tool_calls, slot, c.index, /*streaming=*/true);
      if (!named_call.is_null()) delta["tool_calls"] = Json::array({named_call});
      // vLLM sends no chunk for tokens that add nothing visible (a reasoning parser's </think>),
      // unless the client asked for what they carry (their ids or logprobs).
      const bool visible =
          !piece.reasoning.empty() || !piece.content.empty() || !piece.tool_calls.empty() || !named_call.is_null();
      has_new = visible || (has_new && (request_.return_token_ids || request_.logprobs.has_value()));
      if (started && !has_new && !finishing) continue;
      e.tool_calls += num_calls;
      if (finishing && e.tool_calls > 0 && finish_reason == "stop" &&
          request_.forced_tool_choice != ForcedToolChoice::kNamed)
        finish_reason = "tool_calls";
      choice["delta"] = std::move(delta);
      choice["logprobs"] = request_.logprobs ? chat_logprobs(c) : Json(nullptr);
    } else {
      has_new = has_new || !c.text.empty();
      if (started && !has_new && !finishing) continue;
      const bool with_prompt = request_.echo && !started;
      const std::string text = request_.echo_only ? "" : c.text;
      choice["text"] = with_prompt ? prompt_texts_[slot] + text : text;
      choice["logprobs"] = request_.logprobs
                               ? completion_logprobs(r, c, with_prompt, e.text_offset, !request_.echo_only)
                               : Json(nullptr);
    }
    choice["finish_reason"] = finishing ? Json(finish_reason) : Json(nullptr);
    choice["stop_reason"] = finishing ? stop_reason_json(c) : Json(nullptr);
    if (request_.return_token_ids) {
      if (!chat) choice["prompt_token_ids"] = !started ? Json(stream.prompt_token_ids) : Json(nullptr);
      choice["token_ids"] = c.token_ids;
    } else if (!chat) {  // vLLM's completion chunks carry them as null
      choice["prompt_token_ids"] = choice["token_ids"] = nullptr;
    }
    if (request_.report_weight_version &&
        (c.weight_versions.size() > 1 || (!c.weight_versions.empty() && e.weight_version.has_value() &&
                                          *e.weight_version != c.weight_versions.front().weight_version)))
      choice["weight_versions"] = weight_versions_json(c);
    if (!c.weight_versions.empty()) e.weight_version = c.weight_versions.back().weight_version;
    // ditto's addition: vLLM streams no routed experts; the choice's finishing chunk carries them whole.
    if (c.routed_experts) choice["routed_experts"] = routed_experts_json(*c.routed_experts);
    e.started = true;
    e.finished = finishing;
    emit(std::move(choice), e.completion_tokens, e.reasoning.tokens);
    if (request_.report_weight_version && !r.weight_version.empty()) out.back()["weight_version"] = r.weight_version;
  }
  // A chat stream carries the prompt's ids once, in its slot's first chunk (beside the choices).
  if (chat && request_.return_token_ids && !stream.prompt_token_ids_sent && !out.empty()) {
    out.front()["prompt_token_ids"] = stream.prompt_token_ids;
    stream.prompt_token_ids_sent = true;
  }
  return out;
}

ChatMessageParts ApiFormatter::forced_tool_calls(const std::string& text) const {
  ChatMessageParts parts;
  if (request_.forced_tool_choice == ForcedToolChoice::kNamed) {
    parts.tool_calls.push_back(ToolCall{.name = request_.tool_choice_name, .arguments = text});
  } else if (std::optional<std::vector<ToolCall>> calls = parse_required_tool_calls(text)) {
    parts.tool_calls = std::move(*calls);
  } else {  // not the array the constraint asks for (cut by max_tokens, or ended in error)
    parts.content = text;
  }
  return parts;
}

std::string ApiFormatter::tool_call_id(size_t slot, int64_t choice, size_t k) const {
  const std::string base = id_.substr(id_.find('-') + 1);
  return "call_" + base + "_" + std::to_string(slot) + "_" + std::to_string(choice) + "_" + std::to_string(k);
}

Json ApiFormatter::tool_calls_json(const std::vector<ToolCall>& calls, size_t first_index, size_t slot, int64_t choice,
                                   bool streaming) const {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const size_t k = first_index + i;
    Json call = Json::object();
    if (streaming) call["index"] = k;
    call["id"] = tool_call_id(slot, choice, k);
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

std::pair<int64_t, int64_t> ApiFormatter::streamed_tokens() const {
  std::pair<int64_t, int64_t> total{0, 0};
  for (const SlotStream& s : streams_) {
    total.first += s.prompt_tokens;
    total.second += s.completion_tokens;
  }
  return total;
}

Json ApiFormatter::usage_chunk() const {
  const auto [prompt_tokens, completion_tokens] = streamed_tokens();
  int64_t cached_tokens = 0, reasoning_tokens = 0;
  for (const SlotStream& s : streams_) {
    cached_tokens += s.cached_tokens;
    for (const ChoiceStream& c : s.choices) reasoning_tokens += c.reasoning.tokens;
  }
  Json j = chunk(nullptr);
  j["usage"] = usage_json(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens);
  return j;
}

}  // namespace ditto
