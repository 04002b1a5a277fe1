// The OpenAI API's request and response bodies (https://platform.openai.com/docs/api-reference:
// /v1/completions and /v1/chat/completions, with vLLM's extra sampling fields), translated to and
// from the engine's SamplingParams and RequestOutput. No I/O: http_server.cc does that.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ditto/prompt_input.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"
#include "engine/chat_messages.h"
#include "engine/input_processor.h"
#include "engine/output_parsers.h"
#include "server/structured_output_api.h"

namespace ditto {

// True when an Authorization header value is "Bearer <api_key>": the scheme case-insensitively
// (RFC 9110 §11.1), the key exactly, compared in time that depends only on the header's length,
// never on where a wrong key first differs (no timing side channel on --api-key).
bool bearer_token_matches(std::string_view authorization, std::string_view api_key);

// An error answered as vLLM's error object (the OpenAI shape with vLLM's type and code):
// {"error": {"message": ..., "type": ..., "param": ..., "code": <status>}} with HTTP `status`.
// Made by to_api_error() from a ditto::Error, or directly for HTTP framing (405, 411, 413, 414),
// whose type is the status's HTTP reason phrase, as vLLM's HTTPException handler writes it.

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}
  int status() const { return status_; }
  // vLLM's ErrorResponse: {"error": {"message", "type", "param", "code": status}}.
  nlohmann::ordered_json body() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
};

// The one mapping from ditto::Error to an HTTP status and error body, as vLLM's
// create_error_response names them (type: the exception's name, code: the HTTP status):
//   kInvalidArgument → 400 BadRequestError (param: the field at fault)
//   kNotFound → 404 NotFoundError (param "model" for an unknown model)
//   kUnauthenticated → 401 Unauthorized
//   kResourceExhausted → 503 Service Unavailable (the queue is full, or the server is shutting down)
//   kCancelled → 499 Client Closed Request (nginx's: the client went away; nobody reads it)
//   kInternal → 500 InternalServerError
ApiError to_api_error(const Error& e);

// Error(kInvalidArgument) naming `param` (a 400 once mapped).
[[noreturn]] inline void throw_bad_param(const std::string& param, const std::string& message) {
  throw_invalid_field(param, message);
}

// A completion's `prompt` or an embedding's `input` (OpenAI's shapes): a string, token ids, or a
// non-empty array of strings and token-id arrays; one PromptInput each. Throws
// Error(kInvalidArgument, param = `name`) for anything else.
std::vector<PromptInput> read_prompts(const nlohmann::ordered_json& v, const std::string& name);

// vLLM's `priority`: any but 0 needs its priority scheduling, which ditto has not (ditto serves
// first come, first served). Throws Error(kInvalidArgument, "priority") for one.
void check_priority(const nlohmann::ordered_json& body);

enum class ApiEndpoint { kCompletions, kChatCompletions };

