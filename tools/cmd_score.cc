// `ditto score`: the log-probability the model gives each token of a sequence (teacher forcing),
// through the engine as prompt_logprobs.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "engine/llm_engine.h"
#include "model_options.h"

namespace ditto {
namespace {

struct ScoreOptions {
  ModelOptions model;
  std::vector<std::string> sequences;
  bool json = false;
  std::string logprobs_out;
};

// Tokens per engine step: bounds the logits a step holds to kMaxRowsPerStep · vocab floats however
// long the sequences are. Chunked prefill cannot change a bit, so this is purely a memory choice.
constexpr int64_t kMaxRowsPerStep = 256;

// The full row: every token's logprob in id order, from a SampledToken whose top_logprobs hold the
// whole vocabulary.
void scatter_row(const SampledToken& s, std::vector<float>& row) {
  DITTO_CHECK(s.top_logprobs.size() == row.size())
      << "a full-vocabulary logprob row has " << s.top_logprobs.size() << " entries, not " << row.size();
  for (const TokenLogprob& e : s.top_logprobs) row[static_cast<size_t>(e.token_id)] = e.logprob;
}

// Prints sequence `seq`'s scores (position p ≥ 1: token, logprob, the top token there) and, when
// `rows` is set, writes its full rows: one per token, row p the distribution after tokens 0..p.
void write_scores(size_t seq, const RequestOutput& out, bool json, std::ofstream* rows, std::vector<float>& row) {
  const std::vector<int32_t>& ids = out.prompt_token_ids;
  for (size_t p = 0; p < ids.size(); ++p) {
    if (rows != nullptr) {
      // prompt_logprobs[p + 1] is the distribution after token p; after the last token, the sampled token's.
      scatter_row(p + 1 < ids.size() ? *out.prompt_logprobs.at(p + 1) : out.outputs.at(0).logprobs.at(0), row);
      rows->write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * sizeof(float)));
    }
    if (p == 0) continue;  // the first token has no context
    const SampledToken& s = *out.prompt_logprobs.at(p);
    const TokenLogprob& top = s.top_logprobs.at(0);
    if (json) {
      const nlohmann::json j = {{"sequence", seq},
                                {"position", p},
                                {"token_id", ids[p]},
                                {"logprob", s.token.logprob},
                                {"top_token_id", top.token_id},
                                {"top_logprob", top.logprob}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("seq %zu pos %zu token %d logprob %.9g top %d %.9g\n", seq, p, ids[p], s.token.logprob, top.token_id,
                  top.logprob);
    }
  }
}

// Every sequence is a request through the engine's front door: its prompt_logprobs are the scores
// (the top one beside each), and one greedy token after it gives the last row's distribution
// (--logprobs-out). Sequences share engine steps as any requests do; each one's numbers are the
// bits it gets alone.
void run_score(const ScoreOptions& o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  std::vector<PromptInput> prompts;
  for (const std::string& text : o.sequences) {
    prompts.push_back(PromptInput{.token_ids = parse_token_ids(text, "--token-ids")});
    if (prompts.back().token_ids->size() < 2 && o.logprobs_out.empty())
      throw_invalid_argument("--token-ids: sequence " + std::to_string(prompts.size() - 1) +
                             " has one token; scoring needs at least two (the first has no context)");
  }
  EngineArgs args = o.model.engine;
  args.max_num_batched_tokens = kMaxRowsPerStep;
  LLMEngine llm(args);
  if (o.model.report_memory) report_load(llm.model_dir(), llm.model());
  const int64_t vocab = llm.model().config().vocab_size;
  // Checked here, as the front door would put it in terms of output ("leaves no room"): scoring
  // takes one position past the sequence (its request asks for the token after the last).
  const int64_t context = llm.model().config().max_position_embeddings;
  for (size_t i = 0; i < prompts.size(); ++i)
    if (const auto n = static_cast<int64_t>(prompts[i].token_ids->size()); n >= context)
      throw_invalid_argument("--token-ids: sequence " + std::to_string(i) + " has " + std::to_string(n) +
                             " tokens: scoring takes positions 0 to " + std::to_string(n) + " and position " +
                             std::to_string(context) + " is past the model's context (max_position_embeddings = " +
                             std::to_string(context) + "); give at most " + std::to_string(context - 1) + " tokens");
  const bool full_rows = !o.logprobs_out.empty();
  if (full_rows) {
    // Whole rows are vocab_size logprobs per token: one sequence at a time holds them.
    args.max_logprobs = vocab;
    args.max_num_seqs = 1;
    llm.set_engine_args(args);
  }
  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 1;
  params.ignore_eos = true;
  params.prompt_logprobs = full_rows ? vocab : 1;
  if (full_rows) params.logprobs = vocab;

  // Every sequence through the front door first: a bad one stops the run before any output.
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      requests.push_back(llm.input_processor().process(prompts[i], params, MaxTokensRule::kAsGiven));
    } catch (const Error& e) {
      throw Error(e.code(), "--token-ids: sequence " + std::to_string(i) + ": " + e.what(), e.param());
    }
    requests.back().request_id = std::to_string(i);
  }
  std::ofstream out_file;
  if (full_rows) {
    out_file.open(o.logprobs_out, std::ios::binary);
    if (!out_file)
      throw_invalid_argument("--logprobs-out: cannot open '" + o.logprobs_out + "': " + std::strerror(errno));
  }
  std::unique_ptr<Engine> engine = llm.make_engine();
  for (EngineRequest& r : requests) engine->add(std::move(r));
  // Outputs are written in sequence order as soon as every earlier one is: with one sequence at a
  // time (full rows), only the running one's rows are held.
  std::map<size_t, RequestOutput> finished;
  size_t next = 0;
  std::vector<float> row(static_cast<size_t>(vocab));
  while (engine->has_unfinished()) {
    for (RequestOutput& out : engine->step()) finished.emplace(std::stoul(out.request_id), std::move(out));
    for (auto it = finished.find(next); it != finished.end(); it = finished.find(++next)) {
      write_scores(next, it->second, o.json, full_rows ? &out_file : nullptr, row);
      finished.erase(it);
    }
  }
  if (out_file.is_open()) {
    out_file.close();  // close() reports errors a buffered write only meets at the end (e.g. a full disk)
    if (out_file.fail())
      throw_invalid_argument("--logprobs-out: cannot write '" + o.logprobs_out + "': " + std::strerror(errno));
  }
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto o = std::make_shared<ScoreOptions>();
  CLI::App* cmd = app.add_subcommand(
      "score",
      "Log-probabilities of each token of a sequence given the tokens before it. For every position p >= 1 "
      "prints token_id = ids[p], logprob = log P(ids[p] | ids[0..p-1]) and the most likely token there. "
      "Several --token-ids are scored together in batches; each one's numbers are bit-identical to "
      "scoring it alone.");
  add_model_options(cmd, o->model);
  cmd->add_option("--token-ids", o->sequences, "Sequence as comma-separated token ids; repeat for a batch")
      ->required()
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json", o->json,
                "One JSON object per position: sequence, position, token_id, logprob, top_token_id, top_logprob");
  cmd->add_option("--logprobs-out", o->logprobs_out,
                  "Also write every row's full log-softmax as raw little-endian float32 [total tokens, vocab_size] "
                  "(row i of a sequence: the distribution after its tokens 0..i). Holds one sequence's rows at a "
                  "time: tokens x vocab_size x 16 bytes");
  cmd->callback([o] { run_score(*o); });
}

}  // namespace ditto
