#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/json_file.h"

namespace ditto {
namespace {

using nlohmann::json;

constexpr const char* kQwen3 = "Qwen3ForCausalLM";
constexpr const char* kLlama = "LlamaForCausalLM";
constexpr const char* kQwen3Moe = "Qwen3MoeForCausalLM";

// Hugging Face __init__ defaults of one architecture. head_dim == 0 means hidden / heads;
// num_key_value_heads == 0 means num_attention_heads.
struct Defaults {
  const char* model_type;
  int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
  int64_t num_key_value_heads, head_dim, max_position_embeddings;
  std::optional<int64_t> bos_token_id, eos_token_id;
};

const Defaults& defaults_for(const std::string& architecture) {
  static const Defaults qwen3{"qwen3", 151936, 4096, 22016, 32, 32, 32, 128, 32768, {}, {}};
  static const Defaults llama{"llama", 32000, 4096, 11008, 32, 32, 0, 0, 2048, 1, 2};
  static const Defaults qwen3_moe{"qwen3_moe", 151936, 2048, 6144, 24, 32, 4, 0, 32768, {}, {}};
  if (architecture == kLlama) return llama;
  if (architecture == kQwen3Moe) return qwen3_moe;
  return qwen3;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Typed access to the keys of one JSON object, with errors that name the file and the key.
class Reader {
 public:
  Reader(const json& j, std::string source, std::string prefix = "")
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_invalid_argument(source_ + ": '" + prefix_ + key + "' " + what);
  }
  // The value of `key`, or nullptr when absent or null.
  const json* find(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  int64_t get_int(const std::string& key, int64_t fallback) const {
    const json* v = find(key);
    return v == nullptr ? fallback : as_int(key, *v);
  }
  int64_t require_int(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "is required");
    return as_int(key, *v);
  }
  double get_double(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(key, "must be a number, got " + v->dump());
    return v->get<double>();
  }
  double require_double(const std::string& key) const {
    if (!has(key)) fail(key, "is required");
    return get_double(key, 0);
  }
  bool get_bool(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::string get_string(const std::string& key, const std::string& fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, "must be a string, got " + v->dump());
    return v->get<std::string>();
  }
  int64_t as_int(const std::string& key, const json& v) const {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
        fail(key, "is too large: " + v.dump());
      }
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {  // 40960.0 is accepted, 0.5 is not
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
        return static_cast<int64_t>(d);
      }
    }
    fail(key, "must be an integer, got " + v.dump());
  }
  std::vector<int64_t> get_int_list(const std::string& key) const {
    std::vector<int64_t> out;
    const json* v = find(key);
    if (v == nullptr) return out;
    if (v->is_array()) {
      for (const auto& e : *v) out.push_back(as_int(key, e));
    } else {
      out.push_back(as_int(key, *v));  // eos_token_id may be a single int
    }
    return out;
  }

 private:
  const json& j_;
  std::string source_;
  std::string prefix_;
};

std::string resolve_architecture(const json& j, const Reader& r, const std::string& source) {
  const std::string model_type = r.get_string("model_type", "");
  if (const json* a = r.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
      r.fail("architectures", "must be a non-empty list of strings, got " + a->dump());
    }
    const std::string arch = (*a)[0].get<std::string>();
    const auto& ok = supported_architectures();
    if (std::find(ok.begin(), ok.end(), arch) == ok.end()) {
      throw_invalid_argument(source + ": unsupported architecture: 'architectures' is " +
                             j["architectures"].dump() + "; ditto supports " + join(ok));
    }
    return arch;
  }
  if (model_type.empty()) {
    throw_invalid_argument(source +
                           ": neither 'architectures' nor 'model_type' is set; ditto "
                           "supports " +
                           join(supported_architectures()));
  }
  for (const auto& arch : supported_architectures()) {
    if (model_type == defaults_for(arch).model_type) return arch;
  }
  throw_invalid_argument(source + ": unsupported 'model_type' \"" + model_type +
                         "\" (and no 'architectures'); ditto supports qwen3 (" + kQwen3 +
                         "), llama (" + kLlama + "), qwen3_moe (" + kQwen3Moe + ")");
}