// A request body, checked field by field (types and ranges; unknown fields are listed in
// `ignored_fields`, as vLLM ignores them).
struct ApiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::optional<std::string> model;
  // completions: one per prompt (text or token ids); chat: one holding the messages.
  std::vector<PromptInput> prompts;
  SamplingParams params;                        // output_kind is set by the engine side
  bool max_tokens_given = false;                // else: completions 16, chat the rest of the context
  std::string max_tokens_field = "max_tokens";  // chat: "max_completion_tokens" when given so
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // stream_options.continuous_usage_stats: every chunk carries the usage so far (its prompt's
  // tokens and its choice's completion tokens), as vLLM's, when usage is included at all.
  bool continuous_usage_stats = false;
  // completions: prepend the prompt (and its logprobs). chat (vLLM's): prepend `echoed_message`.
  bool echo = false;
  // completions, echo with max_tokens 0 (vLLM's "echo without generation"): the engine samples one
  // token (counted in usage, as vLLM does) and the choice shows the prompt alone.
  bool echo_only = false;
  // chat: the role of the reply, vLLM's rule: "assistant" with add_generation_prompt, else the
  // last message's role (the message being continued).
  std::string response_role = "assistant";
  // chat echo: the last message's content (text parts joined with "\n") when its role is the
  // reply's role, else "" (vLLM's rule); what echo puts before each choice's content.
  std::string echoed_message;
  // chat: parallel_tool_calls false returns at most one tool call per choice (the first), as
  // vLLM's; the finish reason stays "tool_calls".
  bool parallel_tool_calls = true;
  // chat, with a reasoning parser: false leaves the reasoning out of the response (vLLM's
  // include_reasoning; it still counts in usage's reasoning_tokens).
  bool include_reasoning = true;
  // chat, with a reasoning parser: false puts the reasoning back in front of the content (vLLM's
  // separate_reasoning).
  bool separate_reasoning = true;
  // completions: `logprobs` N (top N per token); chat: `logprobs` true with `top_logprobs` N.
  std::optional<int64_t> logprobs;
  bool return_tokens_as_token_ids = false;  // logprob tokens as "token_id:N" (vLLM's extension)
  // vLLM's return_token_ids: the prompt's and each choice's token ids in the response
  // (completions: choice.prompt_token_ids and choice.token_ids; chat: prompt_token_ids beside the
  // choices and choice.token_ids; streamed: each chunk's new ids, the prompt's in the first).
  bool return_token_ids = false;
  // vLLM's use_beam_search: n beams per prompt (beam width n) with length_penalty, answered
  // whole when done (streamed: as one report), as vLLM's server does.
  bool use_beam_search = false;
  float length_penalty = 1.0f;
  // chat: how the engine splits the output into reasoning_content / content / tool_calls (set by
  // the server from its flags and the request's tools; the formatter reads the parts from
  // CompletionOutput::message).
  ChatOutputParsers parsers;
  bool tool_choice_none = false;  // chat: tool_choice "none" (the tools stay in the prompt)
  // chat: tool_choice "required" or {"type": "function", "function": {"name": ...}} (vLLM's): the
  // output is constrained (params.structured_outputs, tool_choice_schema()) and returned as
  // message.tool_calls, whatever the server's tool-call parser. Named: one call of
  // `tool_choice_name` whose arguments are the output, finish_reason as the engine's ("stop");
  // required: the calls of the JSON array (parse_required_tool_calls), finish_reason "tool_calls".
  ForcedToolChoice forced_tool_choice = ForcedToolChoice::kNone;
  std::string tool_choice_name;
  // The request field a constraint that does not compile is reported under, when it came from
  // another field than structured_outputs (whose own names the engine gives): "response_format…",
  // "tool_choice", "tools", "guided_json", ...
  std::string constraint_field;
  // usage.prompt_tokens_details.cached_tokens in responses (set by the server from vLLM's
  // --enable-prompt-tokens-details).
  bool prompt_tokens_details = false;
  // Set by the server: its engine's system_fingerprint (engine/system_fingerprint.h), carried by
  // every response and stream chunk; "" leaves the field out.
  std::string system_fingerprint;
  // Set by the server: with VLLM_SERVER_DEV_MODE (weights can change), every response and chunk
  // carries weight_version and a choice that spans an update its weight_versions (docs/RL.md).
  // Off, the weights never change and responses keep to OpenAI's and vLLM's fields.
  bool report_weight_version = false;
  bool add_generation_prompt = true;    // chat
  bool continue_final_message = false;  // chat
  std::vector<std::string> ignored_fields;
};

// Parses a request body (already JSON). Throws Error(kInvalidArgument) whose param() is the field
// at fault. Ranges are the engine's (SamplingParams::validate, at the front door).
// max_logprobs bounds logprobs, top_logprobs and prompt_logprobs (the engine's).
// `defaults`: the sampling parameters of a field the body leaves out (the front door's
// default_sampling_params: the model's generation_config).
ApiRequest parse_api_request(ApiEndpoint endpoint, const nlohmann::ordered_json& body, int64_t max_logprobs = 20,
                             const SamplingParams& defaults = {});

// How the front door settles the request's max_tokens: as given when the client gave it; without
// it a completion gets vLLM's 16 cut to the context, a chat the rest of the context.
MaxTokensRule max_tokens_rule(const ApiRequest& request);

// Formats responses from the engine's reports, as they come: no output is accumulated or sliced
// here. `id` is "cmpl-…" / "chatcmpl-…", `created` Unix seconds, `prompt_texts` each slot's prompt
// as text (what echo prepends). A slot is one prompt of the request (its engine request).
class ApiFormatter {
 public:
  // `door` gives the text of a prompt's first token for echo with logprobs (the one token the
  // engine reports no logprob entry, and so no text, for); every other token's text comes with
  // its logprob entry (TokenLogprob::decoded_token, ::bytes).
  ApiFormatter(const ApiRequest& request, const InputProcessor& door, std::string id, int64_t created,
               std::string model_name, std::vector<std::string> prompt_texts);

  // The whole non-streaming response body from each slot's final output
  // (RequestOutputKind::kFinalOnly), by slot.
  nlohmann::ordered_json response(const std::vector<RequestOutput>& outputs) const;

  // Streaming: the chunks for one kDelta report of slot `slot` (a slot's reports in the engine's
  // order). Returns zero or more chunk objects.
  std::vector<nlohmann::ordered_json> stream_chunks(size_t slot, const RequestOutput& report);
  // The final usage chunk (stream_options.include_usage): the tokens of the reports streamed.
  nlohmann::ordered_json usage_chunk() const;
  // (prompt tokens, completion tokens) of the reports streamed so far, summed over the slots.
  std::pair<int64_t, int64_t> streamed_tokens() const;

