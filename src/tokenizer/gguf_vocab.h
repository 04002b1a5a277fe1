// The tokenizer part of a GGUF file (its tokenizer.* keys) as a vocabulary, and the Hugging Face
// tokenizer files that make ditto's Tokenizer split and merge exactly as llama.cpp's llama_vocab
// does for the same file (src/llama-vocab.cpp: llm_tokenizer_bpe, tokenizer_st_partition,
// llama_vocab::impl::load). Reading the keys from a file is checkpoint/gguf_model.h's; the other
// direction (a Hugging Face tokenizer written into a GGUF, as llama.cpp's convert_hf_to_gguf.py
// does) is checkpoint/gguf_vocab_export.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditto {

// An insertion-ordered map, as the converter's Python dicts are.
template <typename V>
struct OrderedMap {
  std::vector<std::pair<std::string, V>> items;
  V* find(const std::string& k) {
    for (auto& [key, v] : items) {
      if (key == k) return &v;
    }
    return nullptr;
  }
  const V* find(const std::string& k) const {
    for (const auto& [key, v] : items) {
      if (key == k) return &v;
    }
    return nullptr;
  }
  void set(const std::string& k, V v) {
    if (V* p = find(k))
      *p = std::move(v);
    else
      items.emplace_back(k, std::move(v));
  }
};

struct GgufVocab {
  std::string model = "gpt2";  // tokenizer.ggml.model
  std::string pre;
  std::vector<std::string> tokens;   // [vocab_size]
  std::vector<int32_t> token_types;  // [vocab_size] llama.cpp's LLAMA_TOKEN_TYPE; empty when absent
  std::vector<float> scores;         // [vocab_size] tokenizer.ggml.scores; empty when absent
  std::vector<std::string> merges;   // "left right"
  // "bos" -> id, in the order SpecialVocab finds them; the GGUF key of each name is in
  // gguf_special_id_keys() (e.g. "unk" <-> tokenizer.ggml.unknown_token_id).
  OrderedMap<uint32_t> special_ids;
  OrderedMap<bool> add_special;  // "bos" / "eos" / "sep" -> tokenizer.ggml.add_<name>_token
  nlohmann::json chat_template;  // string, list of {name, template}, or null
  std::optional<bool> lowercase, strip_accents;
  std::optional<bool> add_prefix_space;  // tokenizer_config.json's, when a boolean
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix, when the file has it
};

// The special_ids names and their GGUF keys ("unk" <-> "tokenizer.ggml.unknown_token_id"), in
// llama.cpp's order; fim_pre / fim_suf / fim_mid also have the older prefix / suffix / middle keys,
// which llama.cpp reads after the new ones. hf_tokenizer_from_gguf reads every name here.
struct GgufSpecialIdKey {
  const char* name;
  const char* key;
};
const std::vector<GgufSpecialIdKey>& gguf_special_id_keys();

// What Tokenizer::from_json and ChatTemplate::from_config need, built from a GGUF's tokenizer keys.
struct HfTokenizerFiles {
  std::string tokenizer_json;               // text of an equivalent tokenizer.json
  nlohmann::ordered_json tokenizer_config;  // bos/eos/unk/pad_token strings (null when none),
                                            // add_bos_token, add_eos_token, chat_template (when the
                                            // file has one), clean_up_tokenization_spaces=false
  std::vector<int32_t> eos_token_ids;       // llama.cpp's end-of-generation ids, ascending
};

