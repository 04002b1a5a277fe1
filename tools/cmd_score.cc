// `ditto score`: the log-probability the model gives each token of a sequence (teacher forcing).
#include <cstdio>
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

void run_score(const ScoreOptions& o) {
  LoadedModel lm = load_model(o.model);
  const CausalLM& model = *lm.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<int32_t>> seqs;
  int64_t num_blocks = 0;
  for (const std::string& text : o.sequences) {
    seqs.push_back(parse_token_ids(text, "--token-ids"));
    num_blocks += (static_cast<int64_t>(seqs.back().size()) + o.model.block_size - 1) / o.model.block_size;
  }
  ModelRunner runner(model, num_blocks, o.model.block_size);
  BlockAllocator allocator(num_blocks);
  std::vector<std::vector<int32_t>> blocks;
  std::vector<SequenceStep> steps;
  for (const auto& s : seqs) blocks.push_back(allocator.allocate_for_tokens(static_cast<int64_t>(s.size()), o.model.block_size));
  for (size_t i = 0; i < seqs.size(); ++i) steps.push_back(SequenceStep{seqs[i], 0, blocks[i], true});

  // All sequences in one flat batch; log-softmax of every row in place.
  std::vector<float> logprobs = runner.step(steps);
  const int64_t rows = static_cast<int64_t>(logprobs.size()) / vocab;
  for (int64_t r = 0; r < rows; ++r) log_softmax_row(logprobs.data() + r * vocab, vocab, logprobs.data() + r * vocab);

  if (!o.logprobs_out.empty()) {
    std::ofstream f(o.logprobs_out, std::ios::binary);
    f.write(reinterpret_cast<const char*>(logprobs.data()), static_cast<std::streamsize>(logprobs.size() * sizeof(float)));
    if (!f) throw_invalid_argument("--logprobs-out: cannot write '" + o.logprobs_out + "'");
  }
  int64_t row = 0;
  for (size_t si = 0; si < seqs.size(); ++si, ++row) {
    const std::vector<int32_t>& ids = seqs[si];
    for (size_t p = 1; p < ids.size(); ++p, ++row) {
      const float* lp = logprobs.data() + row * vocab;
      const int64_t top = argmax_row(lp, vocab);
      if (o.json) {
        const nlohmann::json j = {{"sequence", si},        {"position", p},       {"token_id", ids[p]},
                                  {"logprob", lp[ids[p]]}, {"top_token_id", top}, {"top_logprob", lp[top]}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("seq %zu pos %zu token %d logprob %.9g top %lld %.9g\n", si, p, ids[p], lp[ids[p]],
                    static_cast<long long>(top), lp[top]);
      }
    }
  }
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto o = std::make_shared<ScoreOptions>();
  CLI::App* cmd = app.add_subcommand(
      "score",
      "Log-probabilities of each token of a sequence given the tokens before it. For every position p >= 1 "
      "prints token_id = ids[p], logprob = log P(ids[p] | ids[0..p-1]) and the most likely token there. "
      "Several --token-ids are scored together in one batch; each one's numbers are bit-identical to "
      "scoring it alone.");
  add_model_options(cmd, o->model);
  cmd->add_option("--token-ids", o->sequences, "Sequence as comma-separated token ids; repeat for a batch")->required();
  cmd->add_flag("--json", o->json,
                "One JSON object per position: sequence, position, token_id, logprob, top_token_id, top_logprob");
  cmd->add_option("--logprobs-out", o->logprobs_out,
                  "Also write every row's full log-softmax as raw little-endian float32 [total tokens, vocab_size] "
                  "(row i of a sequence: the distribution after its tokens 0..i)");
  cmd->callback([o] { run_score(*o); });
}

}  // namespace ditto
