// The Tokenizer on the real Qwen3 and Llama-3.1 tokenizer.json files: ids against Hugging Face,
// special tokens, decode round trips, skip_special_tokens, clean-up, and concurrent encodes.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tokenizer/test_tokenizers.h"

namespace ditto {
namespace {

struct IdsCase {
  std::string text;
  std::vector<int32_t> ids;  // add_special_tokens=false
};

// Expected ids: the JavaScript oracle (tests/tokenizer/js_tokenize.mjs, @lenml/tokenizers) with
// add_special_tokens=false, cross-checked with Hugging Face tokenizers 0.23.2 (the Rust library,
// npm package "tokenizers"). The last three strings are Hugging Face's ids only: there the JS
// oracle differs (JavaScript's \s includes U+FEFF and excludes U+0085; Oniguruma's, i.e. Hugging
// Face's, is Unicode White_Space), and U+180E is where PCRE2's \s differs (see regex.cc).
const std::vector<IdsCase>& qwen3_cases() {
  static const std::vector<IdsCase> cases = {
      {"Hello, world!", {9707, 11, 1879, 0}},
      {"<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
       {151644, 872, 198, 13048, 1052, 151645, 198, 151644, 77091, 198}},
      {"   leading spaces and   runs    \t\t tabs  ", {256, 6388, 12621, 323, 256, 8473, 15287, 22398, 256}},
      {"line1\r\nline2\r\n\r\nend\n\n\n", {1056, 16, 319, 1056, 17, 871, 408, 1406}},
      {"1234567890 3.14159 2024-01-01", {16, 17, 18, 19,  20, 21, 22, 23, 24, 15, 220, 18, 13, 16, 19,
                                         16, 20, 24, 220, 17, 15, 17, 19, 12, 15, 16,  12, 15, 16}},
      {"I'M HE'S WE'LL THEY'RE I'D YOU'VE isn't don't",
       {40, 27603, 11685, 13272, 19677, 6, 4086, 62493, 94153, 358, 27705, 14985, 6, 4491, 4436, 944, 1513, 944}},
      {"中文测试，日本語のテキスト、한국어 문장",
       {104811, 81705, 3837, 101059, 102819, 15767, 56833, 61803, 70534, 5373, 23573, 124785, 31079, 53435, 40853}},
      {"👨\u200d👩\u200d👧\u200d👦 family 🇺🇸 flag 👍🏽 ok",
       {145367, 378,   235, 145233, 378,    235,  145665, 378, 235,    145988,
        2997,   11162, 229, 118,    145383, 5181, 61804,  235, 145375, 5394}},
      {"cafe\u0301 A\u030a \u212b", {924, 58858, 79252, 79252}},
      {"", {}},
      {"<think>\nreasoning\n</think>\n\nanswer", {151667, 198, 19895, 287, 198, 151668, 271, 9217}},
      {"<|begin_of_text|>Hello<|eot_id|>", {27, 91, 7265, 3575, 4326, 91, 29, 9707, 27, 91, 68, 354, 842, 91, 29}},
      {"def f(x):\n    return x**2  # square\n", {750, 282, 2075, 982, 262, 470, 856, 334, 17, 220, 671, 9334, 198}},
      {"a \ufeff!", {64, 75780, 0}},
      {"中 \u0085'll", {15946, 220, 126, 227, 3278}},
      {"a \u180e!", {64, 86089, 254, 236, 0}},
  };
  return cases;
}

const std::vector<IdsCase>& llama3_cases() {
  static const std::vector<IdsCase> cases = {
      {"Hello, world!", {9906, 11, 1917, 0}},
      {"<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
       {27,  91,   318, 5011, 91, 29, 882, 198,  13347, 1070, 27,    91,
        318, 6345, 91,  397,  27, 91, 318, 5011, 91,    29,   78191, 198}},
      {"   leading spaces and   runs    \t\t tabs  ", {256, 6522, 12908, 323, 256, 8640, 15646, 23204, 256}},
      {"line1\r\nline2\r\n\r\nend\n\n\n", {1074, 16, 319, 1074, 17, 881, 408, 1432}},
      {"1234567890 3.14159 2024-01-01",
       {4513, 10961, 16474, 15, 220, 18, 13, 9335, 2946, 220, 2366, 19, 12, 1721, 12, 1721}},
      {"I'M HE'S WE'LL THEY'RE I'D YOU'VE isn't don't",
       {40, 28703, 11947, 13575, 20255, 6, 4178, 63593, 95253, 358, 28805, 15334, 6, 4592, 4536, 956, 1541, 956}},
      {"中文测试，日本語のテキスト、한국어 문장",
       {108891, 82805, 3922, 102433, 102158, 16144, 57933, 62903, 71634, 5486, 112699, 32179, 54535, 41953}},
      {"👨\u200d👩\u200d👧\u200d👦 family 🇺🇸 flag 👍🏽 ok",
       {9468, 239,   101, 102470, 9468, 239, 102, 102470, 9468,  239, 100,  102470, 9468, 239, 99,
        3070, 11410, 229, 118,    9468, 229, 116, 5292,   62904, 235, 9468, 237,    121,  5509}},
      {"cafe\u0301 A\u030a \u212b", {936, 1897, 54939, 362, 136, 232, 29753, 104}},
      {"", {}},
      {"<think>\nreasoning\n</think>\n\nanswer", {14023, 771, 397, 20489, 287, 198, 524, 27963, 1363, 9399}},
      {"<|begin_of_text|>Hello<|eot_id|>", {128000, 9906, 128009}},
      {"def f(x):\n    return x**2  # square\n", {755, 282, 2120, 997, 262, 471, 865, 334, 17, 220, 674, 9518, 198}},
      {"a \ufeff!", {64, 76880, 0}},
      {"中 \u0085'll", {16325, 220, 116360, 3358}},
      {"a \u180e!", {64, 87189, 254, 236, 0}},
  };
  return cases;
}

std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

TEST(TokenizerTest, Qwen3IdsMatchHuggingFace) {
  DITTO_REQUIRE_TOKENIZER(t, "qwen3");
  for (const IdsCase& c : qwen3_cases()) {
    EXPECT_EQ(t->encode(c.text, false), c.ids) << c.text;
    EXPECT_EQ(t->encode(c.text, true), c.ids) << c.text;  // Qwen3 adds no special tokens
  }
}

TEST(TokenizerTest, Llama3IdsMatchHuggingFace) {
  DITTO_REQUIRE_TOKENIZER(t, "llama3_1");
  for (const IdsCase& c : llama3_cases()) {
    EXPECT_EQ(t->encode(c.text, false), c.ids) << c.text;
    std::vector<int32_t> with_bos = {128000};  // TemplateProcessing: <|begin_of_text|> $A
    with_bos.insert(with_bos.end(), c.ids.begin(), c.ids.end());
    EXPECT_EQ(t->encode(c.text, true), with_bos) << c.text;
  }
}

TEST(TokenizerTest, DecodeRoundTrips) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  DITTO_REQUIRE_TOKENIZER(llama, "llama3_1");
  for (const IdsCase& c : qwen3_cases()) EXPECT_EQ(qwen->decode(qwen->encode(c.text), false, false), nfc(c.text));
  for (const IdsCase& c : llama3_cases()) {
    EXPECT_EQ(llama->decode(llama->encode(c.text, false), false, false), c.text);
    EXPECT_EQ(llama->decode(llama->encode(c.text, true), false, false), "<|begin_of_text|>" + c.text);
  }
}

TEST(TokenizerTest, SpecialTokensAndConfig) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  DITTO_REQUIRE_TOKENIZER(llama, "llama3_1");
  EXPECT_EQ(qwen->vocab_size(), 151669);
  EXPECT_EQ(llama->vocab_size(), 128256);
  EXPECT_EQ(qwen->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(qwen->token_to_id("\xc4\xa0hello"), 23811);  // "Ġhello"
  EXPECT_EQ(qwen->id_to_token(151667), "<think>");
  EXPECT_EQ(qwen->id_to_token(23811), "\xc4\xa0hello");
  EXPECT_EQ(qwen->id_to_token(999999), std::nullopt);
  EXPECT_TRUE(qwen->is_special(151643));   // <|endoftext|>
  EXPECT_FALSE(qwen->is_special(151667));  // <think> is an added token, not special
  EXPECT_FALSE(qwen->is_special(23811));
  EXPECT_EQ(qwen->eos_token_ids(), (std::vector<int32_t>{151645}));
  EXPECT_EQ(qwen->bos_token_id(), std::nullopt);
  EXPECT_FALSE(qwen->clean_up_tokenization_spaces());
  EXPECT_EQ(llama->eos_token_ids(), (std::vector<int32_t>{128009}));
  EXPECT_EQ(llama->bos_token_id(), 128000);
  EXPECT_TRUE(llama->clean_up_tokenization_spaces());
  EXPECT_EQ(qwen->tokenizer_config().value("tokenizer_class", ""), "Qwen2Tokenizer");
}

TEST(TokenizerTest, SkipSpecialTokensAndCleanUp) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  DITTO_REQUIRE_TOKENIZER(llama, "llama3_1");
  const auto ids = qwen->encode("<|im_start|>user\nHi<|im_end|><think>x</think>");
  EXPECT_EQ(qwen->decode(ids), "<|im_start|>user\nHi<|im_end|><think>x</think>");
  EXPECT_EQ(qwen->decode(ids, true), "user\nHi<think>x</think>");  // <think> is not special
  // Llama-3.1's tokenizer_config.json sets clean_up_tokenization_spaces: transformers' rules.
  const auto l = llama->encode("Hello , world . I 'm sure it isn 't ! ' quoted ' ok ?", true);
  // Expected text: Python's str.replace chain of transformers' clean_up_tokenization.
  EXPECT_EQ(llama->decode(l, true), "Hello, world. I'm sure it isn 't!'quoted'ok?");
  EXPECT_EQ(llama->decode(l, true, false), "Hello , world . I 'm sure it isn 't ! ' quoted ' ok ?");
  EXPECT_EQ(llama->decode(l), "<|begin_of_text|>Hello, world. I'm sure it isn 't!'quoted'ok?");
}

