// `ditto export-gguf`: writes a Hugging Face Qwen3 / Qwen3-MoE / Llama directory as the GGUF file
// that llama.cpp's convert_hf_to_gguf.py writes for it, streaming one tensor at a time from the mmap.
//
// Every convention is llama.cpp's (the source bundled with node-llama-cpp 3.21.1:
// conversion/{base,llama,qwen}.py, gguf-py/gguf/{constants,vocab,metadata}.py,
// src/llama-vocab.cpp, src/models/{llama,qwen3,qwen3moe}.cpp):
//  - general.architecture "qwen3" (Qwen3ForCausalLM), "qwen3moe" (Qwen3MoeForCausalLM) or "llama"
//    (LlamaForCausalLM) and the hyperparameters as <arch>.block_count, context_length,
//    embedding_length, ...
//  - tensors token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm,
//    attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down (qwen3moe: ffn_gate_inp, ffn_gate_exps,
//    ffn_up_exps, ffn_down_exps)}, output_norm, and output unless the embeddings are tied
//    (llama.cpp then reuses token_embd).
//  - 1-D tensors, *_norm.weight and the MoE router ffn_gate_inp as F32; every other tensor keeps its
//    dtype (bf16 -> BF16, f16 -> F16: what --outtype auto picks; an f32 checkpoint stays F32, where
//    auto would pick F16).
//  - qwen3moe (conversion/qwen.py Qwen3MoeModel, a Qwen2MoeModel; src/models/qwen3moe.cpp): the
//    router mlp.gate as blk.N.ffn_gate_inp [num_experts, hidden_size]; each layer's experts stacked
//    into 3-D tensors blk.N.ffn_{gate,up,down}_exps [num_experts, out, in] (ggml ne: {in, out,
//    num_experts}), written down, gate, up as the converter yields them; expert_count,
//    expert_used_count, expert_feed_forward_length keys. llama.cpp's qwen3moe has a sparse block on
//    every layer and always renormalises the top-k weights: a dense layer (mlp_only_layers,
//    decoder_sparse_step) is refused, as the converter refuses it (QWEN3MOE has no ffn_gate tensor);
//    norm_topk_prob = false is written (no key holds it) with a warning.
//  - llama only: q_proj / k_proj rows regrouped per head (LlamaModel.permute), because llama.cpp's
//    LLAMA graph rotates adjacent pairs while Hugging Face rotates the two halves of a head; Qwen3
//    runs NEOX-style (halves) RoPE in llama.cpp and is written as is.
//  - llama3 rope_scaling: a rope_freqs.weight [head_dim / 2] F32 tensor of per-frequency divisors
//    (LlamaModel.generate_extra_tensors); no rope.scaling.* keys.
//  - tokenizer "gpt2" (byte-level BPE): tokens padded to vocab_size with "[PAD<i>]", token types,
//    merges, the pre-tokenizer named by its split regex, special ids and add_*_token flags as
//    gguf.SpecialVocab reads them, the chat template; sampling defaults from generation_config.json.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "model/config.h"
#include "model/gguf_writer.h"
#include "model/hub.h"
#include "model/safetensors.h"

namespace ditto {
namespace {

using nlohmann::json;

// gguf TokenType, LlamaFileType and GGML_QUANT_VERSION (gguf-py/gguf/constants.py).
constexpr int32_t kTokenNormal = 1, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5;
constexpr uint32_t kFileTypeAllF32 = 0, kFileTypeMostlyF16 = 1, kFileTypeMostlyBF16 = 32;
constexpr uint32_t kQuantizationVersion = 2;

// The split regex of tokenizer.json's pre-tokenizer -> llama.cpp's tokenizer.ggml.pre. The
// converter recognises a tokenizer by hashing its output on a test string; the regex is what
// decides llama.cpp's pre-tokenizer (src/llama-vocab.cpp: QWEN2 and LLAMA3 regexes).
const std::pair<const char*, const char*> kPreTokenizers[] = {
    {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
     "qwen2"},
    {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
     "llama-bpe"},
};

std::optional<json> read_json_if_present(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw_invalid_argument(path + ": not valid JSON: " + e.what());
  }
}

json read_json(const std::string& path) {
  std::optional<json> j = read_json_if_present(path);
  if (!j) throw_not_found(path + ": cannot read (export-gguf needs it)");
  return *std::move(j);
}

uint32_t to_u32(int64_t v, const std::string& what) {
  if (v < 0 || v > static_cast<int64_t>(UINT32_MAX)) {
    throw_invalid_argument(what + " = " + std::to_string(v) + " does not fit GGUF's u32");
  }
  return static_cast<uint32_t>(v);
}

// Python truthiness of a JSON value (`not x` in the converter).
bool truthy(const json& j) {
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_string() || j.is_object() || j.is_array()) return !j.empty();
  return j != 0;
}

