#include "tokenizer/chat_template.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/py_format.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

std::string type_of(const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::null: return "null";
    case ordered_json::value_t::boolean: return "a boolean";
    case ordered_json::value_t::number_integer:
    case ordered_json::value_t::number_unsigned:
    case ordered_json::value_t::number_float: return "a number";
    case ordered_json::value_t::string: return "a string";
    case ordered_json::value_t::array: return "an array";
    case ordered_json::value_t::object: return "an object";
    default: return "an unsupported value";
  }
}

std::string read_file(const fs::path& path) { return read_text_file(path.string()); }

ordered_json read_json(const fs::path& path) { return read_json_file<ordered_json>(path.string(), false); }

// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
jinja::Value hf_tojson(jinja::Interpreter&, const jinja::Value& v, jinja::CallArgs& args) {
  jinja::BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  jinja::JsonOptions o;
  o.ensure_ascii = a.get_or(0, jinja::Value(false)).truthy();
  if (a.has(1) && !a.get(1).is_none()) {
    const jinja::Value& indent = a.get(1);
    if (indent.is_string()) {
      o.indent = indent.as_string();
    } else {
      const int64_t n = jinja::int_argument(indent, "tojson");
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 16)), ' ');
    }
  }
  if (a.has(2) && !a.get(2).is_none()) {
    const jinja::Value& sep = a.get(2);
    if (!sep.is_sequence() || sep.as_list().size() != 2 || !sep.as_list()[0].is_string() ||
        !sep.as_list()[1].is_string()) {
      throw jinja::RuntimeError("ValueError: tojson(separators=...) expects a pair of strings");
    }
    o.item_separator = sep.as_list()[0].as_string();
    o.key_separator = sep.as_list()[1].as_string();
  }
  o.sort_keys = a.get_or(3, jinja::Value(false)).truthy();
  return jinja::Value(jinja::py_json_dumps(v, o));
}

jinja::Environment make_hf_environment() {
  jinja::Environment env = jinja::Environment::jinja2_defaults();
  env.lexer.trim_blocks = true;
  env.lexer.lstrip_blocks = true;
  env.loop_controls = true;
  env.scope_tags.insert("generation");  // transformers' AssistantTracker: renders its body as is
  env.filters["tojson"] = hf_tojson;
  env.globals["raise_exception"] =
      jinja::Value::callable("raise_exception", [](jinja::Interpreter&, jinja::CallArgs& args) -> jinja::Value {
        jinja::BoundArgs a("raise_exception", args, {"message"}, 1);
        throw jinja::RuntimeError(jinja::py_str(a.get(0)), /*raised_by_template=*/true);
      });
  env.globals["strftime_now"] = jinja::Value::callable("strftime_now", [](jinja::Interpreter&, jinja::CallArgs& args) {
    jinja::BoundArgs a("strftime_now", args, {"format"}, 1);
    const std::string& format = jinja::string_argument(a.get(0), "strftime_now");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[512];
    const size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
    return jinja::Value(std::string(buf, n));
  });
  return env;
}

// The message rules documented on ChatTemplate::render.
void validate_messages(const ordered_json& messages) {
  if (!messages.is_array())
    throw_invalid_argument("messages: expected an array of message objects, got " + type_of(messages));
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw_invalid_argument(where + ": expected an object, got " + type_of(m));
    if (!m.contains("role")) throw_invalid_argument(where + ": missing field 'role'");
    if (!m["role"].is_string()) throw_invalid_argument(where + ".role: expected a string, got " + type_of(m["role"]));
    const std::string& role = m["role"].get_ref<const std::string&>();
    const bool has_tool_calls = m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty();
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      const ordered_json& calls = m["tool_calls"];
      if (!calls.is_array()) throw_invalid_argument(where + ".tool_calls: expected an array, got " + type_of(calls));
      for (size_t k = 0; k < calls.size(); ++k) {
        if (!calls[k].is_object()) {
          throw_invalid_argument(where + ".tool_calls[" + std::to_string(k) + "]: expected an object, got " +
                                 type_of(calls[k]));
        }
      }
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_string() && !m["reasoning_content"].is_null()) {
      throw_invalid_argument(where + ".reasoning_content: expected a string or null, got " +
                             type_of(m["reasoning_content"]));
    }
    const bool may_omit = role == "assistant" && has_tool_calls;
    if (!m.contains("content")) {
      if (may_omit) continue;
      throw_invalid_argument(where +
                             ": missing field 'content' (only an assistant message with tool_calls may omit it)");
    }
    const ordered_json& content = m["content"];
    if (content.is_string()) continue;
    if (content.is_null()) {
      if (may_omit) continue;
      throw_invalid_argument(where + ".content: null is allowed only in an assistant message with tool_calls");
    }
    if (content.is_object() && (role == "tool" || role == "ipython")) continue;
    if (content.is_array()) {
      for (size_t k = 0; k < content.size(); ++k) {
        const ordered_json& part = content[k];
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
          throw_invalid_argument(where + ".content[" + std::to_string(k) +
                                 "]: expected a content part object with a string 'type', got " + type_of(part));
        }
      }
      continue;
    }
    throw_invalid_argument(where + ".content: expected a string or a list of content parts, got " + type_of(content));
  }
}

