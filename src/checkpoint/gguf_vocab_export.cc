#include "checkpoint/gguf_vocab_export.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/json_file.h"

namespace ditto {
namespace {

using nlohmann::json;

// gguf TokenType (gguf-py/gguf/constants.py).
constexpr int32_t kTokenNormal = 1, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5;

// The split regex of tokenizer.json's pre-tokenizer -> llama.cpp's tokenizer.ggml.pre. The
// converter recognises a tokenizer by hashing its output on a test string; the regex is what
// decides llama.cpp's pre-tokenizer (src/llama-vocab.cpp: QWEN2 and LLAMA3 regexes).
const std::pair<const char*, const char*> kPreTokenizers[] = {
    {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
     "qwen2"},
    {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
     "llama-bpe"},
};

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

bool looks_special(const std::string& t) {                                 // TextModel.does_token_look_special
  auto wrapped = [&](const std::string& open, const std::string& close) {  // may overlap, as in Python
    return t.rfind(open, 0) == 0 && t.size() >= close.size() &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\uFF5C", "\uFF5C>") || wrapped("<unused", ">");
}

std::string pre_tokenizer_name(const json& tok, const std::string& path) {
  const json pre = value_or_null(tok, "pre_tokenizer");
  const json list =
      pre.is_object() && pre.value("type", "") == "Sequence" ? value_or_null(pre, "pretokenizers") : json::array({pre});
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
  throw_invalid_argument(path +
                         ": pre_tokenizer has no Split regex (supported: the Qwen2/Qwen3 and "
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
void read_template_processing(const json& proc, json& tc, OrderedMap<bool>& add, std::vector<std::string>& types) {
  const json single = value_or_null(proc, "single"), pair = value_or_null(proc, "pair");
  auto special_id = [](const json& item) { return value_or_null(value_or_null(item, "SpecialToken"), "id"); };
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

// "\u2581" (SentencePiece's space) as " "; built anew: GCC 12 warns on replace().
std::string spaced(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    if (token.compare(i, 3, "\u2581") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += token[i++];
    }
  }
  return out;
}

// Tokens and their types: the vocabulary, then added tokens, padded to config.json's vocab_size.
void read_tokens(const json& tok, const json& model, int64_t vocab_size, const std::string& tok_path, GgufVocab& v) {
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
      token = spaced(token);
      v.token_types.push_back(kTokenUserDefined);
    }
    v.tokens.push_back(std::move(token));
  }
}

// Merges: "left right"; the [left, right] form (tokenizers >= 0.20) spells a space as U+0120.
std::vector<std::string> read_merges(const json& model) {
  std::vector<std::string> merges;
  for (const json& m : value_or_null(model, "merges")) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
      continue;
    }
    std::string joined;
    for (const json& part : m) {
      if (!joined.empty()) joined += ' ';
      for (char ch : part.get<std::string>()) {
        if (ch == ' ')
          joined += "\u0120";
        else
          joined += ch;
      }
    }
    merges.push_back(joined);
  }
  return merges;
}

// The chat template: tokenizer_config.json's, else chat_template.jinja's text, else
// chat_template.json's; null when none says.
json read_chat_template(const json& tc, const std::string& dir) {
  if (tc.contains("chat_template")) return tc["chat_template"];
  const std::string jinja = dir + "/chat_template.jinja";
  if (std::filesystem::exists(jinja)) return read_text_file(jinja);
  return value_or_null(
      read_json_file_if_present(dir + "/chat_template.json", /*require_object=*/false).value_or(json()),
      "chat_template");
}

// Records `id` as the special token `type` unless an earlier source named one; ignores a
// non-integer id.
void set_special_id(GgufVocab& v, const std::string& type, const json& id) {
  if (!id.is_number_integer()) return;
  if (id.get<int64_t>() < 0) throw_invalid_argument("special token " + type + " has id " + id.dump());
  if (v.special_ids.find(type) == nullptr) v.special_ids.set(type, gguf_u32(id.get<int64_t>(), type));
}

// tokenizer_config.json's add_<type>_token flags and <type>_token texts, each text resolved to its
// id through the added tokens.
void read_tokenizer_config_specials(const json& tok, const json& tc, const std::vector<std::string>& types,
                                    GgufVocab& v) {
  for (const std::string& type : types) {
    const json add = value_or_null(tc, "add_" + type + "_token");
    if (add.is_boolean()) v.add_special.set(type, add.get<bool>());
    const json& raw = value_or_null(tc, type + "_token");  // "<s>" or {"content": "<s>", ...}
    const json& entry = raw.is_object() ? value_or_null(raw, "content") : raw;
    if (!entry.is_string()) continue;
    for (const json& a : value_or_null(tok, "added_tokens")) {
      if (a.value("content", "") == entry.get<std::string>()) {
        set_special_id(v, type, a.at("id"));
        break;
      }
    }
  }
}

}  // namespace

GgufVocab read_gguf_vocab(const std::string& dir, const json& config, int64_t vocab_size) {
  const std::string tok_path = dir + "/tokenizer.json";
  const json tok = read_json_file(tok_path, /*require_object=*/false);
  json tc = read_json_file_if_present(dir + "/tokenizer_config.json").value_or(json::object());
  const json& model = value_or_null(tok, "model");
  if (value_or_null(model, "type") != "BPE" || !value_or_null(model, "vocab").is_object()) {
    throw_invalid_argument(tok_path +
                           ": model is not a BPE model with a vocab (export-gguf writes "
                           "byte-level BPE tokenizers only)");
  }
  GgufVocab v;
  if (const json& prefix = value_or_null(tc, "add_prefix_space"); prefix.is_boolean()) {
    v.add_prefix_space = prefix.get<bool>();
  }
  v.pre = pre_tokenizer_name(tok, tok_path);
  read_tokens(tok, model, vocab_size, tok_path, v);
  v.merges = read_merges(model);
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
  for (const json& proc : post.is_object() && post.contains("processors") ? post["processors"] : json::array({post})) {
    if (value_or_null(proc, "type") == "TemplateProcessing") {
      read_template_processing(proc, tc, v.add_special, types);
    } else if (value_or_null(proc, "type") == "RobertaProcessing") {
      for (const char* t : {"bos", "eos", "sep"}) v.add_special.set(t, true);
    }
  }
  if (!tc.empty()) {
    v.chat_template = read_chat_template(tc, dir);
    read_tokenizer_config_specials(tok, tc, types, v);
  }
  for (const std::string& type : types) set_special_id(v, type, value_or_null(config, type + "_token_id"));
  return v;
}

void add_gguf_vocab(GgufWriter& w, const GgufVocab& v) {
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", v.pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.add_string_array("tokenizer.ggml.merges", v.merges);
  for (const auto& [type, id] : v.special_ids.items) {  // no key for cls: the converter skips it
    const auto& keys = gguf_special_id_keys();
    const std::string_view name = type;  // clang before 16 cannot capture a structured binding
    const auto k = std::find_if(keys.begin(), keys.end(), [&](const GgufSpecialIdKey& e) { return e.name == name; });
    if (k != keys.end()) w.add_u32(k->key, id);
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

}  // namespace ditto
