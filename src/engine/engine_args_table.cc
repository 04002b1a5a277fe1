#include "engine/engine_args_table.h"

#include <charconv>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/memory_info.h"
#include "core/thread_pool.h"
#include "engine/speculative.h"

namespace ditto {
namespace {

using nlohmann::json;

template <auto Member>
void assign_member(EngineArgs& args, const json& value) {
  using T = std::remove_reference_t<decltype(args.*Member)>;
  args.*Member = value.get<T>();
}

template <auto Member>
std::string show_member(const EngineArgs& args) {
  const auto& v = args.*Member;
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, bool>) {
    return v ? "true" : "false";
  } else {
    return std::to_string(v);
  }
}

// A JSON-object knob kept as its text (hf_overrides, pooler_config; checked when the model loads).
template <auto Member>
void assign_json_text(EngineArgs& args, const json& value) {
  args.*Member = value.is_null() ? "" : value.dump();
}

void assign_speculative_config(EngineArgs& args, const json& value) {
  args.speculative_config = parse_speculative_config(value.dump());
}

std::string show_speculative_config(const EngineArgs& /*args*/) { return ""; }

// "2GiB", "512MiB" or a number of bytes: what parse_size_bytes reads back.
std::string show_bytes(const EngineArgs& args) {
  const int64_t b = args.kv_cache_memory;
  if (b % (int64_t{1} << 30) == 0) return std::to_string(b >> 30) + "GiB";
  if (b % (int64_t{1} << 20) == 0) return std::to_string(b >> 20) + "MiB";
  return std::to_string(b);
}

constexpr int64_t kTokens = int64_t{1} << 24;

void assign_logprobs_mode(EngineArgs& args, const json& value) {
  args.logprobs_mode = parse_logprobs_mode(value.get<std::string>());
}

std::string show_logprobs_mode(const EngineArgs& args) { return logprobs_mode_name(args.logprobs_mode); }

constexpr std::pair<LogprobsMode, const char*> kLogprobsModes[] = {
    {LogprobsMode::kRawLogprobs, "raw_logprobs"},
    {LogprobsMode::kRawLogits, "raw_logits"},
    {LogprobsMode::kProcessedLogprobs, "processed_logprobs"},
    {LogprobsMode::kProcessedLogits, "processed_logits"},
};

}  // namespace

const char* logprobs_mode_name(LogprobsMode mode) {
  for (const auto& [m, name] : kLogprobsModes)
    if (m == mode) return name;
  return "raw_logprobs";
}

LogprobsMode parse_logprobs_mode(const std::string& name) {
  for (const auto& [m, n] : kLogprobsModes)
    if (name == n) return m;
  throw_invalid_field("logprobs_mode",
                      "logprobs_mode must be raw_logprobs, raw_logits, processed_logprobs or "
                      "processed_logits, got '" +
                          name + "'");
}

