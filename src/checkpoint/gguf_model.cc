#include "checkpoint/gguf_model.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/architecture.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "kernels/quant_gemm.h"

namespace ditto {
namespace {

using nlohmann::json;

const Architecture& architecture_of(const GgufFile& g) {
  const std::string arch = g.require_string("general.architecture");
  std::string known;
  for (const Architecture& a : architectures()) {
    if (a.gguf.arch.empty()) continue;
    if (a.gguf.arch == arch) return a;
    // Several entries may write one general.architecture (MistralForCausalLM as llama): list it once.
    if ((", " + known + ", ").find(", " + a.gguf.arch + ", ") == std::string::npos)
      known += (known.empty() ? "" : ", ") + a.gguf.arch;
  }
  throw_invalid_argument(g.path() + ": metadata 'general.architecture' is \"" + arch +
                         "\", which ditto does not run (supported: " + known + ")");
}

std::vector<int64_t> ne_of(const TensorDesc& t, const ModelConfig& c) {
  std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
  if (t.expert >= 0) ne.push_back(c.num_experts);  // the layer's stacked tensor
  return ne;
}

// The attention heads from <arch>.attention.*: num_attention_heads, num_key_value_heads (as many
// as the query heads when absent) and, where key_length is given, head_dim.
void read_attention_heads(const GgufFile& g, const std::string& p, json& j) {
  const std::string& path = g.path();
  if (g.find(p + "attention.head_count") != nullptr &&
      g.find(p + "attention.head_count")->type == GgufValueType::kArray)
    throw_invalid_argument(path + ": metadata '" + p +
                           "attention.head_count' is a per-layer array; ditto needs one head count for every layer");
  j["num_attention_heads"] = g.require_int(p + "attention.head_count");
  j["num_key_value_heads"] = g.get_int(p + "attention.head_count_kv").value_or(j["num_attention_heads"].get<int64_t>());
  if (const std::optional<int64_t> key_length = g.get_int(p + "attention.key_length")) {
    j["head_dim"] = *key_length;
    if (const std::optional<int64_t> value_length = g.get_int(p + "attention.value_length");
        value_length && *value_length != *key_length)
      throw_invalid_argument(path + ": metadata '" + p + "attention.value_length' (" + std::to_string(*value_length) +
                             ") differs from '" + p + "attention.key_length' (" + std::to_string(*key_length) +
                             "); ditto needs equal key and value head sizes");
  }
}

// Not every converter writes <arch>.vocab_size: fall back on the tokenizer's token list, then on
// the embedding's rows.
int64_t vocab_size_of(const GgufFile& g, const std::string& p) {
  int64_t vocab = 0;
  if (const std::optional<int64_t> v = g.get_int(p + "vocab_size")) {
    vocab = *v;
  } else if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
             tokens && tokens->type == GgufValueType::kArray) {
    vocab = static_cast<int64_t>(tokens->array.size());
  } else if (const GgufTensor* emb = g.find_tensor("token_embd.weight"); emb && emb->ne.size() == 2) {
    vocab = emb->ne[1];
  }
  if (vocab <= 0)
    throw_invalid_argument(g.path() + ": the vocabulary size is unknown (no '" + p +
                           "vocab_size', no 'tokenizer.ggml.tokens', no 2-D token_embd.weight)");
  return vocab;
}

// The dense MLP's intermediate_size, or for MoE architectures the expert counts and sizes.
void read_feed_forward(const GgufFile& g, const Architecture& a, const std::string& p, json& j) {
  auto require = [&](const std::string& key) { return g.require_int(p + key); };
  if (a.features.moe) {
    j["num_experts"] = require("expert_count");
    j["num_experts_per_tok"] = require("expert_used_count");
    j["moe_intermediate_size"] = require("expert_feed_forward_length");
    j["intermediate_size"] = g.get_int(p + "feed_forward_length").value_or(j["moe_intermediate_size"].get<int64_t>());
    j["norm_topk_prob"] = true;
    j["decoder_sparse_step"] = 1;
  } else {
    j["intermediate_size"] = require("feed_forward_length");
  }
}

// llama3 RoPE scaling, stored as the tensor rope_freqs.weight: [head_dim / 2] f32 divisors.
void read_rope_freq_divisors(const GgufFile& g, const Architecture& a, ModelConfig& c) {
  const GgufTensor* freqs = g.find_tensor("rope_freqs.weight");
  if (freqs == nullptr) return;
  const std::string where = g.path() + ": tensor 'rope_freqs.weight'";
  if (!a.gguf.rope_freqs)
    throw_invalid_argument(where + " (RoPE frequency divisors) is not read for " + a.gguf.arch + " models");
  if (freqs->type != GgmlType::kF32 || freqs->ne != std::vector<int64_t>{c.head_dim / 2})
    throw_invalid_argument(where + " must be F32 of shape (ggml ne) {" + std::to_string(c.head_dim / 2) +
                           "} (head_dim / 2), is " + std::string(ggml_type_name(freqs->type)) + " " +
                           ggml_ne_string(freqs->ne));
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    float divisor;
    std::memcpy(&divisor, freqs->data + 4 * i, 4);
    if (!(divisor > 0) || !std::isfinite(divisor))
      throw_invalid_argument(where + ": element " + std::to_string(i) + " is " + std::to_string(divisor) +
                             "; divisors must be positive and finite");
    c.rope_freq_divisors.push_back(divisor);
  }
}

