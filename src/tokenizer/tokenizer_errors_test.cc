// Loading errors name the culprit (file, component, regex, merge), and the component semantics
// that the real files do not exercise: Split behaviors and invert, ByteLevel's prefix space, and
// the added-token flags (lstrip, rstrip, single_word, normalized), on small tokenizer.json files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

// A minimal valid tokenizer.json: single-character tokens a-z, space and a few symbols, no merges.
nlohmann::json minimal() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  for (const char* s : {" ", "-", "<", ">", "!", ",", "\t"}) vocab[s] = id++;
  return {{"version", "1.0"},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
          {"added_tokens", nlohmann::json::array()},
          {"post_processor", nullptr},
          {"decoder", nullptr}};
}

// The message of the Error that loading `j` throws ("" when it loads).
std::string load_error(const std::string& text) {
  try {
    Tokenizer::from_json(text, "bad/tokenizer.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

void expect_error(const nlohmann::json& j, const std::vector<std::string>& parts) {
  const std::string m = load_error(j.dump());
  ASSERT_FALSE(m.empty()) << "loaded without error: " << j.dump().substr(0, 200);
  EXPECT_NE(m.find("bad/tokenizer.json"), std::string::npos) << m;
  for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
}

TEST(TokenizerErrorsTest, MinimalLoads) {
  EXPECT_EQ(load_error(minimal().dump()), "");
  const auto t = Tokenizer::from_json(minimal().dump(), "min");
  EXPECT_EQ(t->encode("ab c"), (std::vector<int32_t>{0, 1, 26, 2}));
  EXPECT_EQ(t->decode(t->encode("ab c")), "a b   c");  // no decoder: tokens joined with spaces
}

TEST(TokenizerErrorsTest, UnknownModelType) {
  auto j = minimal();
  j["model"]["type"] = "WordPiece";
  expect_error(j, {"model.type 'WordPiece'", "not supported"});
  j["model"]["type"] = "Unigram";
  expect_error(j, {"model.type 'Unigram'"});
}

TEST(TokenizerErrorsTest, UnknownNormalizerPreTokenizerPostProcessorDecoder) {
  auto j = minimal();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j, {"normalizer.type 'Lowercase'"});
  j = minimal();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}}}};
  expect_error(j, {"pre_tokenizer.pretokenizers[0].type 'Whitespace'"});
  j = minimal();
  j["post_processor"] = {{"type", "Fancy"}};
  expect_error(j, {"post_processor.type 'Fancy'"});
  j = minimal();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j, {"decoder.type 'WordPiece'"});
}

TEST(TokenizerErrorsTest, BrokenRegexNamesRegexAndPcre2Message) {
  auto j = minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(?i:'s|[a-"}}}, {"behavior", "Isolated"}};
  expect_error(j, {"pre_tokenizer.pattern.Regex", "(?i:'s|[a-", "at offset"});
  j["pre_tokenizer"]["behavior"] = "Sideways";
  j["pre_tokenizer"]["pattern"] = {{"Regex", "a"}};
  expect_error(j, {"pre_tokenizer.behavior 'Sideways'"});
}

TEST(TokenizerErrorsTest, MergeNamingMissingToken) {
  auto j = minimal();
  j["model"]["merges"] = {"a b", "c \xc4\xa0zz"};
  expect_error(j, {"model.merges[0]", "\"ab\""});  // the merged token is missing
  j["model"]["vocab"]["ab"] = 100;
  expect_error(j, {"model.merges[1]", "\"\xc4\xa0zz\""});
}

TEST(TokenizerErrorsTest, MalformedJsonAndFields) {
  EXPECT_NE(load_error("{\"model\": ").find("invalid JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("expected a JSON object"), std::string::npos);
  auto j = minimal();
  j.erase("model");
  expect_error(j, {"no \"model\""});
  j = minimal();
  j["model"]["vocab"]["q"] = "seven";
  expect_error(j, {"model.vocab[\"q\"]"});
  j = minimal();
  j["added_tokens"] = {{{"id", 5}, {"special", true}}};
  expect_error(j, {"added_tokens[0].content"});
}

TEST(TokenizerErrorsTest, HugeIdsAreRefusedNotAllocated) {
  nlohmann::json j = minimal();
  j["model"]["vocab"]["a"] = 300000000;
  expect_error(j, {"model.vocab[\"a\"]", "[0, 2^24)", "300000000"});
  j = minimal();
  j["added_tokens"] = {{{"id", 1000000000}, {"content", "<s>"}, {"special", true}}};
  expect_error(j, {"added_tokens[0].id", "[0, 2^24)"});
}

TEST(TokenizerErrorsTest, AddedTokenCannotTakeAVocabularyId) {
  nlohmann::json j = minimal();
  const int id_of_a = j["model"]["vocab"]["a"].get<int>();
  j["added_tokens"] = {{{"id", id_of_a}, {"content", "<|endoftext|>"}, {"special", true}}};
  expect_error(j, {"added_tokens[0]", "<|endoftext|>", "vocabulary's id of \"a\""});
}

TEST(TokenizerErrorsTest, LoadMissingDirectoryIsNotFound) {
  try {
    Tokenizer::load("/nonexistent/model/dir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model/dir/tokenizer.json"), std::string::npos) << e.what();
  }
}

// Split behaviors on "the-final--countdown" (the examples of Hugging Face's NormalizedString::split).
std::vector<std::string> split(const std::string& behavior, bool invert,
                               const std::string& text = "the-final--countdown") {
  const PreTokenizer p = PreTokenizer::from_json(
      {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}}, "test");
  std::string buffer = text;
  std::vector<MatchSpan> pieces = {{0, static_cast<uint32_t>(text.size())}};
  p.pre_tokenize(buffer, pieces);
  std::vector<std::string> out;
  for (const MatchSpan& m : pieces) out.push_back(buffer.substr(m.begin, m.end - m.begin));
  return out;
}

TEST(PreTokenizerTest, SplitBehaviors) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Removed", false), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split("Isolated", false), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithPrevious", false), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithNext", false), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split("Contiguous", false), (V{"the", "-", "final", "--", "countdown"}));
  // invert: the pattern's matches become the gaps.
  EXPECT_EQ(split("Removed", true), (V{"-", "-", "-"}));
  EXPECT_EQ(split("MergedWithPrevious", true), (V{"the", "-final", "-", "-countdown"}));
}

