// ditto's offline API, shaped like vLLM's (`LLM(model=...).generate(prompts, sampling_params)`):
//
//   ditto::LLM llm({.model = "Qwen/Qwen3-8B"});
//   ditto::SamplingParams p;
//   p.temperature = 0.7f; p.max_tokens = 100; p.seed = 42;
//   for (const ditto::RequestOutput& out : llm.generate({"The future of AI is"}, p))
//     std::cout << out.outputs[0].text << "\n";
//
// Every output is the same bits whatever else is in the batch (docs/INVARIANCE.md).
// Thread-safety: an LLM is used from one thread at a time.
// Several processes: EngineArgs::tensor_parallel_size and serve_as_tensor_parallel_rank (below).
// Part of ditto's public C++ API: `find_package(ditto)` + `target_link_libraries(app ditto::ditto)`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ditto/engine_args.h"
#include "ditto/error.h"
#include "ditto/prompt_input.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"

namespace ditto {

class LLMEngine;

// A request that could not run carries its error; the others of the batch complete.
struct GenerateResult {
  RequestOutput output;
  std::optional<std::string> error;  // "prompt I: why", naming the field at fault
};

class LLM {
 public:
  // Loads the model, tokenizer and chat template. Throws Error naming the file or field at fault;
  // Error(kResourceExhausted) when the weights or the KV cache do not fit in the memory available.
  explicit LLM(const EngineArgs& args);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Runs every prompt with its parameters (params.size() == 1: shared) and returns the results
  // in input order, request ids "0", "1", .... A bad prompt or parameter becomes that result's
  // error; the rest still run. max_tokens is cut to what the context leaves (vLLM's offline
  // rule). `progress` prints a progress bar to stderr (when it is a terminal). `on_result`, if
  // set, is called with each result (index, result) as soon as it is final — a refused request
  // right away, the others as they finish, so not in input order; the returned vector still
  // holds every result in input order. Throws Error(kInvalidArgument) when params.size() is
  // neither 1 nor prompts.size().
  using ResultFn = std::function<void(size_t index, const GenerateResult& result)>;
  std::vector<GenerateResult> generate(const std::vector<PromptInput>& prompts,
                                       const std::vector<SamplingParams>& params, bool progress = false,
                                       const ResultFn& on_result = nullptr);

  // Text prompts, one shared SamplingParams. Throws Error for the first bad request.
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts, const SamplingParams& params);

  // Streaming: generate() whose requests are reported as they progress. After every engine step
  // that produced something for prompt `index`, on_delta(index, report) gets a report holding only
  // what is new (RequestOutputKind::kDelta, whatever params' output_kind says; request_output.h):
  // one request's reports in order, different requests' interleaved, the last with finished set.
  // Returns what generate() returns — each result the reports appended, the same bits as
  // generate() gives for the same prompts and parameters. A refused prompt gets no report; its
  // result carries the error. Throws as generate().
  using DeltaFn = std::function<void(size_t index, const RequestOutput& delta)>;
  std::vector<GenerateResult> generate_stream(const std::vector<PromptInput>& prompts,
                                              const std::vector<SamplingParams>& params, const DeltaFn& on_delta);

  // The tokenizer, through the same front door as generate(): a text prompt's token ids (with the
  // tokenizer's special tokens when add_special_tokens) or a chat's (rendered with the model's
  // template); throws Error(kInvalidArgument) naming the field for a bad prompt, or when the model
  // has no tokenizer (or, for a chat, no chat template).
  std::vector<int32_t> tokenize(const PromptInput& prompt) const;
  // A chat's prompt as text, as the model's chat template renders it (apply_chat_template).
  std::string render_chat(const PromptInput& chat) const;
  // Token ids as text; skip_special_tokens drops special tokens (as SamplingParams' field).
  std::string detokenize(const std::vector<int32_t>& token_ids, bool skip_special_tokens = true) const;

  // What the last generate() call's engine did.
  struct Stats {
    int64_t steps = 0;
    int64_t preemptions = 0;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    // Speculative decoding (vLLM's spec_decode counters): verifications with guesses, tokens
    // guessed, and guesses accepted (equal to the token the model sampled there).
    int64_t spec_decode_num_drafts = 0;
    int64_t spec_decode_num_draft_tokens = 0;
    int64_t spec_decode_num_accepted_tokens = 0;
  };
  const Stats& last_stats() const;

  const EngineArgs& args() const;

 private:
  std::unique_ptr<LLMEngine> engine_;
};

// Tensor parallelism (EngineArgs::tensor_parallel_size N > 1, the program started N times by
// `mpirun -np N`): call this first on every rank, before any LLM. On ranks other than 0 it serves
// rank 0 (loads its shard, joins every forward pass) until rank 0's program ends, then returns
// true: that rank has nothing more to do. On rank 0, and for N = 1, it returns false at once, and
// rank 0 goes on to construct its LLM. Rank 0 releases the other ranks when it exits.
// Throws Error(kInvalidArgument) when not started by mpirun, when mpirun started another number
// of processes, or when the ranks run different ditto builds.
bool serve_as_tensor_parallel_rank(int tensor_parallel_size);

// Rank 0: releases the other ranks now (they return from serve_as_tensor_parallel_rank), as the
// end of rank 0's program does; for an interpreter that ends otherwise (Python's atexit). After
// it no LLM of this process may run. Does nothing without tensor parallelism.
void shutdown_tensor_parallel();

}  // namespace ditto
