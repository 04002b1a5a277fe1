#include "engine/structured_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

constexpr int64_t kVocab = 151936;  // Qwen3's logit rows (the tokenizer has 151669 ids)
constexpr int32_t kEos = 151645;    // <|im_end|>
constexpr int32_t kEndOfText = 151643;

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = Tokenizer::load(DITTO_QWEN3_TOKENIZER_DIR).release();
    vocab_ = new std::shared_ptr<const GrammarVocabulary>(
        std::make_shared<GrammarVocabulary>(*tokenizer_, kVocab, std::vector<int32_t>{kEos, kEndOfText}));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tokenizer_;
  }

  static std::shared_ptr<const StructuredOutputGrammar> compile(const StructuredOutputsParams& p) {
    p.num_kinds();
    return StructuredOutputGrammar::compile(p, *vocab_);
  }
  static std::vector<uint32_t> mask_of(GrammarMatcher& m) {
    std::vector<uint32_t> mask((*vocab_)->mask_words(), 0xDEADBEEFu);
    EXPECT_TRUE(m.fill_mask(mask)) << m.error();
    return mask;
  }
  static int64_t count(const std::vector<uint32_t>& mask) {
    int64_t n = 0;
    for (uint32_t w : mask) n += __builtin_popcount(w);
    return n;
  }
  // Feeds `text`'s tokens one by one, each checked against the mask before it; then EOS.
  static void walk(GrammarMatcher& m, const std::string& text) {
    for (int32_t t : tokenizer_->encode(text, false)) {
      ASSERT_TRUE(mask_allows(mask_of(m), t)) << "token " << t << " of " << text;
      ASSERT_TRUE(m.accept(t)) << m.error();
    }
  }
  static std::string refusal(const StructuredOutputsParams& p, std::string* param = nullptr) {
    try {
      compile(p);
    } catch (const Error& e) {
      if (param != nullptr) *param = e.param();
      return e.what();
    }
    return "";
  }

  static Tokenizer* tokenizer_;
  static std::shared_ptr<const GrammarVocabulary>* vocab_;
};
Tokenizer* StructuredOutputTest::tokenizer_ = nullptr;
std::shared_ptr<const GrammarVocabulary>* StructuredOutputTest::vocab_ = nullptr;

TEST_F(StructuredOutputTest, JsonSchemaAllowsItsDocumentsThenOnlyEos) {
  StructuredOutputsParams p;
  p.json = R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer",
      "minimum": 0}}, "required": ["name", "age"], "additionalProperties": false})";
  const auto g = compile(p);
  EXPECT_EQ(g->kind(), "json");
  auto m = g->new_matcher();
  // At the start: '{' (and white space) but never a letter or EOS.
  const std::vector<uint32_t> first = mask_of(*m);
  EXPECT_TRUE(mask_allows(first, tokenizer_->encode("{", false)[0]));
  EXPECT_FALSE(mask_allows(first, tokenizer_->encode("hello", false)[0]));
  EXPECT_FALSE(mask_allows(first, kEos));
  EXPECT_LT(count(first), 1000);
  walk(*m, R"({"name": "Ada", "age": 36})");  // the schema's order (not sorted)
  EXPECT_TRUE(m->is_stopped());               // nothing may follow the object
  const std::vector<uint32_t> last = mask_of(*m);
  EXPECT_TRUE(mask_allows(last, kEos));
  EXPECT_TRUE(mask_allows(last, kEndOfText));
  EXPECT_EQ(count(last), 2);  // the EOS ids, nothing else
  EXPECT_FALSE(mask_allows(last, tokenizer_->encode(",", false)[0]));
  ASSERT_TRUE(m->accept(kEos)) << m->error();
  EXPECT_TRUE(m->is_stopped());
  EXPECT_FALSE(m->failed());
  // A token the schema does not allow fails the matcher, with the engine's reason.
  auto bad = g->new_matcher();
  EXPECT_FALSE(bad->accept(tokenizer_->encode("hello", false)[0]));
  EXPECT_TRUE(bad->failed());
  EXPECT_FALSE(bad->error().empty());
  std::vector<uint32_t> zero(g->vocabulary().mask_words(), 1u);
  EXPECT_FALSE(bad->fill_mask(zero));
  EXPECT_EQ(count(zero), 0);
}

