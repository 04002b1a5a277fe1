#include "architecture/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/json_fields.h"
#include "core/json_file.h"

namespace ditto {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& items, const std::string& last_separator = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? last_separator : ", ") + items[i];
  return out;
}

const Architecture& resolve_architecture(const json& j, const JsonFields& r, const std::string& source) {
  const std::string model_type = r.get_string("model_type", "");
  if (const json* a = r.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
      r.fail("architectures", "must be a non-empty list of strings, got " + a->dump());
    }
    const Architecture* arch = find_architecture((*a)[0].get<std::string>());
    if (arch == nullptr) {
      throw_invalid_argument(source + ": unsupported architecture: 'architectures' is " + j["architectures"].dump() +
                             "; ditto supports " + join(supported_architectures()));
    }
    return *arch;
  }
  if (model_type.empty()) {
    throw_invalid_argument(source +
                           ": neither 'architectures' nor 'model_type' is set; ditto "
                           "supports " +
                           join(supported_architectures()));
  }
  if (const Architecture* arch = find_architecture_by_model_type(model_type)) return *arch;
  std::vector<std::string> known;
  for (const Architecture& a : architectures()) known.push_back(a.model_type + " (" + a.name + ")");
  throw_invalid_argument(source + ": unsupported 'model_type' \"" + model_type +
                         "\" (and no 'architectures'); ditto supports " + join(known));
}

// rope_scaling (or transformers 5's rope_parameters): null/"default" -> none, one of the
// architecture's rope_scaling_types -> parsed ("llama3" is the one implemented).
std::optional<RopeScaling> parse_rope_scaling(const JsonFields& r, const std::string& source,
                                              const std::vector<std::string>& types) {
  std::string key = "rope_scaling";
  const json* s = r.find(key);
  if (s == nullptr) {
    key = "rope_parameters";
    s = r.find(key);
  }
  if (s == nullptr) return std::nullopt;
  if (!s->is_object()) r.fail(key, "must be an object or null, got " + s->dump());
  const JsonFields sr(*s, source, key + ".");
  // Older configs spell rope_type as "type" (transformers moves it over the same way).
  std::string type = sr.get_string("rope_type", "");
  if (type.empty()) type = sr.get_string("type", "");
  if (type.empty() || type == "default") return std::nullopt;
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    std::vector<std::string> quoted = {"\"default\""};
    for (const std::string& t : types) quoted.push_back("\"" + t + "\"");
    sr.fail("rope_type", "is \"" + type + "\"; ditto supports " + join(quoted, " and "));
  }
  RopeScaling out;
  out.rope_type = type;
  out.factor = sr.require_double("factor");
  out.low_freq_factor = sr.require_double("low_freq_factor");
  out.high_freq_factor = sr.require_double("high_freq_factor");
  out.original_max_position_embeddings = sr.require_int("original_max_position_embeddings");
  if (!(out.factor > 0)) sr.fail("factor", "must be positive");
  if (!(out.low_freq_factor > 0)) sr.fail("low_freq_factor", "must be positive");
  if (!(out.high_freq_factor > out.low_freq_factor)) {
    sr.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
  if (out.original_max_position_embeddings <= 0) {
    sr.fail("original_max_position_embeddings", "must be positive");
  }
  return out;
}

void require_positive(const JsonFields& r, const std::string& key, int64_t value) {
  if (value <= 0) r.fail(key, "must be a positive integer, got " + std::to_string(value));
}

// The transformer's sizes; a key the file leaves out takes the architecture's default.
void read_sizes(const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  c.vocab_size = r.get_int("vocab_size", d.vocab_size);
  c.hidden_size = r.get_int("hidden_size", d.hidden_size);
  c.intermediate_size = r.get_int("intermediate_size", d.intermediate_size);
  c.num_hidden_layers = r.get_int("num_hidden_layers", d.num_hidden_layers);
  c.num_attention_heads = r.get_int("num_attention_heads", d.num_attention_heads);
  c.num_key_value_heads =
      r.get_int("num_key_value_heads", d.num_key_value_heads > 0 ? d.num_key_value_heads : c.num_attention_heads);
  c.max_position_embeddings = r.get_int("max_position_embeddings", d.max_position_embeddings);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                                   {"hidden_size", c.hidden_size},
                                   {"intermediate_size", c.intermediate_size},
                                   {"num_hidden_layers", c.num_hidden_layers},
                                   {"num_attention_heads", c.num_attention_heads},
                                   {"num_key_value_heads", c.num_key_value_heads},
                                   {"max_position_embeddings", c.max_position_embeddings}}) {
    require_positive(r, key, value);
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    r.fail("num_attention_heads", "(" + std::to_string(c.num_attention_heads) +
                                      ") must be a multiple of 'num_key_value_heads' (" +
                                      std::to_string(c.num_key_value_heads) + ")");
  }
}