TEST(PreTokenizerTest, ByteLevelPrefixSpaceAndGpt2Regex) {
  const PreTokenizer p = PreTokenizer::from_json({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "test");
  std::string buffer = "Hello world's 42!";
  std::vector<MatchSpan> pieces = {{0, static_cast<uint32_t>(buffer.size())}};
  p.pre_tokenize(buffer, pieces);
  std::vector<std::string> out;
  for (const MatchSpan& m : pieces) out.push_back(buffer.substr(m.begin, m.end - m.begin));
  EXPECT_EQ(out, (std::vector<std::string>{" Hello", " world", "'s", " 42", "!"}));
  EXPECT_TRUE(p.byte_level());
}

// Added tokens: Hugging Face's added_vocabulary.rs tests, without their Lowercase normalizer.
std::vector<std::pair<std::string, int32_t>> added_split(const nlohmann::json& tokens, const std::string& text) {
  auto bpe = Bpe::from_json(minimal()["model"], "test", false);
  const Normalizer none = Normalizer::from_json(nullptr, "test");
  const AddedVocabulary v = AddedVocabulary::from_json(tokens, "test", *bpe, none);
  std::vector<AddedSplit> splits;
  v.split(text, true, splits);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const AddedSplit& s : splits) out.emplace_back(text.substr(s.begin, s.end - s.begin), s.id);
  return out;
}

nlohmann::json token(int id, const std::string& content, bool lstrip = false, bool rstrip = false,
                     bool single_word = false, bool special = false) {
  return {{"id", id},          {"content", content},         {"lstrip", lstrip},
          {"rstrip", rstrip},  {"single_word", single_word}, {"normalized", false},
          {"special", special}};
}

TEST(AddedVocabularyTest, LstripRstripSingleWord) {
  using V = std::vector<std::pair<std::string, int32_t>>;
  const nlohmann::json tokens = {token(100, "my", true, true), token(101, "name"),
                                 token(102, "ony", false, false, true), token(103, "[CLS]", false, false, false, true),
                                 token(104, "[SEP]", false, false, false, true)};
  EXPECT_EQ(added_split(tokens, "[CLS] my name is anthony [SEP]"),
            (V{{"[CLS]", 103}, {" my ", 100}, {"name", 101}, {" is anthony ", -1}, {"[SEP]", 104}}));
  const auto mask = nlohmann::json::array({token(200, "<mask>", false, false, true)});  // {x} would copy x under clang
  EXPECT_EQ(added_split(mask, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
            (V{{"<mask>", 200}, {" My name ", -1}, {"<mask>", 200}, {" A<mask> <mask>ony ", -1}, {"<mask>", 200}}));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_EQ(added_split(mask, "<mask>, <mask>- \xe2\x97\x8c\xcc\xb0<mask>"),
            (V{{"<mask>", 200}, {", ", -1}, {"<mask>", 200}, {"- \xe2\x97\x8c\xcc\xb0<mask>", -1}}));
  const auto strip = nlohmann::json::array({token(300, "<mask>", true, true, true)});
  EXPECT_EQ(added_split(strip, "Hi <mask> there\t<mask>\t<mask>\xe2\x80\x80"),
            (V{{"Hi", -1}, {" <mask> ", 300}, {"there", -1}, {"\t<mask>\t", 300}, {"<mask>\xe2\x80\x80", 300}}));
}

TEST(AddedVocabularyTest, LeftmostLongestAndNormalizedTokens) {
  auto j = minimal();
  j["normalizer"] = {{"type", "NFC"}};
  j["added_tokens"] = {token(50, "<a>"), token(51, "<a><b>"), token(52, "ab")};
  j["added_tokens"][2]["normalized"] = true;
  j["added_tokens"].push_back(token(53, "\xc3\xa9"));  // "é", normalized: also matches e + U+0301
  j["added_tokens"][3]["normalized"] = true;
  const auto t = Tokenizer::from_json(j.dump(), "test");
  // Longest at the leftmost position; a normalized token matches after NFC.
  EXPECT_EQ(t->encode("<a><b>x<a>c"), (std::vector<int32_t>{51, 23, 50, 2}));
  EXPECT_EQ(t->encode("xabe\xcc\x81"), (std::vector<int32_t>{23, 52, 53}));
  EXPECT_EQ(t->id_to_token(53), "\xc3\xa9");
}

}  // namespace
}  // namespace ditto