TEST_F(StructuredOutputTest, TheSameTokensGiveTheSameMaskBits) {
  StructuredOutputsParams p;
  p.json = R"({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2})";
  const auto g = compile(p);
  const std::vector<int32_t> ids = tokenizer_->encode(R"(["red", "blue")", false);
  std::vector<std::vector<uint32_t>> masks_a, masks_b;
  auto a = g->new_matcher();
  for (int32_t t : ids) {
    masks_a.push_back(mask_of(*a));
    ASSERT_TRUE(a->accept(t));
  }
  // Another matcher of the same grammar, after another matcher ran elsewhere: the same bits.
  auto other = g->new_matcher();
  walk(*other, R"(["green", "green"])");
  auto b = g->new_matcher();
  for (int32_t t : ids) {
    masks_b.push_back(mask_of(*b));
    ASSERT_TRUE(b->accept(t));
  }
  ASSERT_EQ(masks_a.size(), masks_b.size());
  for (size_t i = 0; i < masks_a.size(); ++i)
    EXPECT_EQ(std::memcmp(masks_a[i].data(), masks_b[i].data(), masks_a[i].size() * 4), 0) << i;
}

TEST_F(StructuredOutputTest, RollbackUndoesGuessesAndValidPrefixStopsAtTheFirstBadOne) {
  StructuredOutputsParams p;
  p.regex = "[0-9]{3}-[a-z]+";
  auto m = compile(p)->new_matcher();
  const std::vector<uint32_t> before = mask_of(*m);
  const std::vector<int32_t> good = tokenizer_->encode("123-abc", false);
  EXPECT_EQ(m->valid_prefix(good), static_cast<int64_t>(good.size()));
  std::vector<int32_t> mixed = tokenizer_->encode("12", false);
  const int64_t n_ok = static_cast<int64_t>(mixed.size());
  mixed.push_back(tokenizer_->encode("x", false)[0]);
  EXPECT_EQ(m->valid_prefix(mixed), n_ok);
  for (int32_t t : good) ASSERT_TRUE(m->accept(t));
  ASSERT_TRUE(m->rollback(static_cast<int64_t>(good.size())));
  const std::vector<uint32_t> after = mask_of(*m);
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * 4), 0);
}

TEST_F(StructuredOutputTest, ChoiceAllowsExactlyItsStringsEvenWithRegexCharacters) {
  StructuredOutputsParams p;
  p.choice = std::vector<std::string>{"yes (sure)", "no.", "a|b"};
  const auto g = compile(p);
  for (const std::string& s : *p.choice) {
    auto m = g->new_matcher();
    walk(*m, s);
    EXPECT_TRUE(mask_allows(mask_of(*m), kEos)) << s;
  }
  auto m = g->new_matcher();
  EXPECT_EQ(m->valid_prefix(tokenizer_->encode("a", false)), 1);
  EXPECT_EQ(m->valid_prefix(tokenizer_->encode("b", false)), 0);  // "|" is literal
  EXPECT_EQ(escape_regex("a.b*(c)"), "a\\.b\\*\\(c\\)");
}

TEST_F(StructuredOutputTest, LarkGrammarAndJsonObject) {
  StructuredOutputsParams p;
  p.grammar = "start: \"SELECT \" column \" FROM t\"\ncolumn: \"a\" | \"b\"\n";
  auto m = compile(p)->new_matcher();
  walk(*m, "SELECT b FROM t");
  EXPECT_TRUE(mask_allows(mask_of(*m), kEos));
  StructuredOutputsParams o;
  o.json_object = true;
  o.disable_any_whitespace = true;
  auto j = compile(o)->new_matcher();
  EXPECT_FALSE(mask_allows(mask_of(*j), tokenizer_->encode("[", false)[0]));
  walk(*j, R"({"a":[1,2]})");
  EXPECT_EQ(j->valid_prefix(tokenizer_->encode(" ", false)), 0);  // no white space
}