const std::vector<EngineArgField>& engine_arg_fields() {
  using K = EngineArgKind;
  static const std::vector<EngineArgField> kFields = {
      {"threads", "--threads",
       "Compute threads; 0 (the default): $DITTO_NUM_THREADS or all cores. Outputs are bit-identical for any value",
       K::kInteger, 0, ThreadPool::kMaxThreads, true, true, true, assign_member<&EngineArgs::threads>,
       show_member<&EngineArgs::threads>},
      {"tensor_parallel_size", "--tensor-parallel-size,--tp",
       "Split the model over N processes launched with `mpirun -np N` (one rank each, any hosts); outputs are "
       "bit-identical for every N",
       K::kInteger, 1, 4096, true, true, false, assign_member<&EngineArgs::tensor_parallel_size>,
       show_member<&EngineArgs::tensor_parallel_size>},
      {"block_size", "--block-size", "KV cache block size in tokens", K::kInteger, 1, 4096, true, true, false,
       assign_member<&EngineArgs::block_size>, show_member<&EngineArgs::block_size>},
      {"kv_cache_memory", "--kv-cache-memory", "KV cache size, e.g. 2GiB or 512MB", K::kBytes, 0, 0, true, true, false,
       assign_member<&EngineArgs::kv_cache_memory>, show_bytes},
      {"max_num_batched_tokens", "--max-num-batched-tokens", "Tokens per engine step", K::kInteger, 1, kTokens, true,
       true, false, assign_member<&EngineArgs::max_num_batched_tokens>,
       show_member<&EngineArgs::max_num_batched_tokens>},
      {"long_prefill_token_threshold", "--long-prefill-token-threshold",
       "Most prompt tokens one request prefills in a step shared with others, so no request waits behind a long "
       "prompt (vLLM's); 0: a quarter of --max-num-batched-tokens",
       K::kInteger, 0, kTokens, true, true, false, assign_member<&EngineArgs::long_prefill_token_threshold>,
       show_member<&EngineArgs::long_prefill_token_threshold>},
      {"max_num_seqs", "--max-num-seqs", "Sequences running at once", K::kInteger, 1, int64_t{1} << 20, true, true,
       false, assign_member<&EngineArgs::max_num_seqs>, show_member<&EngineArgs::max_num_seqs>},
      {"max_model_len", "--max-model-len",
       "Context length in tokens (prompt + output) every request must fit; also caps a chat's default max_tokens "
       "(default: the model's max_position_embeddings)",
       K::kInteger, 1, int64_t{1} << 40, true, false, true, assign_member<&EngineArgs::max_model_len>,
       show_member<&EngineArgs::max_model_len>},
      {"max_logprobs", "--max-logprobs", "The most logprobs (and prompt_logprobs) a request may ask for (vLLM's)",
       K::kInteger, 0, int64_t{1} << 20, true, true, false, assign_member<&EngineArgs::max_logprobs>,
       show_member<&EngineArgs::max_logprobs>},
      {"logprobs_mode", "--logprobs-mode",
       "What logprobs report (vLLM's): raw_logprobs (the model's), raw_logits, processed_logprobs or "
       "processed_logits (what the sampler drew from: after logit_bias, penalties, temperature, top_k, top_p, "
       "min_p; docs/NUMERICS.md)",
       K::kString, 0, 0, true, true, false, assign_logprobs_mode, show_logprobs_mode},
      {"enable_prefix_caching", "--no-prefix-caching,--no-enable-prefix-caching", "Recompute shared prompt prefixes",
       K::kBool, 0, 0, false, false, false, assign_member<&EngineArgs::enable_prefix_caching>,
       show_member<&EngineArgs::enable_prefix_caching>},
      {"generation_config", "--generation-config",
       "Default sampling parameters of a request that leaves them out (vLLM's): auto (the model's "
       "generation_config.json: temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens), vllm "
       "(none), or a folder holding a generation_config.json",
       K::kString, 0, 0, true, true, false, assign_member<&EngineArgs::generation_config>,
       show_member<&EngineArgs::generation_config>},
      {"chat_template", "--chat-template",
       "A chat template in place of the model's (vLLM's): a Jinja file, or the template text itself", K::kString, 0, 0,
       true, false, true, assign_member<&EngineArgs::chat_template>, show_member<&EngineArgs::chat_template>},
      {"runner", "--runner",
       "auto (pooling when the checkpoint says so: sentence-transformers files, a GGUF pooling_type), generate, or "
       "pooling (embeddings and scores besides generation; vLLM's)",
       K::kString, 0, 0, true, true, false, assign_member<&EngineArgs::runner>, show_member<&EngineArgs::runner>},
      {"task", "--task",
       "auto, generate, embed (an embedding model) or score (a causal LM reranker such as Qwen3-Reranker: its "
       "yes/no logits); embed and score imply --runner pooling",
       K::kString, 0, 0, true, true, false, assign_member<&EngineArgs::task>, show_member<&EngineArgs::task>},
      {"hf_overrides", "--hf-overrides",
       "vLLM's pooling overrides as JSON: {\"architectures\": [\"Qwen3ForSequenceClassification\"], "
       "\"classifier_from_token\": [\"no\", \"yes\"], \"is_original_qwen3_reranker\": true}, "
       "matryoshka_dimensions; other keys are refused",
       K::kJson, 0, 0, true, false, true, assign_json_text<&EngineArgs::hf_overrides>,
       show_member<&EngineArgs::hf_overrides>},
      {"pooler_config", "--pooler-config",
       "Pooling as JSON (vLLM's): {\"pooling_type\": \"LAST\" | \"MEAN\" | \"CLS\", \"normalize\": true}", K::kJson, 0,
       0, true, false, true, assign_json_text<&EngineArgs::pooler_config>, show_member<&EngineArgs::pooler_config>},
      {"enable_return_routed_experts", "--enable-return-routed-experts",
       "Return with every finished choice the experts each MoE layer's router chose for each of its tokens "
       "(vLLM's routed_experts: [prompt + output tokens - 1, MoE layers, num_experts_per_tok]); MoE models only",
       K::kBool, 0, 0, true, false, false, assign_member<&EngineArgs::enable_return_routed_experts>,
       show_member<&EngineArgs::enable_return_routed_experts>},
      {"speculative_config", "--speculative-config",
       "Speculative decoding as JSON (vLLM's keys): {\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
       "\"prompt_lookup_max\": 4} or {\"model\": DRAFT, \"num_speculative_tokens\": 4}; outputs are the same bits "
       "with it on or off, only faster (docs/SPECULATIVE.md)",
       K::kJson, 0, 0, true, false, true, assign_speculative_config, show_speculative_config},
  };
  return kFields;
}

