#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/json_file.h"

namespace ditto {

using nlohmann::json;

const std::vector<GgufSpecialIdKey>& gguf_special_id_keys() {
  static const std::vector<GgufSpecialIdKey> kKeys = {
      {"bos", "tokenizer.ggml.bos_token_id"},
      {"eos", "tokenizer.ggml.eos_token_id"},
      {"eot", "tokenizer.ggml.eot_token_id"},
      {"eom", "tokenizer.ggml.eom_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"},
      {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"},
      {"mask", "tokenizer.ggml.mask_token_id"},
      {"fim_pre", "tokenizer.ggml.fim_pre_token_id"},
      {"fim_suf", "tokenizer.ggml.fim_suf_token_id"},
      {"fim_mid", "tokenizer.ggml.fim_mid_token_id"},
      {"fim_pad", "tokenizer.ggml.fim_pad_token_id"},
      {"fim_rep", "tokenizer.ggml.fim_rep_token_id"},
      {"fim_sep", "tokenizer.ggml.fim_sep_token_id"},
      // Older files' names for the first three FIM tokens; llama.cpp reads them after the new ones.
      {"fim_pre", "tokenizer.ggml.prefix_token_id"},
      {"fim_suf", "tokenizer.ggml.suffix_token_id"},
      {"fim_mid", "tokenizer.ggml.middle_token_id"}};
  return kKeys;
}

namespace {

// How llama.cpp pre-tokenizes for one family of tokenizer.ggml.pre names (llm_tokenizer_bpe and
// llama_vocab::impl::load in src/llama-vocab.cpp). llama.cpp applies `regexes` in turn, each
// splitting every piece of the previous one into its matches and the gaps between them (Hugging
// Face's Split with behavior Isolated), either with hand-written matchers (the GPT-2, Llama 3,
// Qwen2 and Qwen3.5 regexes) or with std::regex on a copy of the text where each non-ASCII
// character stands for its Unicode category. The patterns here are written for PCRE2 on the real
// text so that they match the same spans:
//   - contractions as '[sS] ... rather than (?i:'s ...): PCRE2 would fold 'ſ' (U+017F) into s;
//   - \d as [0-9] and $ as \z, std::regex's meanings;
//   - classes of non-ASCII characters never match non-ASCII white space, which llama.cpp turns
//     into \v before matching (hence the (?!\s) guards);
//   - the GPT-2 regex ends with |\s+ as llama.cpp's matcher for it does (the same split as
//     llama.cpp's spelling without it, whose unmatched runs become gaps).
struct PreTokenizerMapping {
  std::vector<std::string> names;    // tokenizer.ggml.pre values
  std::vector<std::string> regexes;  // applied in order
  bool ignore_merges = false;        // a pre-token that is a whole token skips the merges
  bool add_bos = false;              // llama.cpp's add_bos when tokenizer.ggml.add_bos_token is absent
  bool default_bos = true;           // false: no BOS unless tokenizer.ggml.bos_token_id names one
};

const std::string kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kContractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
const std::string kLlama3Regex =
    kContractions + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2Regex =
    kContractions + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen35Regex =
    kContractions + R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kPunctuationRegex = R"([\p{P}\$\+<=>\^~\|]+)";
// Upper-then-lower and lower-only letter runs, as llama.cpp spells Tekken's and GPT-4o's
// \p{Lu}/\p{Ll} classes (a non-ASCII letter counts as both cases).
const std::string kUpperLower = R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])*(?:(?=\p{L})[^A-Z])+)";
const std::string kUpperOnly = R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])+(?:(?=\p{L})[^A-Z])*)";
// Poro / Bloom: runs of anything but white space and ( | ) . , ! ? … 。 ， 、 । ۔ ،
const std::string kPoroRegex = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";
// CJK ideographs U+4E00-U+9FA5, U+0800-U+4E00 (sic) and Hangul U+AC00-U+D7FF.
const std::string kDeepseekCjkRegex = R"((?:(?!\s)[\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}])+)";

