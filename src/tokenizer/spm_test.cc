// SentencePiece-style vocabularies on hand-built vocabularies with hand-checked ids:
//   - the GGUF form (tokenizer.ggml.model "llama" -> hf_tokenizer_from_gguf -> ditto_spm):
//     merges by score (highest first, leftmost on ties), add_space_prefix on and off, the prefix
//     after an added token, byte fallback, BOS, decoding (▁, byte tokens, the stripped prefix
//     space, streaming), and every refused file naming its key;
//   - the Hugging Face form (BPE with byte_fallback, Prepend/Replace normalizer or Metaspace
//     pre-tokenizer, Replace/ByteFallback/Fuse/Strip decoder).
// The real Gemma 3 vocabulary is compared with SentencePiece and Hugging Face tokenizers by
// tests/tokenizer/test_spm_parity.py.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/test_support.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::error_message;
using Ids = std::vector<int32_t>;

// ids 0-2: <unk> (unknown), <s>, </s> (control); 3-258: <0x00>..<0xFF> (byte); then normal tokens.
constexpr int32_t kByte0 = 3;
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kC = 262, kAB = 263, kBC = 264, kSpaceA = 265, kAA = 266;

GgufVocab spm_vocab(bool byte_tokens = true) {
  GgufVocab v;
  v.model = "llama";
  auto add = [&](const std::string& text, float score, int32_t type) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(byte_tokens ? name : "<unused" + std::to_string(b) + ">", 0, byte_tokens ? 6 : 5);
  }
  add("\u2581", -1, 1);   // 259
  add("a", -2, 1);        // 260
  add("b", -3, 1);        // 261
  add("c", -4, 1);        // 262
  add("ab", -5, 1);       // 263
  add("bc", -0.5, 1);     // 264: outscores "ab"
  add("\u2581a", -6, 1);  // 265
  add("aa", -1.5, 1);     // 266
  return v;
}

std::unique_ptr<Tokenizer> load(const GgufVocab& v) {
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(v, "t.gguf");
  return Tokenizer::from_json(f.tokenizer_json, "t.gguf", json::parse(f.tokenizer_config.dump()));
}

std::string stream(const Tokenizer& t, const Ids& ids, bool skip) {
  IncrementalDetokenizer d(t, skip);
  std::string out;
  for (const int32_t id : ids) out += d.add(id);
  return out + d.finish();
}

TEST(SpmTest, MergesByScoreHighestFirstLeftmostOnTies) {
  GgufVocab v = spm_vocab();
  v.add_space_prefix = false;
  const auto t = load(v);
  EXPECT_EQ(t->encode("abc", false), (Ids{kA, kBC}));  // "bc" (-0.5) before "ab" (-5)
  EXPECT_EQ(t->encode("ab", false), (Ids{kAB}));
  EXPECT_EQ(t->encode("aaa", false), (Ids{kAA, kA}));  // two "aa" candidates: the left one
  EXPECT_EQ(t->encode("cab", false), (Ids{kC, kAB}));
}

TEST(SpmTest, SpacesAndTheDummyPrefix) {
  GgufVocab v = spm_vocab();
  const auto with_prefix = load(v);  // add_space_prefix absent: llama.cpp's default, true
  // "a b" -> "▁a▁b": "▁a" is the only candidate; "▁" and "b" stay.
  EXPECT_EQ(with_prefix->encode("a b", false), (Ids{kSpaceA, kSpace, kB}));
  // "ab" -> "▁ab": "ab" (-5) outscores "▁a" (-6).
  EXPECT_EQ(with_prefix->encode("ab", false), (Ids{kSpace, kAB}));
  // The prefix goes before text after an added token too (llama.cpp's is_prev_special).
  EXPECT_EQ(with_prefix->encode("a<s>a", false), (Ids{kSpaceA, 1, kSpaceA}));
  // BOS by default; an empty text is BOS alone.
  EXPECT_EQ(with_prefix->encode("a", true), (Ids{1, kSpaceA}));
  EXPECT_EQ(with_prefix->encode("", true), (Ids{1}));
  // Only U+0020 becomes "▁": a tab falls back to its byte.
  EXPECT_EQ(with_prefix->encode("a\tb", false), (Ids{kSpaceA, kByte0 + 0x09, kB}));

  v.add_space_prefix = false;
  const auto without = load(v);
  EXPECT_EQ(without->encode("a b", false), (Ids{kA, kSpace, kB}));
  EXPECT_EQ(without->encode(" a", false), (Ids{kSpaceA}));
  EXPECT_EQ(without->encode("a<s>a", false), (Ids{kA, 1, kA}));
}

