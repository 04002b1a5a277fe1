#include "engine/speculative.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/json_input.h"
#include "kernels/softmax.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

constexpr int64_t kMaxSpeculativeTokens = 32;
constexpr int64_t kMaxLookup = 1024;
constexpr int64_t kDefaultLookup = 5;  // vLLM's, when neither bound is given

[[noreturn]] void bad_config(const std::string& message) { throw_invalid_argument("speculative_config: " + message); }

}  // namespace

SpeculativeConfig checked_speculative_config(SpeculativeConfig c) {
  if (c.method.empty() && !c.model.empty()) c.method = "draft_model";
  if (c.method.empty()) {
    if (c.num_speculative_tokens != 0 || c.prompt_lookup_min != 0 || c.prompt_lookup_max != 0)
      bad_config("num_speculative_tokens and prompt_lookup_* need a method (\"ngram\") or a draft model (\"model\")");
    return c;
  }
  if (c.method != "ngram" && c.method != "draft_model")
    bad_config("method must be \"ngram\" or \"draft_model\", got \"" + c.method + "\"");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    bad_config("num_speculative_tokens must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "], got " +
               std::to_string(c.num_speculative_tokens));
  if (c.disable_by_batch_size < 0)
    bad_config("disable_by_batch_size must be at least 0 (0: never), got " + std::to_string(c.disable_by_batch_size));
  if (c.method == "draft_model") {
    if (c.model.empty()) bad_config("method \"draft_model\" needs \"model\" (the draft model's path)");
    if (c.prompt_lookup_min != 0 || c.prompt_lookup_max != 0)
      bad_config("prompt_lookup_min and prompt_lookup_max are for method \"ngram\", not a draft model");
    return c;
  }
  if (!c.model.empty()) bad_config("method \"ngram\" takes no \"model\"");
  if (c.prompt_lookup_min == 0 && c.prompt_lookup_max == 0) c.prompt_lookup_min = c.prompt_lookup_max = kDefaultLookup;
  if (c.prompt_lookup_min == 0) c.prompt_lookup_min = c.prompt_lookup_max;
  if (c.prompt_lookup_max == 0) c.prompt_lookup_max = c.prompt_lookup_min;
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max > kMaxLookup || c.prompt_lookup_min > c.prompt_lookup_max)
    bad_config("need 1 <= prompt_lookup_min <= prompt_lookup_max <= " + std::to_string(kMaxLookup) + ", got " +
               std::to_string(c.prompt_lookup_min) + " and " + std::to_string(c.prompt_lookup_max));
  return c;
}

namespace {

SpeculativeConfig read_speculative_config(const std::string& json) {
  const auto j = parse_json_input<nlohmann::ordered_json>(json, "speculative_config");
  if (!j.is_object()) bad_config("must be a JSON object, got " + json_excerpt(j));
  SpeculativeConfig c;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;  // vLLM's None: the default
    if (key == "method") {
      c.method = json_string(value, key);
    } else if (key == "model") {
      c.model = json_string(value, key);
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens = json_int(value, key, 1, kMaxSpeculativeTokens);
    } else if (key == "prompt_lookup_min") {
      c.prompt_lookup_min = json_int(value, key, 1, kMaxLookup);
    } else if (key == "prompt_lookup_max") {
      c.prompt_lookup_max = json_int(value, key, 1, kMaxLookup);
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = json_int(value, key, 0, kMaxJsonCount);
    } else {
      bad_config("unknown key '" + key +
                 "' (ditto knows method, model, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
                 "disable_by_batch_size)");
    }
  }
  if (!c.method.empty() || !c.model.empty()) {
    if (c.num_speculative_tokens == 0) bad_config("num_speculative_tokens is required");
  }
  return checked_speculative_config(c);
}

}  // namespace

SpeculativeConfig parse_speculative_config(const std::string& json) {
  if (json.empty()) return {};
  try {
    return read_speculative_config(json);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.starts_with("speculative_config")) throw;
    throw_invalid_argument("speculative_config: " + what);  // a field reader's "field 'KEY' must be ..."
  }
}

NgramProposer::NgramProposer(int64_t prompt_lookup_min, int64_t prompt_lookup_max)
    : min_n_(prompt_lookup_min), max_n_(prompt_lookup_max) {
  DITTO_CHECK(min_n_ >= 1 && min_n_ <= max_n_) << "prompt_lookup bounds " << min_n_ << ", " << max_n_;
}