// Sliding-window layers (gemma3). llama.cpp reads only the window, <arch>.attention.sliding_window,
// and fixes the rest in its graph (GgufArchitecture::swa_pattern): which layers slide (a pattern
// key, an int or a per-layer bool array, is read where a file has one), their RoPE base
// (<arch>.rope.freq_base_swa where given) and the attention scale 1/sqrt(key_length) — except for
// the 62-layer 27B model, whose scale is 1/sqrt(embedding_length / head_count).
void read_sliding_window(const GgufFile& g, const Architecture& a, const std::string& p, json& j) {
  const std::string& path = g.path();
  const GgufValue* window = g.find(p + "attention.sliding_window");
  if (window == nullptr)
    throw_invalid_argument(path + ": metadata '" + p + "attention.sliding_window' is missing (" + a.gguf.arch +
                           " models need the sliding window)");
  j["sliding_window"] = g.require_int(p + "attention.sliding_window");
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  if (const GgufValue* pattern = g.find(pattern_key); pattern != nullptr && pattern->type == GgufValueType::kArray) {
    json types = json::array();
    for (const GgufValue& e : pattern->array) {
      if (e.type != GgufValueType::kBool)
        throw_invalid_argument(path + ": metadata '" + pattern_key + "' must be an integer or an array of booleans");
      types.push_back(e.b ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
  } else {
    j["sliding_window_pattern"] = g.get_int(pattern_key).value_or(a.gguf.swa_pattern);
  }
  j["rope_local_base_freq"] = g.get_float(p + "rope.freq_base_swa").value_or(a.gguf.swa_rope_freq_base);
  const int64_t hidden = j["hidden_size"].get<int64_t>();
  const int64_t heads = j["num_attention_heads"].get<int64_t>();
  j["query_pre_attn_scalar"] = j["num_hidden_layers"].get<int64_t>() == 62
                                   ? static_cast<double>(hidden / heads)
                                   : static_cast<double>(j.value("head_dim", hidden / heads));
}

}  // namespace

int64_t llama_permuted_row(int64_t r, int64_t head_dim) {
  const int64_t w = r % head_dim;
  return r - w + (w % 2) * (head_dim / 2) + w / 2;
}

nlohmann::json gguf_config_json(const GgufFile& g) {
  const Architecture& a = architecture_of(g);
  const std::string p = a.gguf.arch + ".";
  const std::string& path = g.path();
  auto require = [&](const std::string& key) { return g.require_int(p + key); };
  json j;
  j["architectures"] = json::array({a.name});
  j["model_type"] = a.model_type;
  j["hidden_size"] = require("embedding_length");
  j["num_hidden_layers"] = require("block_count");
  j["max_position_embeddings"] = require("context_length");
  read_attention_heads(g, p, j);
  const std::optional<double> eps = g.get_float(p + "attention.layer_norm_rms_epsilon");
  if (!eps) throw_invalid_argument(path + ": metadata '" + p + "attention.layer_norm_rms_epsilon' is missing");
  j["rms_norm_eps"] = *eps;
  j["rope_theta"] = g.get_float(p + "rope.freq_base").value_or(10000.0);
  if (const std::optional<std::string> scaling = g.get_string(p + "rope.scaling.type"); scaling && *scaling != "none")
    throw_invalid_argument(path + ": metadata '" + p + "rope.scaling.type' is \"" + *scaling +
                           "\"; ditto supports only \"none\" (and llama3 scaling from rope_freqs.weight)");
  j["vocab_size"] = vocab_size_of(g, p);
  j["tie_word_embeddings"] = g.find_tensor("output.weight") == nullptr;
  j["attention_bias"] = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (a.features.mlp_bias) j["mlp_bias"] = g.find_tensor("blk.0.ffn_gate.bias") != nullptr;
  read_feed_forward(g, a, p, j);
  if (a.features.sliding_window) read_sliding_window(g, a, p, j);
  if (const std::optional<int64_t> bos = g.get_int("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  if (const std::optional<int64_t> eos = g.get_int("tokenizer.ggml.eos_token_id")) j["eos_token_id"] = *eos;
  if (g.get_bool("ditto.random_weights").value_or(false)) j["ditto_random_weights"] = true;
  return j;
}

ModelConfig gguf_model_config(const GgufFile& g) {
  const Architecture& a = architecture_of(g);
  const std::string p = a.gguf.arch + ".";
  ModelConfig c = parse_model_config(gguf_config_json(g), g.path());
  read_rope_freq_divisors(g, a, c);
  if (const std::optional<int64_t> rot = g.get_int(p + "rope.dimension_count"); rot && *rot != c.head_dim)
    throw_invalid_argument(g.path() + ": metadata '" + p + "rope.dimension_count' is " + std::to_string(*rot) +
                           " but heads have " + std::to_string(c.head_dim) +
                           " dimensions; partial rotary embeddings are not supported");
  return c;
}

GgufVocab gguf_vocab(const GgufFile& g) {
  GgufVocab v;
  const std::optional<std::vector<std::string>> tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) throw_invalid_argument(g.path() + ": metadata 'tokenizer.ggml.tokens' is missing (no tokenizer)");
  v.tokens = *tokens;
  v.model = g.get_string("tokenizer.ggml.model").value_or("");
  v.pre = g.get_string("tokenizer.ggml.pre").value_or("default");
  if (const auto types = g.get_int_array("tokenizer.ggml.token_type")) {
    v.token_types.reserve(types->size());
    for (int64_t t : *types) v.token_types.push_back(static_cast<int32_t>(t));
  }
  if (const auto merges = g.get_string_array("tokenizer.ggml.merges")) v.merges = *merges;
  if (const auto scores = g.get_float_array("tokenizer.ggml.scores")) {
    v.scores.reserve(scores->size());
    for (double s : *scores) v.scores.push_back(static_cast<float>(s));
  }
  for (const GgufSpecialIdKey& k : gguf_special_id_keys()) {
    if (v.special_ids.find(k.name) != nullptr) continue;  // a newer key named it already
    if (const std::optional<int64_t> id = g.get_int(k.key)) {
      if (*id > UINT32_MAX) throw_invalid_argument(g.path() + ": metadata '" + k.key + "' is out of range");
      v.special_ids.set(k.name, static_cast<uint32_t>(*id));
    }
  }
  for (const auto& [key, name] : {std::pair<const char*, const char*>{"tokenizer.ggml.add_bos_token", "bos"},
                                  {"tokenizer.ggml.add_eos_token", "eos"},
                                  {"tokenizer.ggml.add_sep_token", "sep"}}) {
    if (const std::optional<bool> add = g.get_bool(key)) v.add_special.set(name, *add);
  }
  v.add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix");
  if (const std::optional<std::string> t = g.get_string("tokenizer.chat_template")) v.chat_template = *t;
  return v;
}

GgufWeight gguf_weight(const GgufFile& g, const ModelConfig& c, const TensorDesc& t) {
  const std::string where = g.path() + ": tensor '" + t.gguf_name + "'";
  const GgufTensor* tensor = g.find_tensor(t.gguf_name);
  if (tensor == nullptr)
    throw_invalid_argument(where + " is missing (the " + c.architecture + " config of the metadata needs it, for " +
                           t.name + ")");
  const std::vector<int64_t> want = ne_of(t, c);
  // A 1-D vector may be stored as [n] or as [n, 1].
  std::vector<int64_t> have = tensor->ne;
  while (have.size() > want.size() && have.back() == 1) have.pop_back();
  if (have != want)
    throw_invalid_argument(where + " has shape (ggml ne) " + ggml_ne_string(tensor->ne) + " but the metadata implies " +
                           ggml_ne_string(want) + " (" + t.name + " " + shape_string(t.shape) + ")");
  const bool matrix = is_matrix_slot(t.slot);
  if (!matrix && ggml_type_is_quantized(tensor->type))
    throw_invalid_argument(where + " is " + std::string(ggml_type_name(tensor->type)) +
                           "; norm weights and biases must be F32, F16 or BF16");
  GgufWeight w;
  w.tensor = tensor;
  w.type = tensor->type;
  w.rows = matrix ? t.shape[0] : 1;
  w.cols = t.shape.back();
  w.row_bytes = tensor->row_bytes();
  w.data = tensor->data + (t.expert >= 0 ? static_cast<size_t>(t.expert * w.rows) * w.row_bytes : 0);
  if (t.rope_rows && architecture_of(g).gguf.permute_qk) w.permute_head_dim = c.head_dim;
  return w;
}

void validate_gguf_weights(const GgufFile& g, const ModelConfig& c) {
  for_each_tensor(c, [&](const TensorDesc& t) { gguf_weight(g, c, t); });
}

}  // namespace ditto