// rope_scaling (or transformers 5's rope_parameters): null/"default" -> none, "llama3" -> parsed.
std::optional<RopeScaling> parse_rope_scaling(const Reader& r, const std::string& source) {
  std::string key = "rope_scaling";
  const json* s = r.find(key);
  if (s == nullptr) {
    key = "rope_parameters";
    s = r.find(key);
  }
  if (s == nullptr) return std::nullopt;
  if (!s->is_object()) r.fail(key, "must be an object or null, got " + s->dump());
  const Reader sr(*s, source, key + ".");
  // Older configs spell rope_type as "type" (transformers moves it over the same way).
  std::string type = sr.get_string("rope_type", "");
  if (type.empty()) type = sr.get_string("type", "");
  if (type.empty() || type == "default") return std::nullopt;
  if (type != "llama3") {
    sr.fail("rope_type", "is \"" + type + "\"; ditto supports \"default\" and \"llama3\"");
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

void require_positive(const Reader& r, const std::string& key, int64_t value) {
  if (value <= 0) r.fail(key, "must be a positive integer, got " + std::to_string(value));
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kAll = {kQwen3, kLlama, kQwen3Moe};
  return kAll;
}

bool ModelConfig::has_qk_norm() const { return architecture != kLlama; }

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
             mlp_only_layers.end() &&
         num_experts > 0 && (layer + 1) % decoder_sparse_step == 0;
}

ModelConfig parse_model_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw_invalid_argument(source + ": config must be a JSON object");
  const Reader r(j, source);
  ModelConfig c;
  c.architecture = resolve_architecture(j, r, source);
  const Defaults& d = defaults_for(c.architecture);
  const bool llama = c.architecture == kLlama;
  const bool moe = c.architecture == kQwen3Moe;
  c.model_type = r.get_string("model_type", d.model_type);

  c.vocab_size = r.get_int("vocab_size", d.vocab_size);
  c.hidden_size = r.get_int("hidden_size", d.hidden_size);
  c.intermediate_size = r.get_int("intermediate_size", d.intermediate_size);
  c.num_hidden_layers = r.get_int("num_hidden_layers", d.num_hidden_layers);
  c.num_attention_heads = r.get_int("num_attention_heads", d.num_attention_heads);
  c.num_key_value_heads =
      r.get_int("num_key_value_heads",
                d.num_key_value_heads > 0 ? d.num_key_value_heads : c.num_attention_heads);
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
  if (r.has("head_dim") || d.head_dim > 0) {
    c.head_dim = r.get_int("head_dim", d.head_dim);
    require_positive(r, "head_dim", c.head_dim);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      r.fail("hidden_size", "(" + std::to_string(c.hidden_size) +
                                ") must be divisible by 'num_attention_heads' (" +
                                std::to_string(c.num_attention_heads) +
                                ") when 'head_dim' is not set");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) {
    r.fail("head_dim", "must be even (RoPE rotates pairs), got " + std::to_string(c.head_dim));
  }

  c.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  double theta = 10000.0;
  if (const json* p = r.find("rope_parameters"); p != nullptr && p->is_object()) {
    theta = Reader(*p, source, "rope_parameters.").get_double("rope_theta", theta);
  }
  c.rope_theta = r.get_double("rope_theta", theta);
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");
  c.rope_scaling = parse_rope_scaling(r, source);
  c.initializer_range = r.get_double("initializer_range", 0.02);
  if (!(c.initializer_range >= 0)) r.fail("initializer_range", "must not be negative");

  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  c.attention_bias = r.get_bool("attention_bias", false);
  c.mlp_bias = llama ? r.get_bool("mlp_bias", false) : false;  // Qwen3's MLP has no bias
  c.hidden_act = r.get_string("hidden_act", "silu");
  if (c.hidden_act != "silu") {
    r.fail("hidden_act", "is \"" + c.hidden_act + "\"; ditto supports only \"silu\"");
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

  if (!llama) {
    if (r.get_bool("use_sliding_window", false)) {
      r.fail("use_sliding_window", "is true; sliding-window attention is not supported");
    }
    if (const json* lt = r.find("layer_types"); lt != nullptr && lt->is_array()) {
      for (const auto& t : *lt) {
        if (t != "full_attention") {
          r.fail("layer_types", "contains " + t.dump() + "; ditto supports only full_attention");
        }
      }
    }
  }
  if (moe) {
    c.num_experts = r.get_int("num_experts", 128);
    c.num_experts_per_tok = r.get_int("num_experts_per_tok", 8);
    c.moe_intermediate_size = r.get_int("moe_intermediate_size", 768);
    c.decoder_sparse_step = r.get_int("decoder_sparse_step", 1);
    c.norm_topk_prob = r.get_bool("norm_topk_prob", false);
    c.mlp_only_layers = r.get_int_list("mlp_only_layers");
    if (c.num_experts < 0) r.fail("num_experts", "must not be negative");
    if (c.num_experts > 0) {
      if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts) {
        r.fail("num_experts_per_tok",
               "must be in [1, num_experts=" + std::to_string(c.num_experts) + "], got " +
                   std::to_string(c.num_experts_per_tok));
      }
      require_positive(r, "moe_intermediate_size", c.moe_intermediate_size);
    }
    require_positive(r, "decoder_sparse_step", c.decoder_sparse_step);
    for (int64_t layer : c.mlp_only_layers) {
      if (layer < 0 || layer >= c.num_hidden_layers) {
        r.fail("mlp_only_layers", "holds layer " + std::to_string(layer) + ", outside [0, " +
                                      std::to_string(c.num_hidden_layers) + ")");
      }
    }
  }
  return c;
}

ModelConfig load_model_config(const std::string& config_json_path) {
  if (!std::filesystem::exists(config_json_path))
    throw_not_found(config_json_path + ": cannot open (is this a model directory?)");
  return parse_model_config(read_json_file(config_json_path, /*require_object=*/false), config_json_path);
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t h = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  auto linear = [&](const std::string& name, int64_t out_features, int64_t in_features, bool bias) {
    out.push_back({name + ".weight", {out_features, in_features}});
    if (bias) out.push_back({name + ".bias", {out_features}});
  };
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    linear(p + "self_attn.q_proj", q, h, c.attention_bias);
    linear(p + "self_attn.k_proj", kv, h, c.attention_bias);
    linear(p + "self_attn.v_proj", kv, h, c.attention_bias);
    linear(p + "self_attn.o_proj", h, q, c.attention_bias);
    if (c.has_qk_norm()) {
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    if (c.is_moe_layer(layer)) {
      out.push_back({p + "mlp.gate.weight", {c.num_experts, h}});
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
        linear(ep + "gate_proj", c.moe_intermediate_size, h, false);
        linear(ep + "up_proj", c.moe_intermediate_size, h, false);
        linear(ep + "down_proj", h, c.moe_intermediate_size, false);
      }
    } else {
      linear(p + "mlp.gate_proj", c.intermediate_size, h, c.mlp_bias);
      linear(p + "mlp.up_proj", c.intermediate_size, h, c.mlp_bias);
      linear(p + "mlp.down_proj", h, c.intermediate_size, c.mlp_bias);
    }
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

}  // namespace ditto