std::vector<int32_t> NgramProposer::lookup(std::span<const int32_t> t, int64_t min_n, int64_t max_n,
                                           int64_t max_tokens) {
  // Only the latest kLookupWindow tokens are searched: a step's cost stays bounded on long
  // contexts (about 3 × 8192 comparisons per sequence when nothing recurs).
  if (t.size() > static_cast<size_t>(kLookupWindow)) t = t.subspan(t.size() - static_cast<size_t>(kLookupWindow));
  const auto size = static_cast<int64_t>(t.size());
  for (int64_t n = std::min(max_n, size - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = t.subspan(static_cast<size_t>(size - n));
    // Latest start i < size - n whose n tokens equal the suffix: what followed it is the guess.
    for (int64_t i = size - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), t.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t count = std::min(max_tokens, size - from);
      return {t.begin() + from, t.begin() + from + count};
    }
  }
  return {};
}

void NgramProposer::propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) {
  proposals.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i)
    proposals[i] = lookup(requests[i].seq->token_ids, min_n_, max_n_, requests[i].max_tokens);
}

DraftModelProposer::DraftModelProposer(const CausalLM& draft, int64_t num_blocks, int64_t block_size,
                                       int64_t max_num_batched_tokens)
    : draft_(draft),
      kv_(num_blocks, block_size, /*enable_prefix_caching=*/false),
      runner_(draft, num_blocks, block_size),
      max_num_batched_tokens_(std::max<int64_t>(1, max_num_batched_tokens)) {}

void DraftModelProposer::release(int64_t sequence_id) {
  computed_.erase(sequence_id);
  kv_.free(sequence_id);
}

bool DraftModelProposer::reserve(int64_t id, int64_t needed, std::span<const ProposalRequest> keep) {
  if (kv_.allocate(id, needed)) return true;
  std::vector<int64_t> idle;
  for (const auto& entry : computed_) {
    const int64_t other = entry.first;
    if (std::none_of(keep.begin(), keep.end(), [other](const ProposalRequest& r) { return r.seq->id == other; }))
      idle.push_back(other);
  }
  std::sort(idle.begin(), idle.end());  // deterministic order (the map's is not)
  for (int64_t other : idle) {
    release(other);
    if (kv_.allocate(id, needed)) return true;
  }
  return false;
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests,
                                 std::vector<std::vector<int32_t>>& proposals) {
  proposals.assign(requests.size(), {});
  const int64_t vocab = draft_.config().vocab_size;
  // Per sequence: the draft's cache holds computed_[id]; what it still has to run is the rest of
  // token_ids (at least the last token, whose logits give the first guess).
  struct Pending {
    size_t request;
    int64_t next;  // first position of token_ids not yet in the draft cache
  };
  std::vector<Pending> pending;
  // Guesses per request: as asked, within the draft's own context (its positions reach
  // size + guesses - 2; a draft may have a shorter context than the model).
  std::vector<int64_t> wanted(requests.size(), 0);
  const int64_t context = draft_.config().max_position_embeddings;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Sequence& seq = *requests[i].seq;
    const auto size = static_cast<int64_t>(seq.token_ids.size());
    wanted[i] = std::min(requests[i].max_tokens, context - size + 1);
    if (wanted[i] < 1) {  // past the draft's context: no guesses for it from now on
      release(seq.id);
      continue;
    }
    std::vector<int32_t>& have = computed_[seq.id];
    const auto common = static_cast<int64_t>(
        std::mismatch(have.begin(), have.end(), seq.token_ids.begin(), seq.token_ids.end()).first - have.begin());
    const int64_t next = std::min(common, size - 1);
    if (!reserve(seq.id, size + wanted[i] - 1, requests)) {
      release(seq.id);  // no room even alone: no guesses for it this step
      continue;
    }
    have.assign(seq.token_ids.begin(), seq.token_ids.begin() + next);
    pending.push_back({i, next});
  }
  // Catch up (chunks of at most max_num_batched_tokens per pass); the pass that runs a sequence's
  // last token gives its first guess.
  std::vector<Pending> guessing;
  while (!pending.empty()) {
    std::vector<SequenceStep> steps;
    std::vector<size_t> in_pass;
    int64_t budget = max_num_batched_tokens_;
    for (size_t p = 0; p < pending.size() && budget > 0; ++p) {
      const Sequence& seq = *requests[pending[p].request].seq;
      const auto size = static_cast<int64_t>(seq.token_ids.size());
      const int64_t n = std::min(size - pending[p].next, budget);
      steps.push_back({.token_ids = std::span<const int32_t>(seq.token_ids)
                                        .subspan(static_cast<size_t>(pending[p].next), static_cast<size_t>(n)),
                       .start_position = static_cast<int32_t>(pending[p].next),
                       .block_table = kv_.block_table(seq.id)});
      in_pass.push_back(p);
      budget -= n;
    }
    const std::vector<float> logits = runner_.step(steps).logits;
    std::vector<Pending> rest;
    for (size_t s = 0; s < in_pass.size(); ++s) {
      Pending& p = pending[in_pass[s]];
      const Sequence& seq = *requests[p.request].seq;
      p.next += static_cast<int64_t>(steps[s].token_ids.size());
      std::vector<int32_t>& have = computed_[seq.id];
      have.insert(have.end(), steps[s].token_ids.begin(), steps[s].token_ids.end());
      if (p.next < static_cast<int64_t>(seq.token_ids.size())) {
        rest.push_back(p);
        continue;
      }
      proposals[p.request].push_back(static_cast<int32_t>(argmax_row(logits.data() + s * vocab, vocab)));
      guessing.push_back(p);
    }
    for (size_t p = in_pass.size(); p < pending.size(); ++p) rest.push_back(pending[p]);
    pending = std::move(rest);
  }
  // Then one token per pass: each guess runs to give the next, until max_tokens guesses.
  while (true) {
    std::vector<SequenceStep> steps;
    std::vector<size_t> in_pass;
    for (const Pending& p : guessing) {
      std::vector<int32_t>& guess = proposals[p.request];
      if (static_cast<int64_t>(guess.size()) >= wanted[p.request]) continue;
      const Sequence& seq = *requests[p.request].seq;
      steps.push_back({.token_ids = std::span<const int32_t>(&guess.back(), 1),
                       .start_position = static_cast<int32_t>(seq.token_ids.size() + guess.size() - 1),
                       .block_table = kv_.block_table(seq.id)});
      in_pass.push_back(p.request);
    }
    if (steps.empty()) break;
    const std::vector<float> logits = runner_.step(steps).logits;
    for (size_t s = 0; s < in_pass.size(); ++s) {
      std::vector<int32_t>& guess = proposals[in_pass[s]];
      computed_[requests[in_pass[s]].seq->id].push_back(guess.back());
      guess.push_back(static_cast<int32_t>(argmax_row(logits.data() + s * vocab, vocab)));
    }
  }
}