 private:
  // usage.completion_tokens_details.reasoning_tokens (chat with a reasoning parser): a choice's
  // tokens before the first `</think>` token, a leading `<think>` token and `</think>` itself not
  // counted; every token when `</think>` never comes; none with thinking disabled (the parser's
  // rules, output_parsers.h).
  struct ReasoningCount {
    bool started = false;  // a first token has been seen
    bool ended = false;    // `</think>` has been seen
    int64_t tokens = 0;
  };
  void count_reasoning(ReasoningCount& count, const std::vector<int32_t>& ids) const;
  // What the stream of one choice has sent: the one ledger on the way out.
  // A choice's weight_versions (docs/RL.md): [{"first_token": i, "weight_version": v}, ...].
  static nlohmann::ordered_json weight_versions_json(const CompletionOutput& c);
  struct ChoiceStream {
    bool started = false;
    bool finished = false;
    int64_t completion_tokens = 0;  // streamed so far (continuous_usage_stats)
    size_t text_offset = 0;         // completions logprobs: characters of text before the next token
    size_t tool_calls = 0;          // chat: tool calls sent (the next one's index)
    std::string forced_text;        // chat, tool_choice "required": the output so far (parsed at the end)
    ReasoningCount reasoning;
    std::optional<std::string> weight_version;  // of the last token sent (a chunk with another says so)
  };
  struct SlotStream {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;
    std::vector<ChoiceStream> choices;
    std::vector<int32_t> prompt_token_ids;  // from the first report (return_token_ids)
    bool prompt_token_ids_sent = false;     // chat: in the slot's first chunk
  };
  // The message of a choice whose tool_choice is "required" or a named function, from its whole
  // output text: the named call with the text as its arguments; the parsed calls; or, when the
  // text is not the array "required" asks for, the text as content.
  ChatMessageParts forced_tool_calls(const std::string& text) const;
  std::string tool_call_id(size_t slot, int64_t choice, size_t k) const;
  nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, size_t first_index, size_t slot,
                                         int64_t choice, bool streaming) const;
  // The completions `logprobs` object for the tokens of `c` (after the prompt's, when
  // `with_prompt`; none of them when not `with_output`); `text_offset` is where the first token
  // starts and is advanced past the last.
  nlohmann::ordered_json completion_logprobs(const RequestOutput& r, const CompletionOutput& c, bool with_prompt,
                                             size_t& text_offset, bool with_output = true) const;
  nlohmann::ordered_json chat_logprobs(const CompletionOutput& c) const;
  // `reasoning_tokens` goes to completion_tokens_details when the request has a reasoning parser.
  nlohmann::ordered_json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                                    int64_t reasoning_tokens = 0) const;
  // vLLM's prompt_logprobs: per prompt token null (the first) or {token id: {logprob, rank,
  // decoded_token}} for the token and its top alternatives.
  nlohmann::ordered_json prompt_logprobs_json(const RequestOutput& r) const;
  nlohmann::ordered_json chunk(nlohmann::ordered_json choice) const;
  // A stream chunk of one choice; with continuous_usage_stats its usage is these counts.
  nlohmann::ordered_json chunk(nlohmann::ordered_json choice, int64_t prompt_tokens, int64_t completion_tokens,
                               int64_t reasoning_tokens) const;
  // The request's seed (the server draws one for a request without), as every body reports it.
  nlohmann::ordered_json seed_json() const;
  // A logprob entry's token as the API shows it: its text, or "token_id:N" (return_tokens_as_token_ids).
  std::string token_text(const TokenLogprob& t) const;
  std::string token_text(int32_t id, const std::string& text) const;

  const ApiRequest& request_;
  const InputProcessor& door_;
  std::optional<int32_t> think_start_, think_end_;  // the `<think>` and `</think>` token ids
  std::string id_;
  int64_t created_;
  std::string model_name_;
  std::vector<std::string> prompt_texts_;  // by slot
  std::vector<SlotStream> streams_;        // by slot
};

// stop_reason as vLLM reports it: the stop string, the stop token id, or null.
nlohmann::ordered_json stop_reason_json(const CompletionOutput& c);
// A choice's routed_experts as vLLM's server sends them: the base64 text of a NumPy .npy file
// (engine/routed_experts.h routed_experts_npy); numpy.load(io.BytesIO(base64.b64decode(s))).
nlohmann::ordered_json routed_experts_json(const RoutedExperts& r);

}  // namespace ditto
