// `ditto score`: the log-probability the model gives each token of a sequence (teacher forcing).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "kernels/softmax.h"
#include "model_options.h"

namespace ditto {
namespace {

struct ScoreOptions {
  ModelOptions model;
  std::vector<std::string> sequences;
  bool json = false;
  std::string logprobs_out;
};

// Rows of logits a step may hold: bounds memory to kMaxRowsPerStep · vocab floats however long
// the sequences are. Chunking the prompts this way cannot change a bit (chunked prefill is
// invariant), so this is purely a memory choice.
constexpr int64_t kMaxRowsPerStep = 256;

void run_score(const ScoreOptions& o) {
  LoadedModel lm = load_model(o.model);
  const CausalLM& model = *lm.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<int32_t>> seqs;
  int64_t num_blocks = 0;
  for (const std::string& text : o.sequences) {
    seqs.push_back(parse_token_ids(text, "--token-ids"));
    if (seqs.back().size() < 2 && o.logprobs_out.empty())
      throw_invalid_argument("--token-ids: sequence " + std::to_string(seqs.size() - 1) +
                             " has one token; scoring needs at least two (the first has no context)");
    num_blocks += (static_cast<int64_t>(seqs.back().size()) + o.model.block_size - 1) / o.model.block_size;
  }
  ModelRunner runner(model, num_blocks, o.model.block_size);
  BlockAllocator allocator(num_blocks);
  std::vector<std::vector<int32_t>> blocks;
  for (const auto& s : seqs)
    blocks.push_back(allocator.allocate_for_tokens(static_cast<int64_t>(s.size()), o.model.block_size));

  std::ofstream out_file;
  if (!o.logprobs_out.empty()) {
    out_file.open(o.logprobs_out, std::ios::binary);
    if (!out_file)
      throw_invalid_argument("--logprobs-out: cannot open '" + o.logprobs_out + "': " + std::strerror(errno));
  }
  struct Piece {
    size_t seq;
    size_t start;
  };
  size_t seq = 0, done = 0;  // next token to run: seqs[seq][done]
  std::vector<float> row(static_cast<size_t>(vocab));
  while (seq < seqs.size()) {
    std::vector<SequenceStep> steps;
    std::vector<Piece> pieces;
    for (int64_t budget = kMaxRowsPerStep; budget > 0 && seq < seqs.size();) {
      const size_t take = std::min<size_t>(static_cast<size_t>(budget), seqs[seq].size() - done);
      steps.push_back(SequenceStep{std::span<const int32_t>(seqs[seq]).subspan(done, take), static_cast<int32_t>(done),
                                   blocks[seq], true});
      pieces.push_back({seq, done});
      budget -= static_cast<int64_t>(take);
      done += take;
      if (done == seqs[seq].size()) {
        ++seq;
        done = 0;
      }
    }
    const std::vector<float> logits = runner.step(steps);
    const float* next_row = logits.data();
    for (size_t k = 0; k < steps.size(); ++k) {
      const std::vector<int32_t>& ids = seqs[pieces[k].seq];
      for (size_t i = 0; i < steps[k].token_ids.size(); ++i, next_row += vocab) {
        log_softmax_row(next_row, vocab, row.data());
        if (out_file.is_open())
          out_file.write(reinterpret_cast<const char*>(row.data()),
                         static_cast<std::streamsize>(row.size() * sizeof(float)));
        // Row at position q holds the distribution of the token at q + 1.
        const size_t p = pieces[k].start + i + 1;
        if (p >= ids.size()) continue;
        const int64_t top = argmax_row(row.data(), vocab);
        if (o.json) {
          const nlohmann::json j = {{"sequence", pieces[k].seq}, {"position", p},       {"token_id", ids[p]},
                                    {"logprob", row[ids[p]]},    {"top_token_id", top}, {"top_logprob", row[top]}};
          std::printf("%s\n", j.dump().c_str());
        } else {
          std::printf("seq %zu pos %zu token %d logprob %.9g top %lld %.9g\n", pieces[k].seq, p, ids[p], row[ids[p]],
                      static_cast<long long>(top), row[top]);
        }
      }
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
                  "(row i of a sequence: the distribution after its tokens 0..i)");
  cmd->callback([o] { run_score(*o); });
}

}  // namespace ditto