std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config, const CausalLM* draft, int64_t num_kv_blocks,
                                        int64_t block_size, int64_t max_num_batched_tokens) {
  if (!config.enabled()) return nullptr;
  if (config.method == "ngram")
    return std::make_unique<NgramProposer>(config.prompt_lookup_min, config.prompt_lookup_max);
  if (draft == nullptr) throw_invalid_argument("speculative_config: method \"draft_model\" needs a loaded draft model");
  return std::make_unique<DraftModelProposer>(*draft, num_kv_blocks, block_size, max_num_batched_tokens);
}

int64_t guesses_to_ask(Sequence& seq, int64_t room, int64_t k) {
  if (seq.speculation_paused > 0) {
    --seq.speculation_paused;
    return 0;
  }
  if (seq.speculation_tokens == 0) seq.speculation_tokens = k;
  return std::max<int64_t>(0, std::min(seq.speculation_tokens, room));
}

void after_verification(Sequence& seq, int64_t num_proposals, int64_t accepted, int64_t k, Proposer& proposer) {
  constexpr int64_t kDraftJudgedAfter = 4;  // guesses
  // Guessing as far as the proposer has lately been right, when each guess costs a pass.
  if (!proposer.guesses_cost_a_pass()) {
    seq.speculation_tokens = k;
  } else if (accepted == num_proposals) {
    seq.speculation_tokens = std::min(k, 2 * std::max<int64_t>(seq.speculation_tokens, 1));
  } else {
    seq.speculation_tokens = std::min(k, accepted + 1);
  }
  seq.speculation_guessed += num_proposals;
  seq.speculation_kept += accepted;
  if (proposer.guesses_cost_a_pass() && seq.speculation_guessed >= kDraftJudgedAfter &&
      seq.speculation_kept * 5 < seq.speculation_guessed) {
    // A draft must read every token of the sequence to guess again, paused or not: one whose
    // guesses for this sequence are kept less than a fifth of the time stops for good, and gives
    // its cache back.
    seq.speculation_paused = std::numeric_limits<int64_t>::max();
    proposer.release(seq.id);
  } else if (accepted > 0) {
    seq.speculation_failures = 0;
  } else {
    seq.speculation_paused = int64_t{1} << std::min<int64_t>(seq.speculation_failures, 7);  // 1 .. 128 steps
    ++seq.speculation_failures;
  }
}

}  // namespace ditto
