// `ditto score`: the log-probability the model gives each token of a sequence (teacher forcing),
// through the engine as prompt_logprobs.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "ditto/llm.h"
#include "model_options.h"

namespace ditto {
namespace {

struct ScoreCommandOptions {
  ModelOptions model;
  std::vector<std::string> sequences;
  bool json = false;
  std::string logprobs_out;
};

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

// Every sequence is scored by LLM::score (teacher forcing through the engine's front door): the
// scores with the top token beside each, and with --logprobs-out every row, the last one the
// distribution after the sequence. Sequences share engine steps as any requests do; each one's
// numbers are the bits it gets alone.
void run_score(const ScoreCommandOptions& o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  std::vector<std::vector<int32_t>> sequences;
  for (const std::string& text : o.sequences) sequences.push_back(parse_token_ids(text, "--token-ids"));
  LLM llm(o.model.engine);
  if (o.model.report_memory) report_load(llm.model_info());
  const bool full_rows = !o.logprobs_out.empty();
  std::ofstream out_file;
  auto open_rows = [&] {
    out_file.open(o.logprobs_out, std::ios::binary);
    if (!out_file)
      throw_invalid_argument("--logprobs-out: cannot open '" + o.logprobs_out + "': " + std::strerror(errno));
  };
  std::vector<float> row(full_rows ? static_cast<size_t>(llm.model_info().vocab_size) : 0);
  try {
    llm.score(sequences, ScoreOptions{.top_logprobs = full_rows ? -1 : 1, .next_token = full_rows},
              [&](size_t i, RequestOutput&& out) {
                if (full_rows && !out_file.is_open()) open_rows();  // only once every sequence passed the door
                write_scores(i, out, o.json, full_rows ? &out_file : nullptr, row);
              });
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--token-ids: ") + e.what(), e.param());
  }
  if (full_rows && !out_file.is_open()) open_rows();  // no sequences: an empty file
  if (out_file.is_open()) {
    out_file.close();  // close() reports errors a buffered write only meets at the end (e.g. a full disk)
    if (out_file.fail())
      throw_invalid_argument("--logprobs-out: cannot write '" + o.logprobs_out + "': " + std::strerror(errno));
  }
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto o = std::make_shared<ScoreCommandOptions>();
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
