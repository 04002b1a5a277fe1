// The invariance contract checked on a real engine (`ditto check-invariance`): a set of requests,
// each run alone for reference, then run again under every condition the engine covers — batched,
// shuffled, among random co-running traffic, at several step budgets (chunked prefill), with
// prefix-cache hits and with it off, in a KV cache small enough to preempt, with speculative
// decoding (n-gram and a draft model), with another thread count, split over tensor-parallel ranks
// — and compared field by field, bit for bit (output_diff.h); plus every decode logprob against
// the same sequence re-scored with prompt_logprobs, and per logprobs_mode, the tokens against
// raw_logprobs' and every decode entry against the choice re-scored as it was sampled.
// Cost: one generate() per row over all the requests, and one more engine for the thread row (and
// for the tensor-parallel row). Thread-safety: none; one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ditto/engine_args.h"
#include "ditto/prompt_input.h"
#include "ditto/sampling_params.h"

namespace ditto {

// How far check_invariance is: reported as each phase (a row, or the reference pass) starts, as
// its cases finish, and once the run's cost has been measured.
struct InvarianceProgress {
  int64_t rows_done = 0;
  int64_t rows_total = 0;  // as planned (the pooling rows count as one until they have run)
  std::string phase;       // the row now running, or "each case alone (reference)"
  int64_t cases_done = 0;  // within the phase, where it reports them
  int64_t cases_total = 0;
  double fraction = 0.0;  // of the planned work, weighted by its estimated cost, in [0, 1]
  // The whole run's estimated seconds, once calibrated (negative before): the first cases' time
  // alone and together, per token, times every phase's planned tokens.
  double estimated_seconds = -1.0;
  bool calibrated = false;  // true on the one report that first carries the estimate
};
using InvarianceProgressFn = std::function<void(const InvarianceProgress&)>;

struct InvarianceCheckOptions {
  // The requests' prompts; empty: num_prompts random token-id prompts of min..max_prompt_tokens
  // tokens (a third sharing a common prefix, for partial prefix-cache hits), drawn from `seed`.
  std::vector<PromptInput> prompts;
  int64_t num_prompts = 64;
  int64_t min_prompt_tokens = 1;
  int64_t max_prompt_tokens = 600;
  int64_t max_tokens = 64;  // tokens generated per choice (EOS ignored, so every case has them all)
  uint64_t seed = 0;
  std::string draft_model;  // the draft-model row's draft ("": the model itself)
  // Negative control: a test double nudges every logit by the step's batch size, which the check
  // must report as mismatches.
  bool inject_batch_size_fault = false;
  // On a model that pools (--runner pooling, --task embed|score): only the pooling rows
  // (pooling_invariance_check.h), which otherwise follow the generation rows.
  bool pooling_only = false;
  // Called with the progress (the caller's progress bar); null: none.
  InvarianceProgressFn on_progress;
};

// One contract row: how many requests (or, for the re-scoring row, choices) and tokens were
// compared, how many differed, and what the engine did (steps, preemptions, prefix hits, guesses).
struct InvarianceRow {
  std::string name;
  std::string description{};  // what was compared, in a sentence (the HTML report's)
  int64_t cases = 0;
  int64_t tokens = 0;
  int64_t mismatches = 0;
  std::string note{};
  int64_t spec_decode_num_draft_tokens = 0;  // speculative rows: tokens guessed, and accepted
  int64_t spec_decode_num_accepted_tokens = 0;
  // Per mismatching case (request, choice or beam search), the output token position where it
  // first differs from its run alone (output_diff.h: first_divergence; 0 for a prompt-side or
  // pooled difference).
  std::vector<int64_t> first_divergence{};
};

// The contract's mix of sampling parameters, case i of seven kinds in turn: greedy; seeded
// sampling with n = 2 and logprobs 0; top-p with 3 logprobs and a logit_bias; top-k with a
// repetition penalty, bad words (as token ids) and truncate_prompt_tokens 100; min-p with
// frequency and presence penalties and allowed_token_ids (every third id below 96); greedy with logprobs,
// prompt_logprobs and min_tokens 3; n = 3 with stop_token_ids {11, 12} and 1 logprob. The sampled kinds carry seeds,
// the greedy ones none; max_tokens and ignore_eos are the caller's. check_invariance and the engine's invariance tests
// draw from it.
SamplingParams contract_sampling_params(int64_t i);

// The contract's structured outputs, k of six kinds in turn: a JSON Schema object (integer bounds,
// an enum array with minItems, additionalProperties false), a regex, a choice, json_object without
// white space, a Lark grammar, and a JSON Schema array of anyOf a patterned string or a bounded
// number. check_invariance gives case i (of contract_sampling_params) the constraint i / 2 when
// constrained_case(i) and the model has a tokenizer — greedy, seeded n = 2, top-p with logit_bias
// and n = 3 with stop_token_ids cases, every other one — so every row compares constrained
// requests beside unconstrained ones and ones of other constraints.
StructuredOutputsParams contract_structured_outputs(int64_t k);
bool constrained_case(int64_t i);

// Loads the model of `args` (threads 0 → 2, so the thread row compares 2 with 1) and runs every
// row, the requests' parameters from contract_sampling_params. With tensor_parallel_size N > 1 the calling
// process is rank 0 (serve_as_tensor_parallel_rank has run) and a row compares N ranks with one
// process. Every case gets options.max_tokens, ignore_eos and a seed (1000 + i where the mix has
// none). Throws Error(kInvalidArgument) for options out of range or a prompt the engine refuses
// when run alone, as LLMEngine's constructor does for the arguments.
std::vector<InvarianceRow> check_invariance(const EngineArgs& args, const InvarianceCheckOptions& options);

}  // namespace ditto