// obj[key], or null when obj is not an object or lacks the key (a reference: no copy of the
// tokenizer's megabytes).
const json& value_or_null(const json& obj, const std::string& key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// An insertion-ordered map, as the converter's Python dicts are.
template <typename V>
struct Ordered {
  std::vector<std::pair<std::string, V>> items;
  V* find(const std::string& k) {
    for (auto& [key, v] : items) {
      if (key == k) return &v;
    }
    return nullptr;
  }
  void set(const std::string& k, V v) {
    if (V* p = find(k)) *p = std::move(v);
    else items.emplace_back(k, std::move(v));
  }
};

// ---- tokenizer (conversion/base.py get_vocab_base, gguf-py/gguf/vocab.py SpecialVocab) --------

struct GgufVocab {
  std::string pre;
  std::vector<std::string> tokens;   // [vocab_size]
  std::vector<int32_t> token_types;  // [vocab_size]
  std::vector<std::string> merges;   // "left right"
  Ordered<uint32_t> special_ids;     // "bos" -> id, in the order SpecialVocab finds them
  Ordered<bool> add_special;         // "bos" -> add_bos_token
  json chat_template;                // string, list of {name, template}, or null
  std::optional<bool> lowercase, strip_accents;
};

bool looks_special(const std::string& t) {  // TextModel.does_token_look_special
  auto wrapped = [&](const std::string& open, const std::string& close) {  // may overlap, as in Python
    return t.rfind(open, 0) == 0 && t.size() >= close.size() &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\uFF5C", "\uFF5C>") || wrapped("<unused", ">");
}

std::string pre_tokenizer_name(const json& tok, const std::string& path) {
  const json pre = value_or_null(tok, "pre_tokenizer");
  const json list = pre.is_object() && pre.value("type", "") == "Sequence"
                        ? value_or_null(pre, "pretokenizers")
                        : json::array({pre});
  for (const json& p : list) {
    if (!p.is_object() || p.value("type", "") != "Split") continue;
    const json regex = value_or_null(value_or_null(p, "pattern"), "Regex");
    for (const auto& [known, name] : kPreTokenizers) {
      if (regex.is_string() && regex.get<std::string>() == known) return name;
    }
    throw_invalid_argument(path + ": pre-tokenizer regex " + regex.dump() +
                           " is not one llama.cpp knows here (supported: the Qwen2/Qwen3 and "
                           "Llama 3 tokenizers)");
  }
  throw_invalid_argument(path + ": pre_tokenizer has no Split regex (supported: the Qwen2/Qwen3 and "
                         "Llama 3 byte-level BPE tokenizers)");
}

void parse_normalizer(const json& n, GgufVocab& v) {  // SpecialVocab._parse_normalizer
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type == "Lowercase") v.lowercase = true;
  if (type == "StripAccents") v.strip_accents = true;
  if (type == "BertNormalizer") {
    if (n.contains("lowercase") && n["lowercase"].is_boolean()) v.lowercase = n["lowercase"].get<bool>();
    if (n.contains("strip_accents") && n["strip_accents"].is_boolean()) {
      v.strip_accents = n["strip_accents"].get<bool>();
    }
  }
  if (type == "Sequence") {
    for (const json& m : value_or_null(n, "normalizers")) parse_normalizer(m, v);
  }
}

// SpecialVocab's crude reading of a TemplateProcessing post-processor: whether BOS / EOS / SEP
// are added, and which tokens they are when tokenizer_config.json does not say.
void read_template_processing(const json& proc, json& tc, Ordered<bool>& add,
                              std::vector<std::string>& types) {
  const json single = value_or_null(proc, "single"), pair = value_or_null(proc, "pair");
  auto special_id = [](const json& item) {
    return value_or_null(value_or_null(item, "SpecialToken"), "id");
  };
  json bos = value_or_null(tc, "bos_token"), cls = value_or_null(tc, "cls_token");
  json eos = value_or_null(tc, "eos_token"), sep = value_or_null(tc, "sep_token");
  json first, last;
  if (single.is_array() && single.size() > 1) {
    first = special_id(single.front());
    if (truthy(first)) {
      if (tc.empty()) {
        bos = first;
      } else if (first != bos && first != cls) {
        if (!truthy(bos)) tc["bos_token"] = bos = first;
        if (!truthy(cls)) tc["cls_token"] = cls = first;
      }
      add.set("bos", first == bos || first == cls);
    }
    last = special_id(single.back());
    if (truthy(last)) {
      if (tc.empty()) {
        eos = last;
      } else if (last != eos) {
        // The old EOS becomes EOT (or EOM) and the trailing token the EOS.
        for (const char* fallback : {"eot", "eom"}) {
          if (std::find(types.begin(), types.end(), fallback) == types.end()) {
            types.push_back(fallback);
            tc[std::string(fallback) + "_token"] = eos;
            break;
          }
        }
        tc["eos_token"] = eos = last;
      }
      add.set("eos", last == eos);
    }
  }
  if (!pair.is_array() || pair.empty()) return;
  size_t start = truthy(first) && special_id(pair.front()) == first ? 1 : 0;
  size_t stop = truthy(last) && special_id(pair.back()) == last ? pair.size() - 1 : pair.size();
  if (stop <= start) return;
  const json a = value_or_null(value_or_null(pair[start], "Sequence"), "id");
  const json b = value_or_null(value_or_null(pair[stop - 1], "Sequence"), "id");
  if (a != "A" || b != "B" || stop - start <= 2) return;
  // A [sep] [eos] B: SEP is added when the middle holds the separator or EOS.
  bool add_sep = false;
  const json mid0 = special_id(pair[start + 1]);
  if (truthy(mid0) && (mid0 == sep || mid0 == eos) && !truthy(last)) add_sep = true;
  if (stop - start - 2 == 2) {
    const json mid1 = special_id(pair[start + 2]);
    if (truthy(mid1) && (mid1 == sep || mid1 == eos)) add_sep = true;
  }
  add.set("sep", add_sep);
  if (add_sep && !truthy(sep) && !tc.empty()) tc["sep_token"] = eos;
}

GgufVocab read_vocab(const std::string& dir, const json& config, int64_t vocab_size) {
  const std::string tok_path = dir + "/tokenizer.json";
  const json tok = read_json(tok_path);
  json tc = read_json_if_present(dir + "/tokenizer_config.json").value_or(json::object());
  if (!tc.is_object()) throw_invalid_argument(dir + "/tokenizer_config.json: not a JSON object");
  const json& model = value_or_null(tok, "model");
  if (value_or_null(model, "type") != "BPE" || !value_or_null(model, "vocab").is_object()) {
    throw_invalid_argument(tok_path + ": model is not a BPE model with a vocab (export-gguf writes "
                           "byte-level BPE tokenizers only)");
  }
  GgufVocab v;
  v.pre = pre_tokenizer_name(tok, tok_path);

  // Tokens: the vocabulary, then added tokens, padded to config.json's vocab_size.
  std::map<int64_t, std::string> by_id;
  for (const auto& [content, id] : model["vocab"].items()) by_id[id.get<int64_t>()] = content;
  std::map<int64_t, json> added;  // id -> added token entry
  for (const json& a : value_or_null(tok, "added_tokens")) {
    by_id[a.at("id").get<int64_t>()] = a.at("content").get<std::string>();
    added[a.at("id").get<int64_t>()] = a;
  }
  if (!by_id.empty() && (by_id.begin()->first < 0 || by_id.rbegin()->first >= vocab_size)) {
    throw_invalid_argument(tok_path + ": token id " + std::to_string(by_id.rbegin()->first) +
                           " is outside config.json's vocab_size " + std::to_string(vocab_size));
  }
  for (int64_t i = 0; i < vocab_size; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      v.tokens.push_back("[PAD" + std::to_string(i) + "]");
      v.token_types.push_back(kTokenUnused);
      continue;
    }
    std::string token = it->second;
    auto a = added.find(i);
    if (a == added.end()) {
      v.token_types.push_back(kTokenNormal);
    } else if (a->second.value("special", false) || looks_special(token)) {
      v.token_types.push_back(kTokenControl);
    } else {
      for (size_t p; (p = token.find("\u2581")) != std::string::npos;) token.replace(p, 3, " ");
      v.token_types.push_back(kTokenUserDefined);
    }
    v.tokens.push_back(std::move(token));
  }

  // Merges: "left right"; the [left, right] form (tokenizers >= 0.20) spells a space as U+0120.
  for (const json& m : value_or_null(model, "merges")) {
    if (m.is_string()) {
      v.merges.push_back(m.get<std::string>());
      continue;
    }
    std::string joined;
    for (const json& part : m) {
      if (!joined.empty()) joined += ' ';
      for (char ch : part.get<std::string>()) {
        if (ch == ' ') joined += "\u0120";
        else joined += ch;
      }
    }
    v.merges.push_back(joined);
  }
  if (v.merges.empty()) throw_invalid_argument(tok_path + ": model.merges is empty");
  parse_normalizer(value_or_null(tok, "normalizer"), v);

  // Special tokens: the post-processor, then tokenizer_config.json, then config.json; the first
  // source to name a token wins.
  if (!truthy(value_or_null(tc, "bos_token")) && truthy(value_or_null(tc, "cls_token")) && !tc.empty()) {
    tc["bos_token"] = tc["cls_token"];
  }
  if (!truthy(value_or_null(tc, "eos_token")) && truthy(value_or_null(tc, "sep_token")) && !tc.empty()) {
    tc["eos_token"] = tc["sep_token"];
  }
  std::vector<std::string> types = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  const json post = value_or_null(tok, "post_processor");
  for (const json& proc : post.is_object() && post.contains("processors") ? post["processors"]
                                                                          : json::array({post})) {
    if (value_or_null(proc, "type") == "TemplateProcessing") {
      read_template_processing(proc, tc, v.add_special, types);
    } else if (value_or_null(proc, "type") == "RobertaProcessing") {
      for (const char* t : {"bos", "eos", "sep"}) v.add_special.set(t, true);
    }
  }
  auto set_id = [&](const std::string& type, const json& id) {
    if (!id.is_number_integer()) return;
    if (id.get<int64_t>() < 0) throw_invalid_argument("special token " + type + " has id " + id.dump());
    if (v.special_ids.find(type) == nullptr) v.special_ids.set(type, to_u32(id.get<int64_t>(), type));
  };
  if (!tc.empty()) {
    v.chat_template = tc.contains("chat_template") ? tc["chat_template"] : json();
    if (!tc.contains("chat_template")) {
      std::ifstream jinja(dir + "/chat_template.jinja", std::ios::binary);
      if (jinja) v.chat_template = std::string(std::istreambuf_iterator<char>(jinja), {});
      else v.chat_template = value_or_null(
               read_json_if_present(dir + "/chat_template.json").value_or(json()), "chat_template");
    }
    for (const std::string& type : types) {
      const json add = value_or_null(tc, "add_" + type + "_token");
      if (add.is_boolean()) v.add_special.set(type, add.get<bool>());
      const json& raw = value_or_null(tc, type + "_token");  // "<s>" or {"content": "<s>", ...}
      const json& entry = raw.is_object() ? value_or_null(raw, "content") : raw;
      if (!entry.is_string()) continue;
      for (const json& a : value_or_null(tok, "added_tokens")) {
        if (a.value("content", "") == entry.get<std::string>()) {
          set_id(type, a.at("id"));
          break;
        }
      }
    }
  }
  for (const std::string& type : types) set_id(type, value_or_null(config, type + "_token_id"));
  return v;
}

