#include "engine/pooling.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "kernels/math.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

using nlohmann::json;

// The JSON object an engine argument holds ("" or "null": none). Throws naming `param`.
json argument_object(const std::string& text, const std::string& param) {
  if (text.empty() || text == "null") return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw_invalid_field(param, param + " must be a JSON object, got: " + text);
  return j;
}

std::vector<int64_t> dimensions_list(const json& v, const std::string& where) {
  std::vector<int64_t> dims;
  if (v.is_null()) return dims;
  if (!v.is_array()) throw_invalid_field("matryoshka_dimensions", where + " must be a list of integers");
  for (const json& d : v) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1)
      throw_invalid_field("matryoshka_dimensions", where + " must hold positive integers, got " + d.dump());
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

// vLLM's hf_overrides keys that make a causal LM a reranker or an embedding model; any other key
// would change the config in ways ditto does not apply, so it is refused by name.
void apply_hf_overrides(const json& o, PoolerConfig& p, std::vector<std::string>& classifier_from_token,
                        bool& wants_score) {
  for (const auto& [key, value] : o.items()) {
    if (key == "architectures") {
      if (!value.is_array() || value.size() != 1 || !value[0].is_string())
        throw_invalid_field("hf_overrides", "hf_overrides.architectures must be a list of one name");
      const auto name = value[0].get<std::string>();
      if (name.size() >= 24 && name.ends_with("ForSequenceClassification")) {
        wants_score = true;
      } else if (!name.ends_with("ForCausalLM") && !name.ends_with("Model")) {
        throw_invalid_field("hf_overrides", "hf_overrides.architectures " + name +
                                                " is not one ditto runs as a pooling model (a *ForCausalLM, or "
                                                "*ForSequenceClassification with classifier_from_token)");
      }
    } else if (key == "classifier_from_token") {
      if (!value.is_array() || value.size() != 2 || !value[0].is_string() || !value[1].is_string())
        throw_invalid_field("hf_overrides",
                            "hf_overrides.classifier_from_token must be two tokens [false, true], e.g. [\"no\", "
                            "\"yes\"] (ditto scores one yes/no pair)");
      classifier_from_token = {value[0].get<std::string>(), value[1].get<std::string>()};
      wants_score = true;
    } else if (key == "is_original_qwen3_reranker") {
      if (!value.is_boolean())
        throw_invalid_field("hf_overrides", "hf_overrides.is_original_qwen3_reranker must be a boolean");
      wants_score = wants_score || value.get<bool>();
    } else if (key == "matryoshka_dimensions") {
      p.matryoshka_dimensions = dimensions_list(value, "hf_overrides.matryoshka_dimensions");
    } else if (key == "is_matryoshka") {
      if (!value.is_boolean()) throw_invalid_field("hf_overrides", "hf_overrides.is_matryoshka must be a boolean");
    } else {
      throw_invalid_field("hf_overrides",
                          "hf_overrides." + key +
                              " is not supported: ditto reads the model's config as it is, and takes only the "
                              "pooling keys architectures, classifier_from_token, is_original_qwen3_reranker, "
                              "is_matryoshka and matryoshka_dimensions");
    }
  }
}

void apply_pooler_config(const json& o, PoolerConfig& p, bool& type_given, bool& normalize_given) {
  for (const auto& [key, value] : o.items()) {
    if (key == "pooling_type") {
      if (!value.is_string()) throw_invalid_field("pooler_config", "pooler_config.pooling_type must be a string");
      p.pooling_type = parse_pooling_type(value.get<std::string>());
      type_given = true;
    } else if (key == "normalize" || key == "use_activation" || key == "activation") {
      if (!value.is_boolean()) throw_invalid_field("pooler_config", "pooler_config." + key + " must be a boolean");
      p.normalize = p.use_activation = value.get<bool>();
      normalize_given = true;
    } else if (key == "enable_chunked_processing") {
      // ditto always prefills in chunks, which changes no bit; nothing to switch.
    } else {
      throw_invalid_field("pooler_config", "pooler_config." + key +
                                               " is not supported (ditto takes pooling_type, normalize, "
                                               "use_activation and enable_chunked_processing)");
    }
  }
}

}  // namespace

