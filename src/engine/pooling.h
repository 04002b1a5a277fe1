// Pooling: what a model's embeddings and scores are, and the arithmetic that makes them from the
// forward pass's rows. vLLM's pooling runner in ditto's terms (docs/POOLING.md):
//
//   task "embed": the final-normed hidden state (Hugging Face's last_hidden_state) of the last,
//     first or every prompt token (LAST / CLS / MEAN pooling), cut to `dimensions` (Matryoshka),
//     then divided by its L2 norm when `normalize`.
//   task "score": a causal LM reranker (Qwen3-Reranker; vLLM's classifier_from_token with
//     is_original_qwen3_reranker): the last prompt token's next-token logits, sigmoid(logit(yes) −
//     logit(no)) (vLLM's use_activation) or the difference itself.
//
// Every function here is a pure function of its own row(s), computed in a fixed order on every
// ISA and thread count (sums in double in ascending index order; the sigmoid through ditto's own
// exp, kernels/math.h), so a pooled result is the same bits whatever batch its rows came from.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "architecture/config.h"
#include "checkpoint/pooling_files.h"
#include "ditto/engine_args.h"
#include "ditto/pooling.h"
#include "ditto/prompt_input.h"

namespace ditto {

class Tokenizer;

enum class PoolingTask { kEmbed, kScore };

// "embed", "score".
const char* pooling_task_name(PoolingTask task);

// The model's pooling, resolved once at load (resolve_pooler_config).
struct PoolerConfig {
  bool pooling = false;                    // --runner pooling (given, or the checkpoint's files say so)
  PoolingTask task = PoolingTask::kEmbed;  // meaningful when `pooling`
  PoolingType pooling_type = PoolingType::kLast;
  bool normalize = true;        // embed: the default of PoolingParams::normalize
  bool use_activation = true;   // score: the default of PoolingParams::use_activation
  int32_t score_false_id = -1;  // score: classifier_from_token's ids, ("no", "yes") by default
  int32_t score_true_id = -1;
  int64_t hidden_size = 0;
  // Matryoshka: the dimensions a request may ask for (config.json / hf_overrides
  // matryoshka_dimensions); empty: any in [1, hidden_size].
  std::vector<int64_t> matryoshka_dimensions;
  // score: the Jinja template a (query, document) pair is rendered with: messages [{"role":
  // "query", ...}, {"role": "document", ...}] (vLLM's score template, --chat-template), by default
  // Qwen3-Reranker's prompt (kQwen3RerankerTemplate). chat_template_kwargs "instruction" replaces
  // its default instruction.
  std::string score_template;
  std::string source;  // what decided it ("modules.json", "--runner pooling", ...), for messages
};

// Qwen3-Reranker's prompt as a score template (its model card's format_instruction, prefix and
// suffix): the system line, "<Instruct>: …\n<Query>: …\n<Document>: …", then an assistant turn
// with an empty think block.
extern const char* const kQwen3RerankerTemplate;

// The model's pooling from the engine arguments (runner, task, hf_overrides, pooler_config,
// chat_template) and the checkpoint (checkpoint/pooling_files.h, config.json's
// matryoshka_dimensions). `tokenizer` may be null (then a score model is refused: its tokens are
// looked up by name). Throws Error(kInvalidArgument, param = the argument at fault) for an unknown
// runner or task, a runner and task that contradict each other, an hf_overrides or pooler_config
// key ditto does not implement (named), classifier_from_token words the vocabulary lacks, a GGUF
// file with llama.cpp's RANK pooling (a classifier head ditto does not run).
PoolerConfig resolve_pooler_config(const EngineArgs& args, const std::string& model_path, const ModelConfig& config,
                                   const Tokenizer* tokenizer);

// A reranker's (query, document) pair as the prompt the front door renders: messages
// [{"role": "query", "content": text_1}, {"role": "document", "content": text_2}] with the model's
// score template and `chat_template_kwargs` (JSON object text, "" for none), no generation prompt.
// Every front end (LLM::score, the server's /score and /rerank) builds its pairs here.
PromptInput score_pair_prompt(const PoolerConfig& config, const std::string& text_1, const std::string& text_2,
                              const std::string& chat_template_kwargs = "");

// How pairs (text_1[i], or text_1[0] for every i, against text_2[i]) are scored, as every front end
// (LLM::score, the server's /score and /rerank) scores them. On a reranker (task score) each pair
// is one prompt (score_pair_prompt) whose pooled [score] is the pair's; on any other model each
// distinct text is one embedding prompt, and a pair's score is the cosine of its two embeddings.
struct ScorePlan {
  std::string task;                  // what each prompt runs as: "score" or "embed"
  std::vector<PromptInput> prompts;  // what to pool
  // Per pair, the prompts whose pooled results make its score (a reranker's pair i: {i, i}).
  std::vector<std::pair<size_t, size_t>> pairs;
  // The score of a pair from its two prompts' pooled results (score: [1] f32; embed: two embeddings).
  float score(std::span<const float> first, std::span<const float> second) const;
};

// text_1 must hold one text or text_2.size() texts (checked, as an internal invariant: the front
// ends name their own fields when it does not).
ScorePlan plan_scores(const PoolerConfig& config, const std::vector<std::string>& text_1,
                      const std::vector<std::string>& text_2, const std::string& chat_template_kwargs = "");

// What one request computes, resolved by the front door (InputProcessor::process_pooling).
struct PoolingSpec {
  PoolingTask task = PoolingTask::kEmbed;
  PoolingType pooling_type = PoolingType::kLast;
  int64_t dimensions = 0;  // embed: the leading values kept
  bool activation = true;  // embed: L2-normalize; score: sigmoid
  int32_t false_id = -1;   // score
  int32_t true_id = -1;
  bool needs_every_row() const { return pooling_type != PoolingType::kLast; }  // no prefix-cache hits
};

// `params` against `config`: the task (the model's when empty), dimensions, normalize /
// use_activation (which must agree when both are set). Throws Error(kInvalidArgument, param =
// "task" / "dimensions" / "normalize") naming the value and the bound.
PoolingSpec resolve_pooling_spec(const PoolingParams& params, const PoolerConfig& config);

// Sums rows into `sum` ([hidden_size] f64, in the rows' order: call it in position order), for MEAN.
void accumulate_rows(std::span<const float> rows, int64_t hidden_size, std::vector<double>& sum);

// The embedding of a pooled row `pooled` [hidden_size] f32: its first `dimensions` values, divided
// by max(‖·‖₂, 1e-12) when `normalize` (torch.nn.functional.normalize's eps), the norm summed in
// double in ascending index order. Returns [dimensions] f32.
std::vector<float> finish_embedding(std::span<const float> pooled, int64_t dimensions, bool normalize);

// The mean of `count` rows summed by accumulate_rows, rounded to f32: [hidden_size].
std::vector<float> mean_of(const std::vector<double>& sum, int64_t count);

// score: sigmoid(logits[true_id] − logits[false_id]) = 1 / (1 + exp(logit(no) − logit(yes))) with
// ditto's exp_f32 — which is softmax over (no, yes) taken at yes — or the difference itself
// without `activation`. `logits`: [vocab_size] f32.
float yes_no_score(std::span<const float> logits, int32_t true_id, int32_t false_id, bool activation);

// cos(a, b) = a·b / max(‖a‖·‖b‖, 1e-8) (torch.nn.functional.cosine_similarity's eps), each sum in
// double in ascending index order; the score of an embedding model's pair. Sizes must match.
float cosine_similarity(std::span<const float> a, std::span<const float> b);

}  // namespace ditto