const std::vector<PreTokenizerMapping>& pre_tokenizer_mappings() {
  static const std::vector<PreTokenizerMapping> kMappings = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {kLlama3Regex},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3Regex}},
      {{"chatglm-bpe", "glm4"}, {kLlama3Regex}, false, false, /*default_bos=*/false},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
       {kQwen2Regex}},
      {{"qwen35"}, {kQwen35Regex}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "a.x-4.0", "mellum", "exaone4", "mpt", "olmo", "jais",
        "trillion", "granite-docling"},
       {kGpt2Regex}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"(\p{N})", kGpt2Regex}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"}},  // with a backtick
      {{"default"}, {kPunctuationRegex, kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"},
       {R"([\r\n])",
        R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
        R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
        R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
        R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
        R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
        R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
        R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
        R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
        R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
        R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
        R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
        R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
        R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
        // Its U+3000-U+3002 range starts at a white space character, which never matches there.
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3001}-\x{3002}]+)", R"(\s+\z)",
        kDeepseekCjkRegex, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjkRegex, R"(\p{N})"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoroRegex}},
      {{"viking"}, {kPoroRegex, R"(\p{N})"}},
      {{"tekken"},
       {kUpperLower + "|" + kUpperOnly + R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
       {kUpperLower + kContractions + "?|" + kUpperOnly + kContractions +
        R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"superbpe"}, {R"(\p{N}+)", R"((?=(?:[0-9]{3})+(?![0-9])))"}},
  };
  return kMappings;
}

// tokenizer.ggml.pre names llama.cpp knows whose splitting ditto does not reproduce (custom
// matchers, per-token strip flags, or a tokenizer other than byte-level BPE).
const char* const kUnmappedLlamaCppPre[] = {"deepseek-v3",
                                            "youtu",
                                            "jais-2",
                                            "gemma4",
                                            "granite-embed-multi-311m",
                                            "sarvam-moe",
                                            "jina-v1-en",
                                            "jina-v2-code",
                                            "roberta-bpe",
                                            "jina-v2-es",
                                            "jina-v2-de",
                                            "modern-bert",
                                            "whitespace",
                                            "minicpm5",
                                            "exaone-moe",
                                            "chameleon",
                                            "granite-embed-multi-97m",
                                            "tiny_aya",
                                            "cohere2moe",
                                            "bailingmoe",
                                            "bailingmoe2",
                                            "llada-moe",
                                            "seed-coder",
                                            "hunyuan-dense",
                                            "joyai-llm",
                                            "kimi-k2",
                                            "afmoe",
                                            "laguna"};

// llama_token_attr bits that decide matching and decoding.
enum : uint8_t {
  kAttrNormal = 1,
  kAttrUnknown = 2,
  kAttrControl = 4,
  kAttrUserDefined = 8,
  kAttrUnused = 16,
  kAttrByte = 32,
};

uint8_t attr_of_type(int32_t type) {  // LLAMA_TOKEN_TYPE -> attribute; undefined types have none
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return 0;
  }
}

// Tokens llama.cpp recognises by their text at load (llama_vocab::impl::load).
const char* const kEndOfGenerationNames[] = {"<|eot_id|>",
                                             "<|im_end|>",
                                             "<|end|>",
                                             "<|return|>",
                                             "<|call|>",
                                             "<|flush|>",
                                             "<|calls|>",
                                             "<end_of_turn>",
                                             "<|endoftext|>",
                                             "</s>",
                                             "<|eom_id|>",
                                             "<EOT>",
                                             "_<EOT>",
                                             "[EOT]",
                                             "[EOS]",
                                             "<|end_of_text|>",
                                             "<end_of_utterance>",
                                             "<eos>",
                                             "<turn|>",
                                             "<|tool_response>",
                                             "<\uFF5Cend\u2581of\u2581sentence\uFF5C>",
                                             "[e~["};