const char* const kQwen3RerankerTemplate =
    "{%- set instruction = instruction if instruction is defined else "
    "'Given a web search query, retrieve relevant passages that answer the query' -%}"
    "{{- '<|im_start|>system\\nJudge whether the Document meets the requirements based on the Query and the "
    "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\\n<|im_start|>user\\n' -}}"
    "{{- '<Instruct>: ' + instruction + '\\n<Query>: ' + messages[0]['content'] + '\\n<Document>: ' + "
    "messages[1]['content'] -}}"
    "{{- '<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' -}}";

const char* pooling_task_name(PoolingTask task) { return task == PoolingTask::kEmbed ? "embed" : "score"; }

PoolerConfig resolve_pooler_config(const EngineArgs& args, const std::string& model_path, const ModelConfig& config,
                                   const Tokenizer* tokenizer) {
  PoolerConfig p;
  p.hidden_size = config.hidden_size;
  const std::string& runner = args.runner;
  const std::string& task = args.task;
  if (runner != "auto" && runner != "generate" && runner != "pooling")
    throw_invalid_field("runner", "runner must be auto, generate or pooling, got '" + runner + "'");
  if (task != "auto" && task != "generate" && task != "embed" && task != "embedding" && task != "score")
    throw_invalid_field("task", "task must be auto, generate, embed or score, got '" + task +
                                    "' (classify and reward need a classifier head ditto does not run)");
  const bool task_pools = task == "embed" || task == "embedding" || task == "score";
  if ((runner == "generate" && task_pools) || (runner == "pooling" && task == "generate"))
    throw_invalid_field("task", "task " + task + " contradicts runner " + runner);

  std::vector<std::string> classifier_from_token;
  bool wants_score = task == "score";
  apply_hf_overrides(argument_object(args.hf_overrides, "hf_overrides"), p, classifier_from_token, wants_score);
  bool type_given = false;
  bool normalize_given = false;
  apply_pooler_config(argument_object(args.pooler_config, "pooler_config"), p, type_given, normalize_given);

  // A generation model never reads its pooling files (a module ditto refuses must not stop it).
  const bool generate_only = runner == "generate" || task == "generate";
  const std::optional<PoolingFiles> files = generate_only ? std::nullopt : read_pooling_files(model_path);
  if (files && files->rank)
    throw_invalid_field("runner", files->source +
                                      " is 4 (RANK): a reranker with a classifier head, which ditto does not run; "
                                      "load the causal LM reranker (e.g. Qwen3-Reranker) with --task score instead");
  if (std::filesystem::is_directory(model_path)) {
    if (const std::optional<json> c = read_json_file_if_present(model_path + "/config.json");
        c && c->contains("matryoshka_dimensions") && p.matryoshka_dimensions.empty())
      p.matryoshka_dimensions = dimensions_list((*c)["matryoshka_dimensions"], model_path + "/config.json");
  }
  for (int64_t d : p.matryoshka_dimensions)
    if (d > p.hidden_size)
      throw_invalid_field("matryoshka_dimensions", "matryoshka_dimensions holds " + std::to_string(d) +
                                                       ", above hidden_size " + std::to_string(p.hidden_size));

  if (generate_only) return p;
  p.pooling = runner == "pooling" || task_pools || wants_score || files.has_value();
  if (!p.pooling) return p;
  p.task = wants_score ? PoolingTask::kScore : PoolingTask::kEmbed;
  if (wants_score && (task == "embed" || task == "embedding"))
    throw_invalid_field("task", "task embed contradicts hf_overrides, which make the model a reranker (score)");
  if (p.task == PoolingTask::kEmbed) {
    if (files && !type_given) p.pooling_type = files->pooling_type;
    // A GGUF file has no key for the Normalize module: normalized, as llama.cpp's and vLLM's
    // embeddings are by default.
    if (files && !normalize_given && !model_path.ends_with(".gguf")) p.normalize = files->normalize;
    p.source = files ? files->source : (runner == "pooling" ? "--runner pooling" : "--task " + task);
    return p;
  }
  if (type_given && p.pooling_type != PoolingType::kLast)
    throw_invalid_field("pooler_config", "a reranker scores the last token: pooler_config.pooling_type must be LAST");
  p.pooling_type = PoolingType::kLast;
  if (classifier_from_token.empty()) classifier_from_token = {"no", "yes"};
  if (tokenizer == nullptr)
    throw_invalid_field("task", "a reranker needs the model's tokenizer to find its tokens " +
                                    classifier_from_token[0] + " and " + classifier_from_token[1]);
  const std::optional<int32_t> no = tokenizer->token_to_id(classifier_from_token[0]);
  const std::optional<int32_t> yes = tokenizer->token_to_id(classifier_from_token[1]);
  if (!no || !yes || *no >= config.vocab_size || *yes >= config.vocab_size)
    throw_invalid_field("hf_overrides", "classifier_from_token: the vocabulary has no token '" +
                                            classifier_from_token[!no ? 0 : 1] + "'");
  p.score_false_id = *no;
  p.score_true_id = *yes;
  // vLLM renders a reranker's pairs with --chat-template; ditto also, else with Qwen3-Reranker's prompt.
  p.score_template = args.chat_template.empty()                             ? std::string(kQwen3RerankerTemplate)
                     : std::filesystem::is_regular_file(args.chat_template) ? read_text_file(args.chat_template)
                                                                            : args.chat_template;
  p.source = wants_score && task != "score" ? "hf_overrides" : "--task score";
  return p;
}