void add_vocab(GgufWriter& w, const GgufVocab& v) {
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", v.pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.add_string_array("tokenizer.ggml.merges", v.merges);
  static const std::map<std::string, std::string> kIdKeys = {
      {"bos", "bos_token_id"}, {"eos", "eos_token_id"},     {"unk", "unknown_token_id"},
      {"sep", "seperator_token_id"}, {"pad", "padding_token_id"}, {"mask", "mask_token_id"},
      {"eot", "eot_token_id"}, {"eom", "eom_token_id"}};  // no key for cls: the converter skips it
  for (const auto& [type, id] : v.special_ids.items) {
    if (auto k = kIdKeys.find(type); k != kIdKeys.end()) w.add_u32("tokenizer.ggml." + k->second, id);
  }
  for (const auto& [type, add] : v.add_special.items) {
    if (type == "bos" || type == "eos" || type == "sep") {
      w.add_bool("tokenizer.ggml.add_" + type + "_token", add);
    }
  }
  if (v.chat_template.is_string()) {
    w.add_string("tokenizer.chat_template", v.chat_template.get<std::string>());
  } else if (v.chat_template.is_array()) {  // named templates (GGUFWriter.add_chat_template)
    std::vector<std::string> names;
    json default_template;
    for (const json& t : v.chat_template) {
      std::string name = t.value("name", "");
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      if (name.empty() || !t.contains("template") || t["template"].is_null()) continue;
      if (name == "default") {
        default_template = t["template"];
      } else {
        names.push_back(name);
        w.add_string("tokenizer.chat_template." + name, t["template"].get<std::string>());
      }
    }
    if (!names.empty()) w.add_string_array("tokenizer.chat_templates", names);
    if (default_template.is_string()) {
      w.add_string("tokenizer.chat_template", default_template.get<std::string>());
    }
  }
  if (v.lowercase) w.add_bool("tokenizer.ggml.normalizer.lowercase", *v.lowercase);
  if (v.strip_accents) w.add_bool("tokenizer.ggml.normalizer.strip_accents", *v.strip_accents);
}