struct FimNames {
  const char* name;  // special_ids name
  std::vector<const char*> texts;
};
const std::vector<FimNames>& fim_names() {
  static const std::vector<FimNames> kNames = {
      {"fim_pre",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uFF5Cfim\u2581begin\uFF5C>", "<PRE>", "\u2581<PRE>",
        "<|code_prefix|>", "<|prefix|>"}},
      {"fim_suf",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uFF5Cfim\u2581hole\uFF5C>", "<SUF>", "\u2581<SUF>",
        "<|code_suffix|>", "<|suffix|>"}},
      {"fim_mid",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uFF5Cfim\u2581end\uFF5C>", "<MID>", "\u2581<MID>",
        "<|code_middle|>", "<|middle|>"}},
      {"fim_pad", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {"fim_rep", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {"fim_sep", {"<|file_sep|>"}}};
  return kNames;
}

constexpr int32_t kNoToken = -1;

const PreTokenizerMapping& find_pre_tokenizer(const std::string& pre, const std::string& source) {
  const std::string name = pre.empty() ? "default" : pre;  // llama.cpp: absent means "default"
  for (const PreTokenizerMapping& m : pre_tokenizer_mappings()) {
    if (std::find(m.names.begin(), m.names.end(), name) != m.names.end()) return m;
  }
  std::string supported;
  for (const std::string& n : supported_gguf_pre_tokenizers()) supported += (supported.empty() ? "" : ", ") + n;
  const bool known = std::find(std::begin(kUnmappedLlamaCppPre), std::end(kUnmappedLlamaCppPre), name) !=
                     std::end(kUnmappedLlamaCppPre);
  throw_invalid_argument(
      source + ": tokenizer.ggml.pre '" + name + "' is " +
      (known ? "a llama.cpp pre-tokenizer ditto does not reproduce" : "not a pre-tokenizer llama.cpp knows") +
      " (supported: " + supported + ")");
}

// A token as a JSON string; a token that is not valid UTF-8 has no tokenizer.json form.
std::string json_string(const std::string& token, size_t index, const std::string& source) {
  try {
    return json(token).dump();
  } catch (const json::type_error&) {
    throw_invalid_argument(source + ": tokenizer.ggml.tokens[" + std::to_string(index) +
                           "] is not valid UTF-8 (byte-level BPE tokens always are)");
  }
}