PromptInput score_pair_prompt(const PoolerConfig& config, const std::string& text_1, const std::string& text_2,
                              const std::string& chat_template_kwargs) {
  PromptInput p;
  p.messages =
      json::array({{{"role", "query"}, {"content", text_1}}, {{"role", "document"}, {"content", text_2}}}).dump();
  p.chat_template = config.score_template;
  p.chat_template_kwargs = chat_template_kwargs;
  p.add_generation_prompt = false;
  return p;
}

ScorePlan plan_scores(const PoolerConfig& config, const std::vector<std::string>& text_1,
                      const std::vector<std::string>& text_2, const std::string& chat_template_kwargs) {
  DITTO_CHECK(text_1.size() == 1 || text_1.size() == text_2.size()) << "score: text_1 is one text or one per text_2";
  const auto first = [&](size_t i) -> const std::string& { return text_1[text_1.size() == 1 ? 0 : i]; };
  ScorePlan plan;
  if (config.pooling && config.task == PoolingTask::kScore) {
    plan.task = "score";
    for (size_t i = 0; i < text_2.size(); ++i) {
      plan.prompts.push_back(score_pair_prompt(config, first(i), text_2[i], chat_template_kwargs));
      plan.pairs.emplace_back(i, i);
    }
    return plan;
  }
  plan.task = "embed";
  std::map<std::string, size_t> row;  // text → its prompt
  const auto prompt_of = [&](const std::string& text) {
    const auto [it, added] = row.emplace(text, plan.prompts.size());
    if (added) plan.prompts.push_back(PromptInput{.text = text});
    return it->second;
  };
  for (const std::string& t : text_1) prompt_of(t);
  for (size_t i = 0; i < text_2.size(); ++i) {
    const size_t b = prompt_of(text_2[i]);
    plan.pairs.emplace_back(row.at(first(i)), b);
  }
  return plan;
}

float ScorePlan::score(std::span<const float> first, std::span<const float> second) const {
  if (task == "score") {
    DITTO_CHECK(!first.empty()) << "a reranker's pooled result is [score]";
    return first[0];
  }
  return cosine_similarity(first, second);
}

