// What the engine returns per request, shaped like vLLM's RequestOutput / CompletionOutput.
// With RequestOutputKind::kDelta a request is reported after every step that produced something,
// each report holding only what is new: text, token_ids and logprobs are the pieces to append,
// cumulative_logprob is the running total, finish_reason is set in the report where the choice
// finished. The first report carries the prompt fields and, when asked for, the complete
// prompt_logprobs (a request with prompt_logprobs is not reported before they are all computed).
// Appended in order, the reports are the kFinalOnly output, bit for bit.
// Part of ditto's public C++ API (self-contained: the standard library only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ditto {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;  // raw model log-probability (before penalties, temperature, filters)
  int64_t rank = 0;      // 1 + number of tokens with a strictly larger logprob
  // The token alone as text (decoded with special tokens kept; vLLM's decoded_token), and the
  // bytes it stands for (OpenAI's chat "bytes": a piece of a UTF-8 character stays a piece). Both
  // empty when the model has no tokenizer.
  std::string decoded_token;
  std::string bytes;
};

struct SampledToken {
  TokenLogprob token;                      // the chosen token
  std::vector<TokenLogprob> top_logprobs;  // params.logprobs entries, (logprob desc, id asc)
};

// A function call the model wrote (Hermes-style <tool_call> blocks; OpenAI's message.tool_calls).
struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

// Generated text split into a chat message's fields by the request's output parsers (the server's
// --reasoning-parser and --tool-call-parser): reasoning (OpenAI-compatible servers'
// reasoning_content), content, and the tool calls completed. In a kDelta report, what that report
// adds to the message; the reports' parts appended in order are the kFinalOnly output's, whatever
// the text's cutting into reports.
struct ChatMessageParts {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// Where a choice's tokens switched weights (docs/RL.md): from token `first_token` on (an index into
// CompletionOutput::token_ids) they were computed under weight version `weight_version`. A choice
// that ran under one version has one span, from token 0.
struct WeightVersionSpan {
  int64_t first_token = 0;
  std::string weight_version;
};

// The experts a Mixture-of-Experts model's routers chose for a sequence (vLLM's
// CompletionOutput.routed_experts, with EngineArgs::enable_return_routed_experts; "routing replay"
// for RL trainers, docs/RL_ROUTED_EXPERTS.md). Row t is the token at position t of the sequence
// (prompt, then output) as the model read it; rows cover every position whose token went through a
// forward pass: prompt + output tokens - 1 (the last sampled token is never run), fewer for an
// aborted choice (its computed positions). Prompt positions the prefix cache served hold the rows
// the cached block was computed with — the same bits a recomputation gives.
struct RoutedExperts {
  int64_t num_tokens = 0;            // rows
  int64_t num_moe_layers = 0;        // the model's MoE layers, in layer order
  int64_t num_experts_per_tok = 0;   // top_k
  int64_t num_experts = 0;           // the ids are below it
  std::vector<uint16_t> expert_ids;  // [num_tokens, num_moe_layers, num_experts_per_tok] ids in
                                     // [0, num_experts), each top-k in the router's order:
                                     // probability desc, then expert id asc
  bool operator==(const RoutedExperts&) const = default;
};

struct CompletionOutput {
  int64_t index = 0;                   // choice i of n
  std::string text;                    // detokenized output (stop string cut per the params)
  std::vector<int32_t> token_ids;      // generated ids (an EOS or stop token id included)
  std::vector<SampledToken> logprobs;  // per generated token, when params.logprobs is set
  double cumulative_logprob = 0.0;     // Σ of the generated tokens' float32 logprobs, in order
  // "stop", "length", "abort", or "error": a structured output whose constraint allows no token
  // the request's other masks leave (e.g. only EOS before min_tokens); the output ends before it.
  std::string finish_reason;
  std::optional<int32_t> stop_token_id;    // the stop_token_ids entry that ended it
  std::optional<std::string> stop_string;  // the stop string that ended it
  // finish_reason "error": why (the grammar engine's reason, e.g. a constraint too complex for
  // its per-step limits); the server returns it as stop_reason, Python as stop_reason.
  std::optional<std::string> finish_message;
  std::optional<ChatMessageParts> message;  // set only when the request's output parsers are on
  // The weight versions its tokens were sampled under, in token order, one span per change (a
  // weight update that lands while the request runs, pause_generation(mode="keep")). In a kDelta
  // report: the spans of the report's tokens, first_token counted from the choice's first token.
  std::vector<WeightVersionSpan> weight_versions;
  // With enable_return_routed_experts (a MoE model): set once the choice has finished (a kDelta
  // stream: in the report that carries its finish_reason, whole); otherwise empty.
  std::optional<RoutedExperts> routed_experts;
};

struct RequestOutput {
  std::string request_id;
  std::string prompt;  // the prompt text when given as text
  std::vector<int32_t> prompt_token_ids;
  // When params.prompt_logprobs is set: one entry per prompt token, the first empty (it has no
  // context).
  std::vector<std::optional<SampledToken>> prompt_logprobs;
  std::vector<CompletionOutput> outputs;  // n choices, by index
  uint64_t seed = 0;                      // the seed used (drawn from the OS if none was given)
  // Prompt tokens whose K/V the prefix cache already held when the request first ran (vLLM's
  // num_cached_tokens; choice 0's). It says how much work was saved, which depends on what ran
  // before: it is not part of the invariance contract (the outputs are the same bits either way).
  int64_t num_cached_tokens = 0;
  bool finished = false;  // every choice has finished (the last report)
  // The weight version (LLMEngine::weight_version) of the request's latest step: the version of
  // its last token, or the version it was pooled or admitted under.
  std::string weight_version;
  // A pooling request's result (include/ditto/pooling.h: PoolingRequestOutput::data, which the
  // pooling front ends return); empty for a generation. Such a request has no outputs to read.
  std::vector<float> pooled;
};

}  // namespace ditto
