// The way out of the engine, vLLM v1's OutputProcessor: what each request has produced, as every
// front end receives it. The engine step hands it each sampled token, prompt logprob and finish; it
// detokenizes incrementally, cuts stop strings (and tells the engine, which then ends the choice),
// gives every logprob entry its text and bytes, and keeps the one ledger of what has been reported:
// the final RequestOutput of a kFinalOnly request, or the kDelta reports of one that streams. With
// the request's output_parsers on, it also splits each choice's text into a chat message's parts
// (reasoning, content, tool calls: CompletionOutput::message), incrementally for a stream.
// Nothing here changes a token: it only reads what the engine sampled.
// Thread-safety: none; the engine's thread drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "ditto/request_output.h"
#include "ditto/sampling_params.h"
#include "engine/input_processor.h"
#include "engine/sequence.h"

namespace ditto {

class Tokenizer;

class OutputProcessor {
 public:
  // tokenizer may be null: outputs then carry token ids only (no text, no logprob text), and stop
  // strings never match (the front door refuses them without a tokenizer). It must outlive this.
  explicit OutputProcessor(const Tokenizer* tokenizer);
  ~OutputProcessor();
  OutputProcessor(const OutputProcessor&) = delete;
  OutputProcessor& operator=(const OutputProcessor&) = delete;

  // Starts the output of `r` under `key` (the engine's index for the request; unique while the
  // request lives), with r.params.n choices and r.params.seed, which must be set.
  void add(int64_t key, const EngineRequest& r);

  // Appends `s`, the token choice `choice` sampled at output position `position` (0-based), with
  // its logprobs when the request asked for them. Returns true when a stop string ended the choice
  // with it — the text is then cut (params.include_stop_str_in_output), stop_string set, and the
  // engine must end the sequence (finish with FinishReason::kStop). Stop strings are matched only
  // after min_tokens output tokens (vLLM's rule, as for EOS and stop_token_ids).
  bool append_token(int64_t key, int64_t choice, int64_t position, SampledToken&& s);

  // Ends choice `choice` (its finish_reason: "stop", "length" or "abort"); the detokenizer's
  // held-back bytes are flushed unless a stop string already cut the text. stop_token_id: the
  // stop_token_ids entry that ended it, if one did.
  // `message`: why, for FinishReason::kError (CompletionOutput::finish_message).
  void finish(int64_t key, int64_t choice, FinishReason reason, std::optional<int32_t> stop_token_id = std::nullopt,
              std::optional<std::string> message = std::nullopt);

  // Whether prompt position `position` still lacks its logprobs (the request asked for them).
  bool wants_prompt_logprob(int64_t key, int64_t position) const;
  void set_prompt_logprob(int64_t key, int64_t position, SampledToken&& s);

  // The prompt tokens choice 0 found in the prefix cache when it first ran (RequestOutput's
  // num_cached_tokens); the first value given stands.
  void set_num_cached_tokens(int64_t key, int64_t num_cached_tokens);

  // The weight version of the tokens appended from now on (CausalLM::weight_version; the engine
  // sets it before each step). Each choice records the spans of versions its tokens came from
  // (CompletionOutput::weight_versions), and every report its latest (RequestOutput::weight_version).
  void set_weight_version(const std::string& version) { weight_version_ = version; }
  // Choice `choice`'s routed experts (CompletionOutput::routed_experts), set before it finishes.
  void set_routed_experts(int64_t key, int64_t choice, RoutedExperts routed_experts);

  // A pooling request's result (RequestOutput::pooled), set before its one choice finishes.
  void set_pooled(int64_t key, std::vector<float> pooled);
  // True once every choice of the request has finished.
  bool finished(int64_t key) const;

  // The outputs of the given requests after a step: a report of what is new for each kDelta
  // request that progressed (request_output.h), the whole output of each kFinalOnly request that
  // finished. A finished request is forgotten after its last report. Keys not (or no longer) held
  // are skipped.
  std::vector<RequestOutput> report(std::span<const int64_t> keys);

  size_t size() const { return requests_.size(); }

 private:
  struct Request;
  std::optional<RequestOutput> take_delta(Request& req) const;
  void fill_text(TokenLogprob& t) const;

  const Tokenizer* tokenizer_;
  std::string weight_version_ = "0";
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
};

// Appends a kDelta report to the output accumulated so far (the first report may be appended to a
// default RequestOutput). Choices are matched by index.
void append_delta(RequestOutput& acc, RequestOutput&& delta);

}  // namespace ditto