// The tokenizer llama.cpp builds from `v`, as Hugging Face files, for the two tokenizer.ggml.model
// values ditto reads: "gpt2" (byte-level BPE) and "llama" (SentencePiece, "SPM").
// Common to both:
//   - added_tokens: the tokens llama.cpp matches in the text before the model (tokenizer_st_partition
//     with parse_special): token types 2 unknown, 3 control (both "special": dropped by
//     decode(skip_special_tokens)) and 4 user-defined, after llama.cpp's load-time corrections
//     (tokens named like EOG/EOT/EOM/FIM tokens become control, gpt-oss's <|channel|> <|message|>
//     <|start|> <|constrain|> user-defined, ...). Every token, added or not, is also in the model's
//     vocabulary under its own id, as in llama.cpp's token_to_id.
//   - post_processor: BOS before / EOS after the text when add_bos / add_eos (TemplateProcessing).
//   - clean_up_tokenization_spaces false (llama.cpp cleans spaces only in llama_detokenize, never in
//     the pieces it streams, and never for SPM).
// "gpt2":
//   - pre_tokenizer: tokenizer.ggml.pre's list of split regexes (llm_tokenizer_bpe), each a Split
//     with behavior Isolated, then ByteLevel without regex; merges "a b" split at the first space
//     after the first byte, a pair listed twice keeping its first rank (llama.cpp's bpe_ranks);
//     ignore_merges where llama.cpp sets it (llama3 family, tekken); a byte whose character is not
//     in the vocabulary yields no id but keeps its neighbours from merging ("ditto_unknown_separates",
//     tokenizer/bpe.h). See the table in gguf_vocab.cc.
//   - llama.cpp's defaults when the keys are absent: add_bos true for the llama3 family and tekken,
//     false otherwise; add_eos false; bos and eos id 11 (llama.cpp's BPE default, none for
//     chatglm-bpe / glm4 BOS); no unk or pad.
//   - decoder ByteLevel.
// "llama" (llm_tokenizer_spm and the SPM branches of llama_vocab::impl::tokenize / token_to_piece):
//   - normalizer: Prepend "▁" when tokenizer.ggml.add_space_prefix (absent: true), then Replace " "
//     by "▁" (U+2581). Like llama.cpp, the prefix goes before every stretch of text between
//     added tokens, and only U+0020 is replaced (tabs and newlines stay). tokenizer.ggml.pre is
//     not read (llama.cpp ignores it for SPM).
//   - model: ditto_spm (tokenizer/spm.h) with tokenizer.ggml.tokens and tokenizer.ggml.scores:
//     adjacent symbols merge by the score of the token they make, highest first, leftmost on
//     ties; characters outside the vocabulary fall back to the <0xXX> byte tokens.
//   - llama.cpp's defaults when the keys are absent: bos 1, eos 2, unk 0 (each only when inside
//     the vocabulary); add_bos true; add_eos false.
//   - decoder: Replace "▁" by " ", ByteFallback (a <0xXX> token is its byte), Fuse, and with
//     add_space_prefix Strip(" ", 1, 0): one leading space of the decoded text removed, as
//     transformers decodes Llama 2. llama.cpp's llama_detokenize also removes it, except when it
//     removes a leading BOS (remove_special), where it keeps it.
// Known differences from llama.cpp, all outside real vocabularies' use: added tokens are matched
// leftmost-longest (llama.cpp: longest token first over the whole text), which differs only when two
// added tokens overlap; per-model strip flags llama.cpp sets by general.name (Phi-3's rstrip) are not
// reproduced; SPM tokens of type unused (5) decode to their text (llama.cpp: to nothing), and
// user-defined SPM tokens have "▁" replaced by " " when decoded (llama.cpp: kept).
// `source` (the .gguf path) prefixes every error. Throws Error(kInvalidArgument) naming the key for:
// a tokenizer.ggml.model other than "gpt2" and "llama", a tokenizer.ggml.pre llama.cpp does not know
// or ditto does not map (with the supported names; "gpt2" only), a merge naming a token not in the
// vocabulary (with the merge and its index), tokenizer.ggml.scores missing, of another length than
// the tokens or holding a value that is not finite ("llama" only), a token_type array whose length is
// not the tokens', special ids outside the vocabulary, duplicate tokens, and a token that is not
// valid UTF-8. A "llama" vocabulary without the <0xXX> token a character needs is refused when that
// character is encoded (Spm::tokenize), as llama.cpp does.
HfTokenizerFiles hf_tokenizer_from_gguf(const GgufVocab& v, const std::string& source);

// The tokenizer.ggml.pre names hf_tokenizer_from_gguf maps, in its table's order.
std::vector<std::string> supported_gguf_pre_tokenizers();

}  // namespace ditto
