// The tokenizer, chat template and end-of-generation ids of a GGUF file (engine/model_files.h), on
// small files written with GgufWriter: what loads, and what a broken file says (the key, the merge
// or the template at fault), never a crash.
#include "engine/model_files.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "architecture/config.h"
#include "checkpoint/gguf_writer.h"
#include "core/error.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using testing::error_message;
using testing::TempDir;

// A tokenizer-only GGUF: byte-level tokens for "h", "i", " " and their merge, an end token, a
// chat template; `edit` changes the keys before they are written.
struct TinyVocab {
  std::vector<std::string> tokens = {"h", "i", "Ġ", "hi", "<|end|>"};
  std::vector<int32_t> types = {1, 1, 1, 1, 3};
  std::vector<std::string> merges = {"h i"};
  std::string chat_template =
      "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|end|>{% endfor %}"
      "{% if add_generation_prompt %}assistant: {% endif %}";
  std::string path;

  void write(const TempDir& dir, const std::string& name) {
    path = dir.file(name);
    GgufWriter w(path);
    w.add_string("general.architecture", "llama");
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "smollm");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.eos_token_id", 4);
    w.add_u32("tokenizer.ggml.eot_token_id", 4);
    if (!chat_template.empty()) w.add_string("tokenizer.chat_template", chat_template);
    w.add_tensor({"x", GgmlType::kF32, {1}});
    const float zero = 0;
    w.write_tensor_data(&zero, 4);
    w.finish();
  }
};

TEST(ModelFiles, TokenizerTemplateAndEosFromAGgufFile) {
  TempDir dir;
  TinyVocab v;
  v.write(dir, "tiny.gguf");
  const auto tokenizer = load_tokenizer(v.path);
  EXPECT_EQ(tokenizer->encode("hi<|end|>", /*add_special_tokens=*/false), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{3, 2, 0}), "hi h");
  EXPECT_TRUE(tokenizer->is_special(4));
  const ChatTemplate t = load_chat_template(v.path);
  ModelConfig c;
  c.vocab_size = 5;
  EXPECT_EQ(model_eos_token_ids(v.path, c), (std::vector<int64_t>{4}));  // <|end|>: eos, eot
}

TEST(ModelFiles, BrokenTokenizersAndTemplatesNameWhatIsWrong) {
  TempDir dir;
  TinyVocab missing_merge;
  missing_merge.merges = {"h x"};
  missing_merge.write(dir, "merge.gguf");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_tokenizer(missing_merge.path); }, ErrorCode::kInvalidArgument),
                           "merge.gguf", "h x");

  TinyVocab bad_template;
  bad_template.chat_template = "{% for m in messages %}{{ m['content'] }";
  bad_template.write(dir, "template.gguf");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_chat_template(bad_template.path); }, ErrorCode::kInvalidArgument),
                           "template.gguf", "tokenizer.chat_template");

  TinyVocab no_template;
  no_template.chat_template.clear();
  no_template.write(dir, "notemplate.gguf");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_chat_template(no_template.path); }, ErrorCode::kNotFound),
                           "notemplate.gguf", "tokenizer.chat_template' is missing");

  TinyVocab bad_types;
  bad_types.types = {1, 1};
  bad_types.write(dir, "types.gguf");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_tokenizer(bad_types.path); }, ErrorCode::kInvalidArgument),
                           "types.gguf", "token_type");

  TinyVocab unknown_pre;
  unknown_pre.write(dir, "pre.gguf");
  {
    GgufWriter w(dir.file("pre.gguf"));  // the same, with a pre-tokenizer nobody knows
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "no-such-pre");
    w.add_string_array("tokenizer.ggml.tokens", unknown_pre.tokens);
    w.finish();
  }
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_tokenizer(dir.file("pre.gguf")); }, ErrorCode::kInvalidArgument),
                           "tokenizer.ggml.pre", "no-such-pre");

  {
    GgufWriter w(dir.file("none.gguf"));
    w.add_string("general.architecture", "llama");
    w.finish();
  }
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_tokenizer(dir.file("none.gguf")); }, ErrorCode::kNotFound),
                           "none.gguf", "tokenizer.ggml.tokens");
}

}  // namespace
}  // namespace ditto