void validate_tools(const ordered_json& tools) {
  if (tools.is_null()) return;
  if (!tools.is_array())
    throw_invalid_argument("tools: expected an array of tool objects or null, got " + type_of(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!tools[i].is_object()) {
      throw_invalid_argument("tools[" + std::to_string(i) + "]: expected an object, got " + type_of(tools[i]));
    }
  }
}

}  // namespace

std::shared_ptr<const jinja::Environment> hf_chat_template_environment() {
  static const std::shared_ptr<const jinja::Environment> env =
      std::make_shared<const jinja::Environment>(make_hf_environment());
  return env;
}

void ChatTemplate::add_template(const std::string& name, const std::string& source_text,
                                const std::string& display_name) {
  templates_.emplace_back(name, jinja::Template::parse(source_text, display_name, hf_chat_template_environment()));
  static const std::regex loop_over_content(R"(for\s+\w+\s+in\s+\w+\s*(\.\s*content\b|\[\s*['"]content['"]\s*\]))");
  reads_content_parts_ = reads_content_parts_ || std::regex_search(source_text, loop_over_content);
}

ChatTemplate ChatTemplate::with_template(const std::string& template_text, const std::string& source) const {
  ChatTemplate t;
  t.add_template("", template_text, source);
  t.special_tokens_ = special_tokens_;
  return t;
}

void ChatTemplate::set_special_tokens(const ordered_json& config, const std::string& source) {
  if (!config.is_object()) return;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const ordered_json& v = config[key];
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      text = v["content"].get<std::string>();  // an AddedToken written out as {"content": ..., ...}
    } else {
      throw_invalid_argument(source + ": " + key + ": expected a string or {\"content\": ...}, got " + type_of(v));
    }
    // transformers' special_tokens_map keeps only the set (truthy) ones.
    if (!text.empty()) special_tokens_.emplace_back(key, text);
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    ordered_json list = ordered_json::array();
    for (const ordered_json& t : config["additional_special_tokens"]) {
      if (t.is_string()) {
        list.push_back(t);
      } else if (t.is_object() && t.contains("content") && t["content"].is_string()) {
        list.push_back(t["content"]);
      } else {
        throw_invalid_argument(source + ": additional_special_tokens: expected strings or {\"content\": ...} objects");
      }
    }
    if (!list.empty()) special_tokens_.emplace_back("additional_special_tokens", std::move(list));
  }
}