const EngineArgField* find_engine_arg(const std::string& name) {
  std::string key = name;
  while (!key.empty() && key[0] == '-') key.erase(0, 1);
  for (char& c : key)
    if (c == '-') c = '_';
  for (const EngineArgField& f : engine_arg_fields()) {
    if (key == f.name) return &f;
    std::string flag = f.flag;
    flag = flag.substr(0, flag.find(','));
    if (name == flag) return &f;
  }
  return nullptr;
}

std::vector<std::string> engine_arg_names() {
  std::vector<std::string> names;
  for (const EngineArgField& f : engine_arg_fields()) names.emplace_back(f.name);
  return names;
}

bool is_engine_arg(const std::string& name) {
  for (const EngineArgField& f : engine_arg_fields())
    if (name == f.name) return true;
  return false;
}

void set_engine_arg(EngineArgs& args, const std::string& name, const std::string& json_value) {
  const EngineArgField* field = is_engine_arg(name) ? find_engine_arg(name) : nullptr;
  if (field == nullptr) throw_invalid_field(name, "'" + name + "' is not an engine argument");
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(json_value);
  } catch (const nlohmann::json::exception&) {
    throw_invalid_field(name, name + ": '" + json_value + "' is not JSON text");
  }
  set_engine_arg(args, *field, value, name);
}

void set_engine_arg(EngineArgs& args, const EngineArgField& field, const json& value, const std::string& where) {
  if (value.is_null() && field.nullable) return;
  const auto refuse = [&](const std::string& expected) {
    throw Error(ErrorCode::kInvalidArgument, where + " must be " + expected + ", got " + value.dump(), field.name);
  };
  switch (field.kind) {
    case EngineArgKind::kInteger: {
      if (!value.is_number_integer()) refuse("an integer");
      const bool above = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(field.max);
      const int64_t v = above ? field.max : value.get<int64_t>();
      if (above || v < field.min || v > field.max) {
        refuse(field.min == 0 ? "a non-negative integer at most " + std::to_string(field.max)
               : field.min == 1
                   ? "a positive integer at most " + std::to_string(field.max)
                   : "an integer in [" + std::to_string(field.min) + ", " + std::to_string(field.max) + "]");
      }
      field.assign(args, json(v));
      return;
    }
    case EngineArgKind::kBytes: {
      int64_t bytes = 0;
      if (value.is_number_integer() && value.get<int64_t>() > 0) {
        bytes = value.get<int64_t>();
      } else if (value.is_string()) {
        bytes = parse_size_bytes(value.get<std::string>(), where);
      } else {
        refuse("a size such as '2GiB' or a positive number of bytes");
      }
      field.assign(args, json(bytes));
      return;
    }
    case EngineArgKind::kBool:
      if (!value.is_boolean()) refuse("true or false");
      field.assign(args, value);
      return;
    case EngineArgKind::kString:
      if (!value.is_string()) refuse("a string");
      field.assign(args, value);
      return;
    case EngineArgKind::kJson:
      if (!value.is_object()) refuse("a JSON object (a dict of vLLM's keys)");
      try {
        field.assign(args, value);
      } catch (const Error& e) {
        throw Error(ErrorCode::kInvalidArgument, where + ": " + e.what(), field.name);
      }
      return;
  }
}

json engine_arg_from_text(const EngineArgField& field, const std::string& text, const std::string& where) {
  switch (field.kind) {
    case EngineArgKind::kInteger: {
      int64_t v = 0;
      const char* end = text.data() + text.size();
      const auto [ptr, ec] = std::from_chars(text.data(), end, v);
      if (ec != std::errc() || ptr != end || text.empty())
        throw Error(ErrorCode::kInvalidArgument, where + " must be an integer, got '" + text + "'", field.name);
      return json(v);
    }
    case EngineArgKind::kJson: try { return json::parse(text);
      } catch (const json::exception&) {
        throw Error(ErrorCode::kInvalidArgument,
                    where + " must be a JSON object (" + field.name + "), got '" + text + "'", field.name);
      }
    case EngineArgKind::kBool: return json(text == "true" || text == "1");
    default: return json(text);
  }
}

}  // namespace ditto