TEST_F(StructuredOutputTest, DisableAdditionalPropertiesClosesObjects) {
  StructuredOutputsParams p;
  p.json = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  auto open = compile(p)->new_matcher();
  walk(*open, R"({"a": 1, "b": 2})");
  p.disable_additional_properties = true;
  auto closed = compile(p)->new_matcher();
  walk(*closed, R"({"a": 1)");
  EXPECT_EQ(closed->valid_prefix(tokenizer_->encode(R"(, "b)", false)), 0);
}

TEST_F(StructuredOutputTest, RefusalsNameTheFieldAndTheReason) {
  std::string param;
  StructuredOutputsParams bad_json;
  bad_json.json = "{\"type\": ";
  EXPECT_NE(refusal(bad_json, &param).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(param, "structured_outputs.json");
  StructuredOutputsParams bad_type;
  bad_type.json = R"({"type": "strnig"})";
  EXPECT_FALSE(refusal(bad_type, &param).empty());
  EXPECT_EQ(param, "structured_outputs.json");
  StructuredOutputsParams unsupported;
  unsupported.json = R"({"type": "array", "uniqueItems": true})";
  EXPECT_NE(refusal(unsupported, &param).find("uniqueItems"), std::string::npos);
  EXPECT_EQ(param, "structured_outputs.json");
  unsupported.json = R"({"type": "string", "format": "no-such-format-xyz"})";
  EXPECT_NE(refusal(unsupported).find("no-such-format-xyz"), std::string::npos);
  StructuredOutputsParams deep;
  deep.json = std::string(10000, '[') + std::string(10000, ']');
  EXPECT_NE(refusal(deep, &param).find("nested deeper than"), std::string::npos);
  StructuredOutputsParams big;
  big.regex = std::string(300000, 'a');
  EXPECT_NE(refusal(big, &param).find("too big: 300000 bytes"), std::string::npos);
  EXPECT_EQ(param, "structured_outputs.regex");
  // 1,000 optional properties (40 KB, under kMaxConstraintBytes) are refused at once, by count,
  // before llguidance's compile time (quadratic in them) could matter.
  nlohmann::ordered_json wide = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
  for (int i = 0; i < 1000; ++i) wide["properties"]["property_" + std::to_string(i)] = {{"type", "integer"}};
  StructuredOutputsParams too_wide;
  too_wide.json = wide.dump();
  EXPECT_NE(refusal(too_wide, &param).find("1000 optional properties"), std::string::npos);
  EXPECT_EQ(param, "structured_outputs.json");
  StructuredOutputsParams not_schema;
  not_schema.json = "42";
  EXPECT_NE(refusal(not_schema).find("object or a boolean"), std::string::npos);
  StructuredOutputsParams regex;
  regex.regex = "([a-z]+";
  EXPECT_FALSE(refusal(regex, &param).empty());
  EXPECT_EQ(param, "structured_outputs.regex");
  StructuredOutputsParams lark;
  lark.grammar = "start: (\"a\"";
  EXPECT_FALSE(refusal(lark, &param).empty());
  EXPECT_EQ(param, "structured_outputs.grammar");
  StructuredOutputsParams gbnf;
  gbnf.grammar = "root ::= \"a\" | \"b\"";
  EXPECT_NE(refusal(gbnf).find("GBNF"), std::string::npos);
  StructuredOutputsParams tag;
  tag.structural_tag = R"({"type": "structural_tag", "structures": [], "triggers": []})";
  EXPECT_NE(refusal(tag, &param).find("structural tags"), std::string::npos);
  EXPECT_EQ(param, "structured_outputs.structural_tag");
}

TEST_F(StructuredOutputTest, ValidationNeedsExactlyOneKind) {
  SamplingParams sp;
  sp.structured_outputs = StructuredOutputsParams{};
  EXPECT_THROW(sp.validate(kVocab), Error);
  sp.structured_outputs->regex = "a";
  EXPECT_NO_THROW(sp.validate(kVocab));
  sp.structured_outputs->json_object = true;
  try {
    sp.validate(kVocab);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.param(), "structured_outputs");
  }
  sp.structured_outputs = StructuredOutputsParams{};
  sp.structured_outputs->regex = "a";
  sp.structured_outputs->disable_any_whitespace = true;
  EXPECT_THROW(sp.validate(kVocab), Error);
  sp.structured_outputs = StructuredOutputsParams{};
  sp.structured_outputs->choice = std::vector<std::string>{};
  EXPECT_THROW(sp.validate(kVocab), Error);
}

}  // namespace
}  // namespace ditto