ChatTemplate ChatTemplate::from_config(const ordered_json& config, const std::string& source) {
  if (!config.is_object()) throw_invalid_argument(source + ": expected a JSON object, got " + type_of(config));
  ChatTemplate t;
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    throw_not_found(source + ": no 'chat_template' (the model has no chat template; base models have none)");
  }
  const ordered_json& ct = config["chat_template"];
  if (ct.is_string()) {
    t.add_template("", ct.get<std::string>(), source);
  } else if (ct.is_array()) {
    for (size_t i = 0; i < ct.size(); ++i) {
      const ordered_json& e = ct[i];
      const std::string where = source + ": chat_template[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string()) {
        throw_invalid_argument(where + ": expected {\"name\": string, \"template\": string}");
      }
      const std::string name = e["name"].get<std::string>();
      t.add_template(name, e["template"].get<std::string>(), source + " chat_template '" + name + "'");
    }
    if (t.templates_.empty()) throw_invalid_argument(source + ": chat_template: empty list");
  } else {
    throw_invalid_argument(source + ": chat_template: expected a string or a list of {name, template}, got " +
                           type_of(ct));
  }
  t.set_special_tokens(config, source);
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const fs::path config_path = dir / "tokenizer_config.json";
  const bool has_config = fs::exists(config_path);
  const ordered_json config = has_config ? read_json(config_path) : ordered_json::object();
  const fs::path jinja_path = dir / "chat_template.jinja";
  const fs::path json_path = dir / "chat_template.json";
  if (fs::exists(jinja_path)) {
    ChatTemplate t;
    const fs::path extra_dir = dir / "additional_chat_templates";
    const bool named = fs::is_directory(extra_dir);
    t.add_template(named ? "default" : "", read_file(jinja_path), jinja_path.string());
    if (named) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(extra_dir)) {
        if (entry.path().extension() == ".jinja") files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) t.add_template(f.stem().string(), read_file(f), f.string());
    }
    t.set_special_tokens(config, config_path.string());
    return t;
  }
  if (fs::exists(json_path)) {
    ordered_json merged = read_json(json_path);
    if (!merged.is_object() || !merged.contains("chat_template")) {
      throw_invalid_argument(json_path.string() + ": expected an object with a 'chat_template' field");
    }
    ChatTemplate t = from_config(ordered_json{{"chat_template", merged["chat_template"]}}, json_path.string());
    t.set_special_tokens(config, config_path.string());
    return t;
  }
  if (!has_config) {
    throw_not_found(model_dir +
                    ": no chat template (looked for chat_template.jinja, chat_template.json and "
                    "tokenizer_config.json)");
  }
  return from_config(config, config_path.string());
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : templates_) names.push_back(name);
  return names;
}

std::string ChatTemplate::render(const ordered_json& messages, const ordered_json& tools, bool add_generation_prompt,
                                 const ordered_json& extra) const {
  validate_messages(messages);
  validate_tools(tools);
  if (!extra.is_object()) throw_invalid_argument("chat template kwargs: expected an object, got " + type_of(extra));
  for (const char* reserved : {"messages", "tools", "add_generation_prompt"}) {
    if (extra.contains(reserved)) {
      throw_invalid_argument(std::string("chat template kwargs: '") + reserved + "' is a named argument, not a kwarg");
    }
  }
  // Which template: transformers' get_chat_template.
  const jinja::Template* chosen = nullptr;
  if (templates_.size() == 1 && templates_[0].first.empty()) {
    if (extra.contains("chat_template")) {
      throw_invalid_argument(
          "chat template kwargs: 'chat_template' selects one of several named templates, and this "
          "model has a single one");
    }
    chosen = &templates_[0].second;
  } else {
    std::string want;
    if (extra.contains("chat_template") && extra["chat_template"].is_string()) {
      want = extra["chat_template"].get<std::string>();
    } else if (!tools.is_null() &&
               std::any_of(templates_.begin(), templates_.end(), [](const auto& t) { return t.first == "tool_use"; })) {
      want = "tool_use";
    } else {
      want = "default";
    }
    for (const auto& [name, t] : templates_) {
      if (name == want) chosen = &t;
    }
    if (chosen == nullptr) {
      std::string names;
      for (const auto& [name, t] : templates_) names += (names.empty() ? "'" : ", '") + name + "'";
      throw_invalid_argument("chat template '" + want + "' not found (this model has " + names + ")");
    }
  }
  jinja::Dict vars;
  for (const auto& [key, value] : special_tokens_) vars.set(jinja::Value(key), jinja::Value::from_json(value));
  for (const auto& [key, value] : extra.items()) {
    if (key == "chat_template") continue;
    vars.set(jinja::Value(key), jinja::Value::from_json(value));
  }
  vars.set(jinja::Value("messages"), jinja::Value::from_json(messages));
  vars.set(jinja::Value("tools"), jinja::Value::from_json(tools));
  if (!extra.contains("documents")) vars.set(jinja::Value("documents"), jinja::Value::none());
  vars.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
  return chosen->render(vars);
}

}  // namespace ditto