// head_dim: the file's or the architecture's, else hidden_size / num_attention_heads.
void read_head_dim(const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  if (r.has("head_dim") || d.head_dim > 0) {
    c.head_dim = r.get_int("head_dim", d.head_dim);
    require_positive(r, "head_dim", c.head_dim);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      r.fail("hidden_size", "(" + std::to_string(c.hidden_size) + ") must be divisible by 'num_attention_heads' (" +
                                std::to_string(c.num_attention_heads) + ") when 'head_dim' is not set");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) {
    r.fail("head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(c.head_dim));
  }
}

// rms_norm_eps, RoPE (rope_theta, also read from transformers 5's rope_parameters, and
// rope_scaling) and initializer_range.
void read_norm_and_rope(const JsonFields& r, const std::string& source, const ArchitectureDefaults& d, ModelConfig& c) {
  c.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  double theta = d.rope_theta;
  if (const json* p = r.find("rope_parameters"); p != nullptr && p->is_object()) {
    theta = JsonFields(*p, source, "rope_parameters.").get_double("rope_theta", theta);
  }
  c.rope_theta = r.get_double("rope_theta", theta);
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");
  c.rope_scaling = parse_rope_scaling(r, source, c.features.rope_scaling_types);
  c.initializer_range = r.get_double("initializer_range", 0.02);
  if (!(c.initializer_range >= 0)) r.fail("initializer_range", "must not be negative");
}

// Biases, activation, dtype and the BOS / EOS ids. `j` tells an absent bos_token_id (the
// architecture's default) from one set to null (none).
void read_layer_options_and_tokens(const json& j, const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", d.tie_word_embeddings);
  c.attention_bias = c.features.attention_bias == AttentionBias::kConfig ? r.get_bool("attention_bias", false) : false;
  c.mlp_bias = c.features.mlp_bias ? r.get_bool("mlp_bias", false) : false;
  // Gemma's configs name the MLP activation hidden_activation (and may carry a hidden_act beside it,
  // which transformers' Gemma 3 ignores).
  const char* act_key = r.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  c.hidden_act = r.get_string(act_key, d.hidden_act);
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh") {
    r.fail(act_key, "is \"" + c.hidden_act + "\"; ditto supports \"silu\" and \"gelu_pytorch_tanh\"");
  }
  c.torch_dtype = r.get_string("torch_dtype", r.get_string("dtype", ""));
  if (r.has("bos_token_id")) {
    c.bos_token_id = r.get_int("bos_token_id", 0);
  } else if (!j.contains("bos_token_id")) {
    c.bos_token_id = d.bos_token_id;
  }
  if (j.contains("eos_token_id")) {
    c.eos_token_ids = r.get_int_list("eos_token_id");
  } else if (d.eos_token_id) {
    c.eos_token_ids = {*d.eos_token_id};
  }
}

// For architectures whose configs carry sliding-window keys ditto does not implement: refuse a
// config that turns them on rather than run full attention where the model expects a window.
void refuse_sliding_window(const JsonFields& r) {
  if (r.get_bool("use_sliding_window", false)) {
    r.fail("use_sliding_window", "is true; ditto does not run Qwen's sliding window (max_window_layers)");
  }
  if (const json* lt = r.find("layer_types"); lt != nullptr && lt->is_array()) {
    for (const auto& t : *lt) {
      if (t != "full_attention") {
        r.fail("layer_types", "contains " + t.dump() + "; ditto supports only full_attention");
      }
    }
  }
}