// The token attributes llama.cpp ends up with after its load-time corrections, and its
// end-of-generation ids. `ids` holds the special ids by name (kNoToken when none).
struct LlamaAttributes {
  std::vector<uint8_t> attrs;  // [vocab_size]
  std::set<int32_t> eog;
};
LlamaAttributes llama_attributes(const GgufVocab& v, const std::vector<std::string>& tokens,
                                 std::map<std::string, int32_t>& ids) {
  LlamaAttributes a;
  a.attrs.assign(tokens.size(), kAttrNormal);
  for (size_t i = 0; i < v.token_types.size(); ++i) a.attrs[i] = attr_of_type(v.token_types[i]);
  std::unordered_map<std::string, int32_t> by_text;
  for (size_t i = 0; i < tokens.size(); ++i) by_text.emplace(tokens[i], static_cast<int32_t>(i));
  auto id_of_text = [&](const char* text) {
    const auto it = by_text.find(text);
    return it == by_text.end() ? kNoToken : it->second;
  };
  // A FIM token the file does not name is found by its text and made a control token. llama.cpp
  // takes the first candidate its hash map yields; real vocabularies hold at most one, and here it is
  // the one with the lowest id.
  for (const FimNames& fim : fim_names()) {
    if (ids[fim.name] != kNoToken) continue;
    for (const char* text : fim.texts) {
      const int32_t id = id_of_text(text);
      if (id != kNoToken && (ids[fim.name] == kNoToken || id < ids[fim.name])) ids[fim.name] = id;
    }
    if (ids[fim.name] != kNoToken) a.attrs[ids[fim.name]] |= kAttrControl;
  }
  for (const char* fim : {"fim_pad", "fim_rep", "fim_sep"}) {
    if (ids[fim] != kNoToken) a.eog.insert(ids[fim]);
  }
  // Every token named like an end of generation ends generation and is a control token (this covers
  // llama.cpp's EOT and EOM guesses, whose names are all in the list).
  for (const char* text : kEndOfGenerationNames) {
    if (const int32_t id = id_of_text(text); id != kNoToken) {
      a.eog.insert(id);
      a.attrs[id] |= kAttrControl;
    }
  }
  // gpt-oss's channel markers are always rendered.
  for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const int32_t id = id_of_text(text); id != kNoToken) a.attrs[id] = kAttrUserDefined;
  }
  for (const char* name : {"eos", "eot", "eom"}) {
    if (ids[name] != kNoToken) a.eog.insert(ids[name]);
  }
  // With <|return|> and <|call|> (o200k_harmony) or <|calls|> and <|flush|> (solar-open), <|end|>
  // only ends a message; with <|tool_response> (Gemma 4), </s> is an ordinary token.
  auto eog_has = [&](const char* text) {
    const int32_t id = id_of_text(text);
    return id != kNoToken && a.eog.count(id) > 0;
  };
  const bool has_call = eog_has("<|call|>") || eog_has("<|calls|>");
  if (eog_has("<|end|>") && ((eog_has("<|return|>") && has_call) || (has_call && eog_has("<|flush|>")))) {
    a.eog.erase(id_of_text("<|end|>"));
    a.attrs[id_of_text("<|end|>")] = kAttrUserDefined;
  }
  if (eog_has("<|tool_response>") && eog_has("</s>")) {
    a.eog.erase(id_of_text("</s>"));
    a.attrs[id_of_text("</s>")] = kAttrNormal;
  }
  return a;
}

// The file's token texts with llama.cpp's fix-up: an empty one is named "[EMPTY_<id>]". A text may
// not appear twice (llama.cpp's text -> id map cannot hold it); `index_of` is that map.
std::vector<std::string> llama_tokens(const GgufVocab& v, const std::string& source,
                                      std::unordered_map<std::string, size_t>& index_of) {
  std::vector<std::string> tokens = v.tokens;
  index_of.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
    const auto [it, inserted] = index_of.emplace(tokens[i], i);
    if (!inserted) {
      throw_invalid_argument(source + ": tokenizer.ggml.tokens[" + std::to_string(i) + "] " +
                             json(tokens[i]).dump(-1, ' ', false, json::error_handler_t::replace) +
                             " repeats tokenizer.ggml.tokens[" + std::to_string(it->second) + "]");
    }
  }
  return tokens;
}

// What llama.cpp assumes for one tokenizer.ggml.model when the file's keys are silent.
struct ModelDefaults {
  int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken;  // each dropped when outside the vocabulary
  bool add_bos = false;
};

ModelDefaults model_defaults(const GgufVocab& v, const PreTokenizerMapping* pre) {
  if (v.model == "llama") return {/*bos=*/1, /*eos=*/2, /*unk=*/0, /*add_bos=*/true};
  // BPE: BOS = EOS = 11 (none for BOS where the pre-tokenizer says so).
  return {pre->default_bos ? 11 : kNoToken, 11, kNoToken, pre->add_bos};
}