TEST(SpmTest, ByteFallbackAndItsAbsence) {
  GgufVocab v = spm_vocab();
  v.add_space_prefix = false;
  // "é" is C3 A9; "😀" is F0 9F 98 80.
  EXPECT_EQ(load(v)->encode("a\u00e9", false), (Ids{kA, kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(load(v)->encode("\U0001F600", false), (Ids{kByte0 + 0xF0, kByte0 + 0x9F, kByte0 + 0x98, kByte0 + 0x80}));

  GgufVocab no_bytes = spm_vocab(/*byte_tokens=*/false);
  no_bytes.add_space_prefix = false;
  const auto t = load(no_bytes);
  EXPECT_EQ(t->encode("ab", false), (Ids{kAB}));  // loads, and text the vocabulary covers encodes
  const std::string message = error_message([&] { t->encode("a\u00e9", false); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("U+00E9"), std::string::npos) << message;
  EXPECT_NE(message.find("<0xC3>"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.ggml.tokens"), std::string::npos) << message;
}

TEST(SpmTest, DecodeReplacesSpacesJoinsBytesAndStripsThePrefixSpace) {
  const GgufVocab v = spm_vocab();
  const auto t = load(v);
  const Ids ids = {1, kSpaceA, kSpace, kB, kByte0 + 0xC3, kByte0 + 0xA9};  // <s> "▁a" "▁" "b" é
  EXPECT_EQ(t->decode(ids, /*skip_special_tokens=*/true), "a b\u00e9");
  EXPECT_EQ(t->decode(ids, false), "<s> a b\u00e9");  // the strip sees "<" first
  EXPECT_EQ(stream(*t, ids, true), t->decode(ids, true));
  EXPECT_EQ(stream(*t, ids, false), t->decode(ids, false));
  // A stray byte is U+FFFD; the space that stays after the one stripped.
  EXPECT_EQ(t->decode(Ids{kSpace, kSpace, kByte0 + 0xC3}), " \uFFFD");
  EXPECT_EQ(stream(*t, {kSpace, kSpace, kByte0 + 0xC3}, false), " \uFFFD");
  for (const std::string text : {"a b", "  ab", "a\u00e9 a", "b\n"}) {
    EXPECT_EQ(t->decode(t->encode(text, true), true), text) << text;
  }

  GgufVocab no_prefix = spm_vocab();
  no_prefix.add_space_prefix = false;
  const auto u = load(no_prefix);
  EXPECT_EQ(u->decode(Ids{kSpaceA, kB}), " ab");  // nothing stripped without the prefix
  EXPECT_EQ(u->decode(u->encode(" a b", false)), " a b");
}

TEST(SpmTest, SpecialIdsAndConfigFollowLlamaCppDefaults) {
  GgufVocab v = spm_vocab();
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(v, "t.gguf");
  EXPECT_EQ(f.tokenizer_config["bos_token"], "<s>");
  EXPECT_EQ(f.tokenizer_config["eos_token"], "</s>");
  EXPECT_EQ(f.tokenizer_config["unk_token"], "<unk>");
  EXPECT_EQ(f.tokenizer_config["add_bos_token"], true);
  EXPECT_EQ(f.eos_token_ids, (Ids{2}));
  v.add_special.set("bos", false);
  EXPECT_EQ(load(v)->encode("a", true), (Ids{kSpaceA}));
}

TEST(SpmTest, ErrorsNameTheKey) {
  auto fails_with = [](GgufVocab v, const std::string& expected) {
    const std::string message =
        error_message([&] { hf_tokenizer_from_gguf(v, "t.gguf"); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.rfind("t.gguf: ", 0), 0u) << message;
  };
  GgufVocab v = spm_vocab();
  v.scores.clear();
  fails_with(v, "tokenizer.ggml.scores is missing");
  v = spm_vocab();
  v.scores.pop_back();
  fails_with(v, "tokenizer.ggml.scores has 266 entries but tokenizer.ggml.tokens has 267");
  v = spm_vocab();
  v.scores[5] = std::nanf("");
  fails_with(v, "tokenizer.ggml.scores[5] is nan");
  v = spm_vocab();
  v.model = "bert";
  fails_with(v, "tokenizer.ggml.model 'bert' is not supported");
  v = spm_vocab();
  v.special_ids.set("bos", 1000);
  fails_with(v, "tokenizer.ggml.bos_token_id 1000 is outside the vocabulary");
}

TEST(SpmTest, ModelJsonErrorsNameTheEntry) {
  auto fails_with = [](const json& model, const std::string& expected) {
    const std::string message = error_message([&] { Spm::from_json(model, "m"); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  auto model = [](const json& entries) { return json{{"type", "ditto_spm"}, {"vocab", entries}}; };
  fails_with(model(json::array({json::array({"a", "x"})})), "m.vocab[0]: expected [token, score]");
  fails_with(model(json::array({json::array({"a", 0}), json::array({"a", 1})})),
             "m.vocab[1]: token \"a\" repeats m.vocab[0]");
  fails_with(model(json::array({json::array({"", 0})})), "m.vocab[0]: the token is empty");
  fails_with(model(json::object()), "m.vocab: expected an array of [token, score] pairs");
  fails_with(model(json::array({json::array({"a", 1e300})})), "m.vocab[0]: the score 1e+300 is not a finite float32");
  fails_with({{"type", "Unigram"}, {"vocab", json::array()}}, "m.type: expected \"ditto_spm\"");
}

// The Hugging Face form of the same family: BPE with byte_fallback, merges ranked by the merged
// token's score, and the normalizer (Llama 2 style) or a Metaspace pre-tokenizer.
json hf_spm_json(const json& normalizer, const json& pre_tokenizer, bool strip) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = kByte0 + b;
  }
  vocab["\u2581"] = kSpace;
  vocab["a"] = kA;
  vocab["b"] = kB;
  vocab["c"] = kC;
  vocab["ab"] = kAB;
  vocab["bc"] = kBC;
  vocab["\u2581a"] = kSpaceA;
  vocab["aa"] = kAA;
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (strip) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}},
          {"normalizer", normalizer},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
          {"model",
           {{"type", "BPE"},
            {"byte_fallback", true},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"vocab", vocab},
            // By the merged token's score: bc (-0.5), aa (-1.5), ab (-5), ▁a (-6).
            {"merges", {"b c", "a a", "a b", "\u2581 a"}}}}};
}

TEST(SpmTest, HuggingFaceFormWithPrependReplaceNormalizer) {
  const json prepend = {{"type", "Prepend"}, {"prepend", "\u2581"}};
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  const json normalizer = {{"type", "Sequence"}, {"normalizers", json::array({prepend, replace})}};
  const auto t = Tokenizer::from_json(hf_spm_json(normalizer, nullptr, true).dump(), "tokenizer.json");
  EXPECT_EQ(t->encode("a b", false), (Ids{kSpaceA, kSpace, kB}));
  EXPECT_EQ(t->encode("abc", false), (Ids{kSpaceA, kBC}));           // "b c" (rank 0), then "▁ a" (rank 3)
  EXPECT_EQ(t->encode("a<s>a", false), (Ids{kSpaceA, 1, kSpaceA}));  // Prepend on every section
  EXPECT_EQ(t->encode("a\u00e9", false), (Ids{kSpaceA, kByte0 + 0xC3, kByte0 + 0xA9}));
  const Ids ids = {kSpaceA, kSpace, kB, kByte0 + 0xC3, kByte0 + 0xA9};
  EXPECT_EQ(t->decode(ids), "a b\u00e9");
  EXPECT_EQ(stream(*t, ids, false), "a b\u00e9");
}

TEST(SpmTest, HuggingFaceFormWithMetaspace) {
  const json first = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  const auto t = Tokenizer::from_json(hf_spm_json(nullptr, first, true).dump(), "tokenizer.json");
  EXPECT_EQ(t->encode("a b", false), (Ids{kSpaceA, kSpace, kB}));
  EXPECT_EQ(t->encode("a<s>a", false), (Ids{kSpaceA, 1, kA}));  // "first": not after an added token
  EXPECT_EQ(t->encode(" a", false), (Ids{kSpaceA}));            // already starts with "▁": no prefix
  const json split = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  const auto u = Tokenizer::from_json(hf_spm_json(nullptr, split, true).dump(), "tokenizer.json");
  EXPECT_EQ(u->encode("a<s>a", false), (Ids{kSpaceA, 1, kSpaceA}));
  EXPECT_EQ(u->encode("aa ab", false), (Ids{kSpace, kAA, kSpace, kAB}));  // split before each "▁"
  const json never = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}};
  const auto w = Tokenizer::from_json(hf_spm_json(nullptr, never, false).dump(), "tokenizer.json");
  EXPECT_EQ(w->encode("aa ab", false), (Ids{kAA, kSpace, kAB}));  // split (the default) keeps "▁" from "a"
  EXPECT_EQ(w->decode(Ids{kAA, kSpace, kAB}), "aa ab");
}

TEST(SpmTest, DecoderAndNormalizerErrorsNameTheirPlace) {
  auto fails_with = [](const json& j, const std::string& expected) {
    const std::string message =
        error_message([&] { Tokenizer::from_json(j.dump(), "tokenizer.json"); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  json j = hf_spm_json(nullptr, nullptr, true);
  j["decoder"]["decoders"].push_back({{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", "y"}});
  fails_with(j, "decoder.decoders[4].type 'Replace' after Fuse is not supported");
  j = hf_spm_json({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "\u2581"}}, nullptr, true);
  fails_with(j, "normalizer.pattern: expected {\"String\": ...}");
  j = hf_spm_json({{"type", "Prepend"}}, nullptr, true);
  fails_with(j, "normalizer.prepend: expected a string");
  j = hf_spm_json(nullptr, {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "sometimes"}}, true);
  fails_with(j, "pre_tokenizer.prepend_scheme: expected \"always\", \"first\" or \"never\"");
}

}  // namespace
}  // namespace ditto