// ---- metadata ----------------------------------------------------------------------------------

// general.size_label: gguf.utility.model_weight_count_rounded_notation ("596M", "1.2B").
std::string size_label(uint64_t n) {
  const double x = static_cast<double>(n);
  const auto [scaled, suffix] = x > 1e12 ? std::pair(x * 1e-12, 'T')
                                : x > 1e9 ? std::pair(x * 1e-9, 'B')
                                : x > 1e6 ? std::pair(x * 1e-6, 'M')
                                          : std::pair(x * 1e-3, 'K');
  std::string digits = std::to_string(static_cast<long long>(std::nearbyint(scaled)));
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  const int fix = std::max(2 - static_cast<int>(digits.size()), 0);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f%c", fix, scaled, suffix);
  return buf;
}

// What llama.cpp's qwen3moe can hold (src/models/qwen3moe.cpp): ffn_gate_inp and *_exps on every
// layer, top-k weights always renormalised.
void check_moe_exportable(const ModelConfig& c, const std::string& config_path) {
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.is_moe_layer(layer)) continue;
    std::string only;
    for (int64_t l : c.mlp_only_layers) only += (only.empty() ? "" : ", ") + std::to_string(l);
    throw_invalid_argument(
        config_path + ": layer " + std::to_string(layer) + " is dense (mlp_only_layers = [" + only +
        "], decoder_sparse_step = " + std::to_string(c.decoder_sparse_step) +
        "); llama.cpp's qwen3moe architecture has a sparse MoE block on every layer and no dense MLP "
        "tensors (convert_hf_to_gguf.py cannot map model.layers." + std::to_string(layer) +
        ".mlp.gate_proj.weight either)");
  }
  if (!c.norm_topk_prob) {
    std::fprintf(stderr,
                 "warning: %s: norm_topk_prob is false, but llama.cpp's qwen3moe always renormalises "
                 "the top-k routing weights (no GGUF key says otherwise; convert_hf_to_gguf.py writes "
                 "the same file): llama.cpp will not compute this model as Hugging Face does\n",
                 config_path.c_str());
  }
}