TEST(TokenizerTest, DecodeInvalidUtf8AndUnknownIds) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  // Byte tokens: the byte-level characters 'Ã' (U+00C3) and '©' (U+00A9) stand for bytes 0xC3, 0xA9.
  const int32_t c3 = *qwen->token_to_id("\xc3\x83");  // byte 0xC3
  const int32_t a9 = *qwen->token_to_id("\xc2\xa9");  // byte 0xA9
  const int32_t a = *qwen->token_to_id("a");
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{c3, a9}), "\xc3\xa9");  // é from two byte tokens
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{c3, a}),
            "\xef\xbf\xbd"
            "a");
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{a9, a9}), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{a, 999999, -1, a}), "aa");  // unknown ids are skipped
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{}), "");
}

TEST(TokenizerTest, EncodeRejectsInvalidUtf8) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  try {
    qwen->encode(std::string("ab\xc3", 3));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("byte offset 2"), std::string::npos) << e.what();
  }
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  DITTO_REQUIRE_TOKENIZER(qwen, "qwen3");
  std::vector<std::string> texts;
  for (const IdsCase& c : qwen3_cases()) texts.push_back(c.text);
  std::string long_text;
  for (int i = 0; i < 50; ++i) long_text += texts[i % texts.size()] + " " + std::to_string(i * 7919) + "\n";
  texts.push_back(long_text);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : texts) expected.push_back(qwen->encode(s));
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (qwen->encode(texts[(i + w) % texts.size()]) != expected[(i + w) % texts.size()]) ++failures[w];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace ditto