// sliding_window (null: none; absent: the architecture's default). The window applies to every
// layer (Mistral) or, with features.local_attention_layers, to the layers layer_types picks (else
// all but every sliding_window_pattern-th). A window wider than the context never binds.
void read_sliding_window(const json& j, const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  std::optional<int64_t> window = d.sliding_window;
  if (j.contains("sliding_window"))
    window = j["sliding_window"].is_null() ? std::nullopt : std::optional(r.get_int("sliding_window", 0));
  if (!window) return;
  if (*window <= 0) r.fail("sliding_window", "must be a positive integer or null, got " + std::to_string(*window));
  c.sliding_window = *window;
  if (!c.features.local_attention_layers) {
    c.sliding_layers.assign(static_cast<size_t>(c.num_hidden_layers), true);
    return;
  }
  if (const json* lt = r.find("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.num_hidden_layers)
      r.fail("layer_types", "must be a list of num_hidden_layers (" + std::to_string(c.num_hidden_layers) +
                                ") strings, got " + lt->dump());
    for (const json& t : *lt) {
      if (t != "sliding_attention" && t != "full_attention")
        r.fail("layer_types", "contains " + t.dump() + "; ditto supports \"sliding_attention\" and \"full_attention\"");
      c.sliding_layers.push_back(t == "sliding_attention");
    }
  } else {
    const int64_t pattern = r.get_int("sliding_window_pattern", d.sliding_window_pattern);
    require_positive(r, "sliding_window_pattern", pattern);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sliding_layers.push_back((i + 1) % pattern != 0);
  }
}

// Gemma3TextConfig's keys beside the window: the sliding layers' RoPE base and the attention
// scale. Logit softcapping (Gemma 2) and bidirectional attention are refused rather than ignored.
void read_local_attention_keys(const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  c.rope_local_base_freq = r.get_double("rope_local_base_freq", d.rope_local_base_freq);
  if (!(c.rope_local_base_freq > 0)) r.fail("rope_local_base_freq", "must be positive");
  c.query_pre_attn_scalar = r.get_double("query_pre_attn_scalar", d.query_pre_attn_scalar);
  if (!(c.query_pre_attn_scalar > 0) || !std::isfinite(c.query_pre_attn_scalar))
    r.fail("query_pre_attn_scalar", "must be positive");
  if (r.get_bool("use_bidirectional_attention", false))
    r.fail("use_bidirectional_attention", "is true; ditto runs causal attention only");
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (const json* v = r.find(key))
      r.fail(key, "is " + v->dump() + "; ditto supports only null (no logit softcapping)");
  }
}

// The mixture-of-experts keys (Qwen3-MoE's names), checked against each other and the layer count.
void read_moe(const JsonFields& r, const ArchitectureDefaults& d, ModelConfig& c) {
  c.num_experts = r.get_int("num_experts", d.num_experts);
  c.num_experts_per_tok = r.get_int("num_experts_per_tok", d.num_experts_per_tok);
  c.moe_intermediate_size = r.get_int("moe_intermediate_size", d.moe_intermediate_size);
  c.decoder_sparse_step = r.get_int("decoder_sparse_step", d.decoder_sparse_step);
  c.norm_topk_prob = r.get_bool("norm_topk_prob", d.norm_topk_prob);
  c.mlp_only_layers = r.get_int_list("mlp_only_layers");
  if (c.num_experts < 0) r.fail("num_experts", "must not be negative");
  if (c.num_experts > 0) {
    if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts) {
      r.fail("num_experts_per_tok", "must be in [1, num_experts=" + std::to_string(c.num_experts) + "], got " +
                                        std::to_string(c.num_experts_per_tok));
    }
    require_positive(r, "moe_intermediate_size", c.moe_intermediate_size);
  }
  require_positive(r, "decoder_sparse_step", c.decoder_sparse_step);
  for (int64_t layer : c.mlp_only_layers) {
    if (layer < 0 || layer >= c.num_hidden_layers) {
      r.fail("mlp_only_layers",
             "holds layer " + std::to_string(layer) + ", outside [0, " + std::to_string(c.num_hidden_layers) + ")");
    }
  }
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Architecture& a : architectures()) names.push_back(a.name);
  return names;
}

bool ModelConfig::has_sliding_layers() const {
  return std::find(sliding_layers.begin(), sliding_layers.end(), true) != sliding_layers.end();
}

double ModelConfig::attention_scale() const {
  return 1.0 / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim));
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end() && num_experts > 0 &&
         (layer + 1) % decoder_sparse_step == 0;
}

int64_t ModelConfig::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer) n += is_moe_layer(layer) ? 1 : 0;
  return n;
}

// The keys are read in a fixed order, so a config with several faults always names the same one.
ModelConfig parse_model_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw_invalid_argument(source + ": config must be a JSON object");
  const JsonFields r(j, source);
  ModelConfig c;
  const Architecture& arch = resolve_architecture(j, r, source);
  const ArchitectureDefaults& d = arch.defaults;
  c.architecture = arch.name;
  c.features = arch.features;
  c.model_type = r.get_string("model_type", arch.model_type);

  read_sizes(r, d, c);
  read_head_dim(r, d, c);
  read_norm_and_rope(r, source, d, c);
  read_layer_options_and_tokens(j, r, d, c);
  c.random_weights = j.contains("ditto_random_weights");
  if (c.features.refuses_sliding_window) refuse_sliding_window(r);
  if (c.features.sliding_window) read_sliding_window(j, r, d, c);
  if (c.features.local_attention_layers) read_local_attention_keys(r, d, c);
  if (c.features.moe) read_moe(r, d, c);
  return c;
}

ModelConfig load_model_config(const std::string& config_json_path) {
  if (!std::filesystem::exists(config_json_path))
    throw_not_found(config_json_path + ": cannot open (is this a model directory?)");
  return parse_model_config(read_json_file(config_json_path, /*require_object=*/false), config_json_path);
}

}  // namespace ditto
