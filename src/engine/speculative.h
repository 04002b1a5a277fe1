// Speculative decoding's proposers and its configuration. A proposer guesses the tokens that follow
// a sequence; the engine verifies the guesses (engine.cc, process_outputs) by sampling the model's
// own token at each guessed position exactly as plain decoding would — the same logits, since the
// forward pass is chunk-invariant, and the same random draw (seed, choice, output position) — and
// keeps a guess only while it equals that token. So a proposer decides only how fast a sequence
// goes, never what it says: a bad proposer (even a random one) costs time, not bits
// (docs/SPECULATIVE.md).
// Thread-safety: none; the engine thread owns its proposer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ditto/engine_args.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/sequence.h"

namespace ditto {

class CausalLM;

// Reads vLLM's --speculative-config JSON object (keys: method, model, num_speculative_tokens,
// prompt_lookup_min, prompt_lookup_max, disable_by_batch_size) into a checked SpeculativeConfig:
// "{}" or "" is off; a `model` without a method is "draft_model"; the ngram lookup bounds get
// vLLM's defaults (both 5 when neither is given, else the one given). Throws
// Error(kInvalidArgument) naming the key for malformed JSON, an unknown key or method, a value out
// of range, a draft model with ngram keys or an ngram method with a model.
SpeculativeConfig parse_speculative_config(const std::string& json);
// The checks of parse_speculative_config on an already built config (the Python and C++ APIs):
// throws Error(kInvalidArgument) naming the field; fills in the ngram defaults.
SpeculativeConfig checked_speculative_config(SpeculativeConfig config);

// What the engine asks a proposer for one sequence.
struct ProposalRequest {
  const Sequence* seq;     // a running decode: every token but the last has K/V in the target
  int64_t max_tokens = 0;  // the most tokens to propose, ≥ 1
};

// The speculation policy for one sequence (docs/SPECULATIVE.md, "Auto-off"). Changes how many
// guesses are made and when, never a token.
//
// How many guesses to ask for `seq` in this step, a running decode with `room` tokens left before
// max_tokens or the context (the token sampled after the last guess included): its current guess
// count (k at first), within the room; 0 while it is paused (a paused step is counted down here).
int64_t guesses_to_ask(Sequence& seq, int64_t room, int64_t k);

// After a verification of `num_proposals` guesses of which the first `accepted` were kept: the
// next guess count (k; for a proposer whose guesses cost a pass, doubled up to k after a run all
// kept, else the kept run plus one), and a pause after a verification that kept nothing (1, 2, 4,
// ... 128 decode steps). A draft-model proposer whose guesses for the sequence are kept less than
// a fifth of the time (after 4 or more) stops for the sequence for good and releases it.
class Proposer;
void after_verification(Sequence& seq, int64_t num_proposals, int64_t accepted, int64_t k, Proposer& proposer);

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills proposals[i] (resized to requests.size()) with at most requests[i].max_tokens token ids
  // guessed to follow requests[i].seq->token_ids; empty when it has no guess. Ids must be in the
  // target's vocabulary.
  virtual void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) = 0;
  // The sequence left the engine (finished or aborted): forget what is kept for it.
  virtual void release(int64_t /*sequence_id*/) {}
  // Whether each guess costs a model pass (a draft model): then the engine asks for fewer guesses
  // after a run of them failed (Engine::verify). Prompt lookup's guesses are free to make.
  virtual bool guesses_cost_a_pass() const { return false; }
};

// Prompt lookup (vLLM's "ngram" method; Saxena 2023, "Prompt Lookup Decoding"): for n from
// prompt_lookup_max down to prompt_lookup_min, finds the latest earlier occurrence of the
// sequence's last n tokens (prompt and output alike, the last kLookupWindow of them) and proposes
// the tokens that followed it.
// Costs no model pass; proposes nothing when no suffix recurs.
class NgramProposer : public Proposer {
 public:
  // 1 ≤ prompt_lookup_min ≤ prompt_lookup_max (checked by checked_speculative_config).
  NgramProposer(int64_t prompt_lookup_min, int64_t prompt_lookup_max);
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override;

  // The most recent tokens a lookup searches.
  static constexpr int64_t kLookupWindow = 8192;
  // One sequence's guess: at most max_tokens ids following the latest earlier occurrence of the
  // longest recurring suffix of `token_ids` (length in [min_n, max_n]) among its last
  // kLookupWindow tokens; empty when none recurs.
  static std::vector<int32_t> lookup(std::span<const int32_t> token_ids, int64_t min_n, int64_t max_n,
                                     int64_t max_tokens);

 private:
  int64_t min_n_;
  int64_t max_n_;
};

// A smaller model with the target's vocabulary proposes its greedy continuation (Leviathan et al.
// 2023, "Fast Inference from Transformers via Speculative Decoding", with verification by exact
// match instead of rejection sampling). It keeps its own paged KV cache: per sequence it remembers
// which tokens its cache holds, and on the next call recomputes only from the first token that
// differs from the sequence (the first rejected guess), so rejected guesses' K/V are overwritten.
// Guesses stay within the draft's own context (max_position_embeddings), which may be shorter than
// the model's.
class DraftModelProposer : public Proposer {
 public:
  // `draft` must outlive the proposer. Its KV cache holds num_blocks blocks of block_size tokens;
  // one draft forward pass runs at most max_num_batched_tokens tokens (a long prompt catches up in
  // chunks). Throws Error(kInvalidArgument) if num_blocks < 1.
  DraftModelProposer(const CausalLM& draft, int64_t num_blocks, int64_t block_size, int64_t max_num_batched_tokens);
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override;
  void release(int64_t sequence_id) override;
  bool guesses_cost_a_pass() const override { return true; }

 private:
  // Makes room in the draft cache for `needed` positions of sequence `id`, dropping the state of
  // sequences not in `keep` if it must. False if it still does not fit.
  bool reserve(int64_t id, int64_t needed, std::span<const ProposalRequest> keep);

  const CausalLM& draft_;
  KvCacheManager kv_;
  ModelRunner runner_;
  int64_t max_num_batched_tokens_;
  std::unordered_map<int64_t, std::vector<int32_t>> computed_;  // sequence id → tokens with K/V in the cache
};

// The proposer a config asks for: null when off, NgramProposer, or a DraftModelProposer over
// `draft` (required for "draft_model"; its KV cache gets num_kv_blocks blocks, the target's token
// capacity). Throws Error(kInvalidArgument) for "draft_model" without a draft.
std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config, const CausalLM* draft, int64_t num_kv_blocks,
                                        int64_t block_size, int64_t max_num_batched_tokens);

// Cumulative counts (vLLM's spec_decode metrics): verification rounds with at least one proposal,
// tokens proposed, and proposals accepted (equal to the token the model sampled there).
struct SpeculationStats {
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // num_accepted_tokens / num_draft_tokens, 0 before any proposal.
  double acceptance_rate() const {
    return num_draft_tokens > 0 ? static_cast<double>(num_accepted_tokens) / static_cast<double>(num_draft_tokens) : 0;
  }
};

}  // namespace ditto