// general.sampling.* from generation_config.json (gguf.Metadata.load), in the converter's order.
void add_sampling(GgufWriter& w, const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  const std::optional<json> g = read_json_if_present(path);
  if (!g) return;
  if (!g->is_object()) throw_invalid_argument(path + ": not a JSON object");
  struct Key { const char* hf; const char* alt; const char* gguf; char kind; };  // s, i, f
  static const Key kKeys[] = {
      {"sequence", "", "sequence", 's'},         {"top_k", "", "top_k", 'i'},
      {"top_p", "", "top_p", 'f'},               {"min_p", "", "min_p", 'f'},
      {"xtc_probability", "", "xtc_probability", 'f'}, {"xtc_threshold", "", "xtc_threshold", 'f'},
      {"temperature", "", "temp", 'f'},          {"penalty_last_n", "", "penalty_last_n", 'i'},
      {"penalty_repeat", "repetition_penalty", "penalty_repeat", 'f'},
      {"mirostat", "", "mirostat", 'i'},         {"mirostat_tau", "", "mirostat_tau", 'f'},
      {"mirostat_eta", "", "mirostat_eta", 'f'}};
  for (const Key& k : kKeys) {
    const char* name = g->contains(k.hf) ? k.hf : k.alt;
    if (!g->contains(name) || (*g)[name].is_null()) continue;
    const json& val = (*g)[name];
    const std::string key = std::string("general.sampling.") + k.gguf;
    const bool ok = k.kind == 's'   ? val.is_string()
                    : k.kind == 'i' ? val.is_number_integer()
                                    : val.is_number();
    if (!ok) throw_invalid_argument(path + ": " + name + " = " + val.dump() + " has the wrong type");
    if (k.kind == 's') w.add_string(key, val.get<std::string>());
    if (k.kind == 'i') w.add_i32(key, val.get<int32_t>());
    if (k.kind == 'f') w.add_f32(key, val.get<float>());
  }
}

// ---- tensors -----------------------------------------------------------------------------------

// GGUF name of a Hugging Face tensor (gguf-py/gguf/tensor_mapping.py), "" when it has none.
std::string gguf_tensor_name(const std::string& hf) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"self_attn.q_proj", "attn_q"},        {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},        {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},   {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},         {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},         {"mlp.gate", "ffn_gate_inp"},
      {"input_layernorm", "attn_norm"},      {"post_attention_layernorm", "ffn_norm"}};
  if (auto it = kTop.find(hf); it != kTop.end()) return it->second;
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  const size_t last = hf.rfind('.');
  if (dot == std::string::npos || last <= dot) return "";
  auto it = kLayer.find(hf.substr(dot + 1, last - dot - 1));
  if (it == kLayer.end()) return "";
  return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + it->second + hf.substr(last);
}

