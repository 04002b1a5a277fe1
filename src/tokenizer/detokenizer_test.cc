// IncrementalDetokenizer: the concatenated stream equals decode() for text, characters split
// across byte tokens, invalid UTF-8, special tokens (kept and skipped) and clean-up on and off;
// and CleanUpStream equals clean_up_tokenization for every split of its input.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/test_tokenizers.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

const std::vector<std::string>& texts() {
  static const std::vector<std::string> t = {
      "Hello, world! It's a test , isn 't it ? Yes . I 'm sure they 're right ' quoted ' n't",
      "中文测试，日本語のテキスト、한국어 문장 👨\u200d👩\u200d👧 🇺🇸 👍🏽",
      "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n</think>\n\n4<|im_end|>",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi !<|eot_id|>",
      "   spaces   and\ttabs\r\n\r\nnew lines  .  , ",
      "cafe\u0301 \u212b e\u0301\u0323 \u0915\u093c",
      "",
  };
  return t;
}

// Byte tokens (one per byte value), special ids and a few ordinary ids: random sequences over
// them make invalid UTF-8, characters split across tokens and special tokens mid-character.
std::vector<std::vector<int32_t>> random_sequences(const Tokenizer& t, int n, uint32_t seed) {
  std::vector<int32_t> bytes, special, ordinary;
  for (int b = 0; b < 256; ++b) bytes.push_back(*t.token_to_id(byte_level::byte_to_utf8(static_cast<uint8_t>(b))));
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    if (t.is_special(id)) special.push_back(id);
  }
  for (const std::string& s : texts()) {
    for (const int32_t id : t.encode(s, false)) ordinary.push_back(id);
  }
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int k = 0; k < n; ++k) {
    std::vector<int32_t> seq;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) {
      const unsigned r = rng() % 8;
      const auto& pool = r < 4 ? bytes : r < 7 ? ordinary : special;
      seq.push_back(pool[rng() % pool.size()]);
    }
    out.push_back(std::move(seq));
  }
  return out;
}

void check_stream(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip, std::optional<bool> clean_up) {
  const std::string expected = t.decode(ids, skip, clean_up);
  IncrementalDetokenizer stream(t, skip, clean_up);
  std::string joined;
  for (const int32_t id : ids) {
    const std::string piece = stream.add(id);
    ASSERT_EQ(utf8::find_invalid(piece), std::string_view::npos);
    joined += piece;
    // What was emitted is final: a prefix of the full text.
    ASSERT_EQ(expected.compare(0, joined.size(), joined), 0) << "emitted text is not a prefix of decode()";
  }
  joined += stream.finish();
  ASSERT_EQ(joined, expected);
}

void check_tokenizer(const Tokenizer& t) {
  std::vector<std::vector<int32_t>> sequences = random_sequences(t, 400, 5);
  for (const std::string& s : texts()) {
    sequences.push_back(t.encode(s, true));
    // Every character split into its byte tokens: each is incomplete until its last byte.
    std::vector<int32_t> split;
    for (const int32_t id : t.encode(s, false)) {
      const std::string token = *t.id_to_token(id);
      size_t i = 0;
      while (i < token.size()) {
        const size_t begin = i;
        utf8::next(token, i);
        const auto single = t.token_to_id(token.substr(begin, i - begin));
        if (single) split.push_back(*single);
      }
    }
    sequences.push_back(split);
  }
  for (const auto& ids : sequences) {
    for (const bool skip : {false, true}) {
      for (const std::optional<bool> clean_up :
           {std::optional<bool>{}, std::optional<bool>{false}, std::optional<bool>{true}}) {
        check_stream(t, ids, skip, clean_up);
      }
    }
  }
}

TEST(IncrementalDetokenizerTest, StreamEqualsDecodeQwen3) {
  DITTO_REQUIRE_TOKENIZER(t, "qwen3");
  check_tokenizer(*t);
}

TEST(IncrementalDetokenizerTest, StreamEqualsDecodeLlama3) {
  DITTO_REQUIRE_TOKENIZER(t, "llama3_1");
  check_tokenizer(*t);
}

TEST(IncrementalDetokenizerTest, EmitsCompleteCharactersAsSoonAsTheyAreComplete) {
  DITTO_REQUIRE_TOKENIZER(t, "qwen3");
  // "中" is E4 B8 AD: three byte tokens; nothing is emitted until the last one.
  const std::string zhong = "\xe4\xb8\xad";
  const int32_t e4 = *t->token_to_id(byte_level::byte_to_utf8(0xE4));
  const int32_t b8 = *t->token_to_id(byte_level::byte_to_utf8(0xB8));
  const int32_t ad = *t->token_to_id(byte_level::byte_to_utf8(0xAD));
  IncrementalDetokenizer stream(*t, false, false);
  EXPECT_EQ(stream.add(e4), "");
  EXPECT_EQ(stream.add(b8), "");
  EXPECT_EQ(stream.add(ad), zhong);
  EXPECT_EQ(stream.add(e4), "");
  EXPECT_EQ(stream.finish(), "\xef\xbf\xbd");  // an incomplete character at the end
  // After finish() the object decodes a new sequence.
  EXPECT_EQ(stream.add(*t->token_to_id("hi")), "hi");
  EXPECT_EQ(stream.finish(), "");
}

TEST(CleanUpStreamTest, EveryFeedSplitGivesTheWholeCleanUp) {
  const std::string alphabet = " nt'msvre.,?!ax";
  std::mt19937 rng(9);
  for (int k = 0; k < 20000; ++k) {
    std::string s;
    const int n = static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
    CleanUpStream stream;
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const size_t len = std::min<size_t>(s.size() - i, rng() % 4);
      stream.feed(std::string_view(s).substr(i, len), out);
      i += len;
    }
    stream.finish(out);
    ASSERT_EQ(out, clean_up_tokenization(s)) << "'" << s << "'";
  }
}

TEST(CleanUpStreamTest, MatchesTransformersRules) {
  // Expected values: Python's str.replace chain of transformers' clean_up_tokenization.
  EXPECT_EQ(clean_up_tokenization("a . b , c ? d ! e"), "a. b, c? d! e");
  EXPECT_EQ(clean_up_tokenization("do n't I 'm it 's we 've they 're"), "don't I'm it's we've they're");
  EXPECT_EQ(clean_up_tokenization("x n ' t"), "xn't");  // " ' " first, then " n't"
  EXPECT_EQ(clean_up_tokenization("  ."), " .");
}

}  // namespace
}  // namespace ditto