// Special ids by name (kNoToken when none): llama.cpp's defaults for the model (each only when
// inside the vocabulary), then the file's keys.
std::map<std::string, int32_t> special_ids(const GgufVocab& v, const ModelDefaults& defaults, int64_t n_tokens,
                                           const std::string& source) {
  std::map<std::string, int32_t> ids;
  for (const GgufSpecialIdKey& k : gguf_special_id_keys()) ids[k.name] = kNoToken;
  for (const auto& [name, id] :
       {std::pair<const char*, int32_t>{"bos", defaults.bos}, {"eos", defaults.eos}, {"unk", defaults.unk}}) {
    if (id != kNoToken && id < n_tokens) ids[name] = id;
  }
  for (const GgufSpecialIdKey& k : gguf_special_id_keys()) {
    const uint32_t* id = v.special_ids.find(k.name);
    if (id == nullptr) continue;
    if (*id >= n_tokens) {
      throw_invalid_argument(source + ": " + k.key + " " + std::to_string(*id) + " is outside the vocabulary (" +
                             std::to_string(n_tokens) + " tokens)");
    }
    ids[k.name] = static_cast<int32_t>(*id);
  }
  return ids;
}

// Merges, by rank, as tokenizer.json's [left, right] pairs; a pair listed twice keeps its first
// rank. The message is built only for an error: files hold ~10^5 merges.
json merges_json(const std::vector<std::string>& merges, const std::unordered_map<std::string, size_t>& index_of,
                 const std::string& source) {
  json out = json::array();
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    auto quoted = [](const std::string& t) { return json(t).dump(-1, ' ', false, json::error_handler_t::replace); };
    auto fail = [&](const std::string& what) {
      throw_invalid_argument(source + ": tokenizer.ggml.merges[" + std::to_string(i) + "] " + quoted(m) + " " + what);
    };
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) fail("has no space between two tokens");
    std::string left = m.substr(0, space), right = m.substr(space + 1);
    for (const std::string* t : {&left, &right}) {
      if (index_of.count(*t) == 0) fail("names " + quoted(*t) + ", which is not in tokenizer.ggml.tokens");
    }
    if (index_of.count(left + right) == 0) {
      fail("makes " + quoted(left + right) + ", which is not in tokenizer.ggml.tokens");
    }
    if (seen.insert(m).second) out.push_back(json::array({std::move(left), std::move(right)}));
  }
  return out;
}

// Whether BOS / EOS are added: llama.cpp's defaults, then the file's keys.
struct AddSpecial {
  bool bos = false;
  bool eos = false;
};
AddSpecial add_special_tokens(const GgufVocab& v, const ModelDefaults& defaults,
                              const std::map<std::string, int32_t>& ids, const std::string& source) {
  AddSpecial add{defaults.add_bos, false};
  if (const bool* b = v.add_special.find("bos")) add.bos = *b;
  if (const bool* e = v.add_special.find("eos")) add.eos = *e;
  if (add.bos && ids.at("bos") == kNoToken) {
    throw_invalid_argument(source + ": tokenizer.ggml.add_bos_token is true but the file names no BOS token");
  }
  if (add.eos && ids.at("eos") == kNoToken) {
    throw_invalid_argument(source + ": tokenizer.ggml.add_eos_token is true but the file names no EOS token");
  }
  return add;
}

// model.vocab, written by hand: the vocabulary is large and its order is the ids'. This is where a
// token that is not UTF-8 is refused.
std::string vocab_json(const std::vector<std::string>& tokens, const std::string& source) {
  std::string vocab = "{";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) vocab += ',';
    vocab += json_string(tokens[i], i, source);
    vocab += ':';
    vocab += std::to_string(i);
  }
  vocab += '}';
  return vocab;
}