struct TensorPlan {
  GgufTensorSpec spec;
  // Written back to back: one checkpoint tensor, or one per expert (stacked experts: the experts
  // become the outermost dimension, so the bytes are simply consecutive). Empty: `generated`.
  std::vector<const TensorInfo*> sources;
  int64_t head_dim = 0;  // > 0: rows regrouped per head of this size (llama q/k)
  std::vector<float> generated;
};

// llama3 rope_freqs: per frequency, the divisor llama.cpp applies to θ_i
// (LlamaModel.generate_extra_tensors, after transformers' _compute_llama3_parameters).
std::vector<float> llama3_rope_freqs(const ModelConfig& c) {
  const RopeScaling& s = *c.rope_scaling;
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const double freq = 1.0 / std::pow(c.rope_theta, static_cast<double>(i) / c.head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(s.factor));
    } else {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

constexpr std::string_view kLayerPrefix = "model.layers.";  // then "<layer>."

// A layer's experts as the converter merges them (Qwen2MoeModel.modify_tensors: torch.stack over
// the expert index, then down_proj, gate_proj, up_proj): [num_experts, out_features, in_features].
void plan_stacked_experts(const ModelConfig& c, const WeightStore& store, int64_t layer,
                          std::vector<TensorPlan>& plan) {
  const std::string p = std::string(kLayerPrefix) + std::to_string(layer) + ".mlp.experts.";
  for (const char* proj : {"down", "gate", "up"}) {
    TensorPlan tp;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      tp.sources.push_back(&store.get(p + std::to_string(e) + "." + proj + "_proj.weight"));
      if (tp.sources.back()->dtype != tp.sources.front()->dtype) {
        throw_invalid_argument("tensor '" + tp.sources.back()->name + "' is " +
                               std::string(dtype_name(tp.sources.back()->dtype)) + " but expert 0's is " +
                               std::string(dtype_name(tp.sources.front()->dtype)) +
                               ": a layer's experts are stacked into one GGUF tensor of one type");
      }
    }
    const TensorInfo& first = *tp.sources.front();
    tp.spec.name = "blk." + std::to_string(layer) + ".ffn_" + proj + "_exps.weight";
    tp.spec.shape = {c.num_experts, first.shape[0], first.shape[1]};
    tp.spec.type = ggml_type_of(first.dtype);
    plan.push_back(std::move(tp));
  }
}

std::vector<TensorPlan> plan_tensors(const ModelConfig& c, const WeightStore& store, bool is_llama) {
  std::vector<TensorPlan> plan;
  if (c.rope_scaling) {
    if (!is_llama) {
      throw_invalid_argument("rope_scaling '" + c.rope_scaling->rope_type + "' cannot be exported "
                             "for " + c.model_type + ": llama.cpp reads it (as rope_freqs) only for llama");
    }
    TensorPlan p;
    p.generated = llama3_rope_freqs(c);
    p.spec = {"rope_freqs.weight", GgmlType::kF32, {static_cast<int64_t>(p.generated.size())}};
    plan.push_back(std::move(p));
  }
  for (const TensorSpec& t : expected_tensors(c)) {
    // Experts are planned, stacked, right after their layer's router.
    if (t.name.find(".mlp.experts.") != std::string::npos) continue;
    TensorPlan p;
    const TensorInfo& source = store.get(t.name);
    p.sources = {&source};
    p.spec.name = gguf_tensor_name(t.name);
    if (p.spec.name.empty()) throw_invalid_argument("tensor '" + t.name + "' has no GGUF name");
    p.spec.shape = source.shape;
    const bool router = p.spec.name.ends_with(".ffn_gate_inp.weight");
    const bool f32 = p.spec.shape.size() == 1 || p.spec.name.ends_with("_norm.weight") || router;
    p.spec.type = f32 ? GgmlType::kF32 : ggml_type_of(source.dtype);
    if (is_llama && (t.name.find("self_attn.q_proj.") != std::string::npos ||
                     t.name.find("self_attn.k_proj.") != std::string::npos)) {
      if (c.head_dim % 2 != 0) throw_invalid_argument("head_dim " + std::to_string(c.head_dim) + " is odd");
      p.head_dim = c.head_dim;
    }
    plan.push_back(std::move(p));
    if (router) plan_stacked_experts(c, store, std::stoll(t.name.substr(kLayerPrefix.size())), plan);
  }
  return plan;
}

// Source row of output row r in LlamaModel.permute: a head's rows [x_0..x_{d/2-1}, y_0..] become
// [x_0, y_0, x_1, y_1, ...] (reshape(n_head, 2, d/2).swapaxes(1, 2)).
int64_t permuted_row(int64_t r, int64_t head_dim) {
  const int64_t w = r % head_dim;
  return r - w + (w % 2) * (head_dim / 2) + w / 2;
}