PoolingSpec resolve_pooling_spec(const PoolingParams& params, const PoolerConfig& config) {
  if (!config.pooling)
    throw_invalid_field("model",
                        "this model runs generation: start it with --runner pooling (or --task embed / "
                        "--task score) for embeddings and scores");
  PoolingSpec s;
  s.task = config.task;
  if (!params.task.empty()) {
    if (params.task == "embed" || params.task == "embedding") {
      s.task = PoolingTask::kEmbed;
    } else if (params.task == "score" || params.task == "classify") {
      s.task = PoolingTask::kScore;
    } else {
      throw_invalid_field("task", "task must be embed or score, got '" + params.task + "'");
    }
    if (s.task != config.task)
      throw_invalid_field("task", std::string("this model's pooling task is ") + pooling_task_name(config.task) +
                                      ", not " + pooling_task_name(s.task));
  }
  if (params.normalize && params.use_activation && *params.normalize != *params.use_activation)
    throw_invalid_field("normalize", "normalize and use_activation disagree (they are one switch)");
  const std::optional<bool> activation = params.use_activation ? params.use_activation : params.normalize;
  s.pooling_type = config.pooling_type;
  if (s.task == PoolingTask::kScore) {
    if (params.dimensions) throw_invalid_field("dimensions", "dimensions apply to embeddings, not to scores");
    s.activation = activation.value_or(config.use_activation);
    s.false_id = config.score_false_id;
    s.true_id = config.score_true_id;
    return s;
  }
  s.activation = activation.value_or(config.normalize);
  s.dimensions = config.hidden_size;
  if (params.dimensions) {
    const int64_t d = *params.dimensions;
    const std::vector<int64_t>& allowed = config.matryoshka_dimensions;
    if (d < 1 || d > config.hidden_size)
      throw_invalid_field("dimensions", "dimensions must be in [1, " + std::to_string(config.hidden_size) +
                                            "] (the model's hidden_size), got " + std::to_string(d));
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), d) == allowed.end()) {
      std::string list;
      for (int64_t a : allowed) list += (list.empty() ? "" : ", ") + std::to_string(a);
      throw_invalid_field("dimensions", "dimensions " + std::to_string(d) +
                                            " is not one of the model's matryoshka_dimensions (" + list + ")");
    }
    s.dimensions = d;
  }
  return s;
}

void accumulate_rows(std::span<const float> rows, int64_t hidden_size, std::vector<double>& sum) {
  sum.resize(static_cast<size_t>(hidden_size), 0.0);
  for (size_t r = 0; r + static_cast<size_t>(hidden_size) <= rows.size(); r += static_cast<size_t>(hidden_size))
    for (size_t i = 0; i < static_cast<size_t>(hidden_size); ++i) sum[i] += static_cast<double>(rows[r + i]);
}

std::vector<float> mean_of(const std::vector<double>& sum, int64_t count) {
  std::vector<float> mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(count));
  return mean;
}

std::vector<float> finish_embedding(std::span<const float> pooled, int64_t dimensions, bool normalize) {
  DITTO_CHECK(dimensions >= 1 && static_cast<size_t>(dimensions) <= pooled.size());
  std::vector<float> out(pooled.begin(), pooled.begin() + dimensions);
  if (!normalize) return out;
  double squares = 0.0;
  for (float v : out) squares += static_cast<double>(v) * static_cast<double>(v);
  const double norm = std::max(std::sqrt(squares), 1e-12);
  for (float& v : out) v = static_cast<float>(static_cast<double>(v) / norm);
  return out;
}

float yes_no_score(std::span<const float> logits, int32_t true_id, int32_t false_id, bool activation) {
  DITTO_CHECK(true_id >= 0 && false_id >= 0 && static_cast<size_t>(std::max(true_id, false_id)) < logits.size());
  const float yes = logits[static_cast<size_t>(true_id)];
  const float no = logits[static_cast<size_t>(false_id)];
  if (!activation) return yes - no;
  return 1.0f / (1.0f + exp_f32(no - yes));
}

float cosine_similarity(std::span<const float> a, std::span<const float> b) {
  DITTO_CHECK(a.size() == b.size());
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    aa += static_cast<double>(a[i]) * static_cast<double>(a[i]);
    bb += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return static_cast<float>(dot / std::max(std::sqrt(aa) * std::sqrt(bb), 1e-8));
}

}  // namespace ditto