// added_tokens: the control, user-defined and unknown tokens, which match before the BPE model.
json added_tokens_json(const std::vector<std::string>& tokens, const std::vector<uint8_t>& attrs) {
  json added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint8_t attr = attrs[i];
    if ((attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) == 0) continue;
    added.push_back({{"id", i},
                     {"content", tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", (attr & (kAttrControl | kAttrUnknown)) != 0}});
  }
  return added;
}

// The pre-tokenizer: the mapping's Split regexes in turn, then byte-level (without its own regex).
json pre_tokenizer_json(const PreTokenizerMapping& pre) {
  json pre_tokenizers = json::array();
  for (const std::string& regex : pre.regexes) {
    pre_tokenizers.push_back(
        {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  pre_tokenizers.push_back(
      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}});
  return json{{"type", "Sequence"}, {"pretokenizers", pre_tokenizers}};
}

// The post-processor that adds BOS and/or EOS around the text; null when neither is added.
json post_processor_json(const std::vector<std::string>& tokens, const std::map<std::string, int32_t>& ids,
                         AddSpecial add) {
  json post_processor;  // null: nothing added
  if (add.bos || add.eos) {
    json single = json::array(), special = json::object();
    auto add_special = [&](int32_t id) {
      single.push_back({{"SpecialToken", {{"id", tokens[id]}, {"type_id", 0}}}});
      special[tokens[id]] = {{"id", tokens[id]}, {"ids", json::array({id})}, {"tokens", json::array({tokens[id]})}};
    };
    if (add.bos) add_special(ids.at("bos"));
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (add.eos) add_special(ids.at("eos"));
    post_processor = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}};
  }
  return post_processor;
}

// tokenizer_config.json: add_bos/add_eos, the special tokens' texts and the chat template.
nlohmann::ordered_json tokenizer_config(const GgufVocab& v, const std::vector<std::string>& tokens,
                                        const std::map<std::string, int32_t>& ids, AddSpecial add,
                                        const std::string& source) {
  nlohmann::ordered_json tc;
  tc["add_bos_token"] = add.bos;
  tc["add_eos_token"] = add.eos;
  for (const char* name : {"bos", "eos", "unk", "pad"}) {
    const int32_t id = ids.at(name);
    tc[std::string(name) + "_token"] = id == kNoToken ? nlohmann::ordered_json() : nlohmann::ordered_json(tokens[id]);
  }
  tc["clean_up_tokenization_spaces"] = false;
  if (v.chat_template.is_string() || v.chat_template.is_array()) {
    try {
      tc["chat_template"] = nlohmann::ordered_json::parse(v.chat_template.dump());
    } catch (const json::type_error&) {
      throw_invalid_argument(source + ": tokenizer.chat_template is not valid UTF-8");
    }
  }
  return tc;
}

// tokenizer.ggml.scores of a SentencePiece vocabulary: one finite number per token.
void check_scores(const GgufVocab& v, const std::string& source) {
  if (v.scores.empty()) {
    throw_invalid_argument(source +
                           ": tokenizer.ggml.scores is missing (tokenizer.ggml.model 'llama' merges by token score)");
  }
  if (v.scores.size() != v.tokens.size()) {
    throw_invalid_argument(source + ": tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                           " entries but tokenizer.ggml.tokens has " + std::to_string(v.tokens.size()));
  }
  for (size_t i = 0; i < v.scores.size(); ++i) {
    if (!std::isfinite(v.scores[i])) {
      throw_invalid_argument(source + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is " +
                             std::to_string(v.scores[i]) + " (scores must be finite)");
    }
  }
}

// ditto_spm's vocab: [token, score] in id order, written by hand like vocab_json. A float32 score
// printed with 9 significant digits reads back as the same float32.
std::string spm_vocab_json(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                           const std::string& source) {
  std::string vocab = "[";
  char number[32];
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) vocab += ',';
    vocab += '[';
    vocab += json_string(tokens[i], i, source);
    std::snprintf(number, sizeof(number), ",%.9g]", static_cast<double>(scores[i]));
    vocab += number;
  }
  vocab += ']';
  return vocab;
}

// Spaces as U+2581, with the dummy prefix when add_space_prefix (llama_escape_whitespace and the
// is_prev_special prefix of llama_vocab::impl::tokenize).
json spm_normalizer_json(bool add_space_prefix) {
  json steps = json::array();
  if (add_space_prefix) steps.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
  return json{{"type", "Sequence"}, {"normalizers", steps}};
}