// Streams one checkpoint tensor from the mmap: straight when nothing changes, else by rows
// (permute) or 64k-element chunks (to f32); its pages are dropped from the resident set once written.
void write_source(GgufWriter& w, const TensorPlan& p, const TensorInfo& t, const WeightStore& store) {
  const bool to_f32 = p.spec.type != ggml_type_of(t.dtype);
  const size_t in_size = dtype_size(t.dtype);
  std::vector<float> buf;
  auto emit = [&](const uint8_t* src, int64_t n) {
    if (!to_f32) return w.write_tensor_data(src, static_cast<size_t>(n) * in_size);
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buf[i] = load_as_f32(src, t.dtype, static_cast<size_t>(i));
    w.write_tensor_data(buf.data(), buf.size() * sizeof(float));
  };
  if (p.head_dim > 0) {
    const int64_t rows = t.shape[0], cols = t.numel() / rows;
    for (int64_t r = 0; r < rows; ++r) emit(t.data + permuted_row(r, p.head_dim) * cols * in_size, cols);
  } else if (to_f32) {
    constexpr int64_t kChunk = 1 << 16;
    for (int64_t i = 0; i < t.numel(); i += kChunk) {
      emit(t.data + i * in_size, std::min(kChunk, t.numel() - i));
    }
  } else {  // a straight copy, its pages dropped as it goes: resident memory stays one chunk
    constexpr size_t kCopyChunk = size_t{16} << 20;
    for (size_t done = 0; done < t.nbytes; done += kCopyChunk) {
      const size_t n = std::min(kCopyChunk, t.nbytes - done);
      w.write_tensor_data(t.data + done, n);
      if (t.file != nullptr) t.file->release(t.file_offset + done, n);
    }
  }
  store.release(t);
}

void write_tensor(GgufWriter& w, const TensorPlan& p, const WeightStore& store) {
  if (p.sources.empty()) {
    w.write_tensor_data(p.generated.data(), p.generated.size() * sizeof(float));
    return;
  }
  for (const TensorInfo* t : p.sources) write_source(w, p, *t, store);
}

// general.size_label as prepare_metadata computes it (gguf_writer.get_total_parameter_count,
// gguf.size_label): the parameter count, or for MoE "<experts>x<shared + one expert's>" ("128x1.8B").
std::string plan_size_label(const std::vector<TensorPlan>& plan) {
  uint64_t total = 0, shared = 0, per_expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const TensorPlan& p : plan) {
    const uint64_t n = p.spec.nbytes() / ggml_type_size(p.spec.type);
    total += n;
    if (p.spec.name.find("_exps.") != std::string::npos && p.spec.shape.size() >= 3) {
      const auto experts = static_cast<uint64_t>(p.spec.shape[0]);
      per_expert += n / experts;
      expert_sum += experts;
      ++expert_tensors;
    } else {
      shared += n;
    }
  }
  if (expert_tensors == 0) return size_label(total);
  return std::to_string(expert_sum / expert_tensors) + "x" + size_label(shared + per_expert);
}

// ---- the command -------------------------------------------------------------------------------

struct ExportFlags {
  std::string model;
  std::string output;
};