// token_to_piece for SPM: "▁" -> " ", byte tokens -> their byte; and the prefix space removed.
json spm_decoder_json(bool add_space_prefix) {
  json steps = json::array();
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}});
  steps.push_back({{"type", "ByteFallback"}});
  steps.push_back({{"type", "Fuse"}});
  if (add_space_prefix) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return json{{"type", "Sequence"}, {"decoders", steps}};
}

}  // namespace

std::vector<std::string> supported_gguf_pre_tokenizers() {
  std::vector<std::string> names;
  for (const PreTokenizerMapping& m : pre_tokenizer_mappings())
    names.insert(names.end(), m.names.begin(), m.names.end());
  return names;
}

HfTokenizerFiles hf_tokenizer_from_gguf(const GgufVocab& v, const std::string& source) {
  const bool spm = v.model == "llama";
  if (v.model != "gpt2" && !spm) {
    throw_invalid_argument(source + ": tokenizer.ggml.model '" + v.model +
                           "' is not supported (ditto reads \"gpt2\", byte-level BPE, and \"llama\", SentencePiece)");
  }
  const PreTokenizerMapping* pre = spm ? nullptr : &find_pre_tokenizer(v.pre, source);
  if (v.tokens.empty()) throw_invalid_argument(source + ": tokenizer.ggml.tokens is empty");
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size()) {
    throw_invalid_argument(source + ": tokenizer.ggml.token_type has " + std::to_string(v.token_types.size()) +
                           " entries but tokenizer.ggml.tokens has " + std::to_string(v.tokens.size()));
  }
  if (spm) check_scores(v, source);

  std::unordered_map<std::string, size_t> index_of;
  const std::vector<std::string> tokens = llama_tokens(v, source, index_of);
  const ModelDefaults defaults = model_defaults(v, pre);
  std::map<std::string, int32_t> ids = special_ids(v, defaults, static_cast<int64_t>(v.tokens.size()), source);
  const LlamaAttributes attributes = llama_attributes(v, tokens, ids);
  const AddSpecial add = add_special_tokens(v, defaults, ids, source);

  // tokenizer.json, written piece by piece: the vocabulary is large and its order is the ids'. The
  // vocabulary comes first: it is where a token that is not UTF-8 is refused.
  std::string text;
  if (spm) {
    const std::string vocab = spm_vocab_json(tokens, v.scores, source);
    text = R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" +
           added_tokens_json(tokens, attributes.attrs).dump();
    text += R"(,"normalizer":)" + spm_normalizer_json(v.add_space_prefix.value_or(true)).dump();
    text += R"(,"pre_tokenizer":null,"post_processor":)" + post_processor_json(tokens, ids, add).dump();
    text += R"(,"decoder":)" + spm_decoder_json(v.add_space_prefix.value_or(true)).dump();
    text += R"(,"model":{"type":"ditto_spm","vocab":)" + vocab + "}}";
  } else {
    const json merges = merges_json(v.merges, index_of, source);
    const std::string vocab = vocab_json(tokens, source);
    text = R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" +
           added_tokens_json(tokens, attributes.attrs).dump();
    text += R"(,"normalizer":null,"pre_tokenizer":)" + pre_tokenizer_json(*pre).dump();
    text += R"(,"post_processor":)" + post_processor_json(tokens, ids, add).dump();
    text += R"(,"decoder":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})";
    text += R"(,"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,)"
            R"("end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ditto_unknown_separates":true,)"
            R"("ignore_merges":)";
    text += pre->ignore_merges ? "true" : "false";
    text += R"(,"vocab":)" + vocab + R"(,"merges":)" + merges.dump() + "}}";
  }

  HfTokenizerFiles files;
  files.tokenizer_json = std::move(text);
  files.tokenizer_config = tokenizer_config(v, tokens, ids, add, source);
  files.eos_token_ids.assign(attributes.eog.begin(), attributes.eog.end());
  return files;
}

}  // namespace ditto