void run(const ExportFlags& f) {
  const std::string dir = resolve_model_path(f.model);
  const std::string config_path = dir + "/config.json";
  const json config_json = read_json(config_path);
  const json archs = value_or_null(config_json, "architectures");
  const std::string arch_name = archs.is_array() && !archs.empty() && archs[0].is_string()
                                    ? archs[0].get<std::string>() : "";
  // Checked before parsing, so that an architecture ditto runs but cannot export or does not know
  // at all gets the same message.
  static const std::map<std::string, std::string> kArchs = {
      {"Qwen3ForCausalLM", "qwen3"}, {"Qwen3MoeForCausalLM", "qwen3moe"}, {"LlamaForCausalLM", "llama"}};
  if (!arch_name.empty() && kArchs.count(arch_name) == 0) {
    throw_invalid_argument(config_path + ": architecture '" + arch_name + "' cannot be exported "
                           "to GGUF (supported: Qwen3ForCausalLM, Qwen3MoeForCausalLM, LlamaForCausalLM)");
  }
  const ModelConfig c = parse_model_config(config_json, config_path);
  const bool is_llama = c.architecture == "LlamaForCausalLM";
  const std::string arch = kArchs.at(c.architecture);
  if (arch == "qwen3moe") check_moe_exportable(c, config_path);
  const WeightStore store = WeightStore::open(dir);
  validate_weights(c, store);
  const std::vector<TensorPlan> plan = plan_tensors(c, store, is_llama);
  GgufVocab vocab;
  try {
    vocab = read_vocab(dir, config_json, c.vocab_size);
  } catch (const json::exception& e) {  // a field of the wrong type or missing
    throw_invalid_argument(dir + "/tokenizer.json (or tokenizer_config.json): unexpected structure: " +
                           e.what());
  }

  uint32_t file_type = kFileTypeMostlyF16;  // the converter's fallback
  bool file_type_set = false;
  for (const TensorPlan& p : plan) {
    if (!p.sources.empty() && p.spec.shape.size() >= 2 && !file_type_set) {
      const DType dtype = p.sources.front()->dtype;
      file_type = dtype == DType::kBF16 ? kFileTypeMostlyBF16
                  : dtype == DType::kF16 ? kFileTypeMostlyF16 : kFileTypeAllF32;
      file_type_set = true;
    }
  }

  // Writing over one of the model's own files would truncate weights that are still being read
  // (memory-mapped): refuse, whatever path or symlink names it.
  if (std::filesystem::exists(f.output)) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (std::filesystem::equivalent(entry.path(), f.output, ec))
        throw_invalid_argument("--output '" + f.output + "' is " + entry.path().string() +
                               ", a file of the model being exported; write the GGUF elsewhere");
  }
  GgufWriter w(f.output);
  w.add_string("general.architecture", arch);
  w.add_string("general.type", "model");
  add_sampling(w, dir);
  std::string name = std::filesystem::path(f.model).filename().string();
  if (name.empty()) name = std::filesystem::path(dir).filename().string();
  w.add_string("general.name", name);
  const std::string label = plan_size_label(plan);
  w.add_string("general.size_label", label);
  const std::string a = arch + ".";
  w.add_u32(a + "block_count", to_u32(c.num_hidden_layers, "num_hidden_layers"));
  w.add_u32(a + "context_length", to_u32(c.max_position_embeddings, "max_position_embeddings"));
  w.add_u32(a + "embedding_length", to_u32(c.hidden_size, "hidden_size"));
  w.add_u32(a + "feed_forward_length", to_u32(c.intermediate_size, "intermediate_size"));
  w.add_u32(a + "attention.head_count", to_u32(c.num_attention_heads, "num_attention_heads"));
  w.add_u32(a + "attention.head_count_kv", to_u32(c.num_key_value_heads, "num_key_value_heads"));
  w.add_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  if (c.is_moe()) {
    w.add_u32(a + "expert_count", to_u32(c.num_experts, "num_experts"));
    w.add_u32(a + "expert_used_count", to_u32(c.num_experts_per_tok, "num_experts_per_tok"));
  }
  // Written even when config.json leaves head_dim to its default (the converter then omits them
  // and llama.cpp assumes hidden_size / num_attention_heads, wrong for Qwen3's default 128).
  w.add_u32(a + "attention.key_length", to_u32(c.head_dim, "head_dim"));
  w.add_u32(a + "attention.value_length", to_u32(c.head_dim, "head_dim"));
  w.add_u32("general.file_type", file_type);
  if (c.is_moe()) {  // Qwen2MoeModel.set_gguf_parameters, after TextModel's
    w.add_u32(a + "expert_feed_forward_length", to_u32(c.moe_intermediate_size, "moe_intermediate_size"));
  }
  if (is_llama) {
    w.add_u32(a + "vocab_size", to_u32(c.vocab_size, "vocab_size"));
    w.add_u32(a + "rope.dimension_count", to_u32(c.head_dim, "head_dim"));
  }
  w.add_u32("general.quantization_version", kQuantizationVersion);
  if (is_llama) {
    const json tc = read_json_if_present(dir + "/tokenizer_config.json").value_or(json::object());
    const json prefix = value_or_null(tc, "add_prefix_space");
    if (prefix.is_boolean()) w.add_bool("tokenizer.ggml.add_space_prefix", prefix.get<bool>());
  }
  add_vocab(w, vocab);

  for (const TensorPlan& p : plan) w.add_tensor(p.spec);
  for (const TensorPlan& p : plan) write_tensor(w, p, store);
  w.finish();
  std::printf("wrote %s: %s, %zu tensors, %s parameters, %llu bytes\n", f.output.c_str(), arch.c_str(),
              plan.size(), label.c_str(), static_cast<unsigned long long>(w.bytes_written()));
}

}  // namespace

void add_export_gguf_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-gguf",
      "Write a Qwen3 / Qwen3-MoE / Llama model directory as GGUF, as llama.cpp's convert_hf_to_gguf.py "
      "does");
  cmd->add_option("--model", flags->model, "Model directory or Hugging Face hub id (local cache)")
      ->required();
  cmd->add_option("--output", flags->output, "GGUF file to write (replaced if it exists)")->required();
  cmd->callback([flags] { run(*flags); });
}

}  // namespace ditto
