// Helpers for the jinja unit tests: render a template string with JSON variables.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja/template.h"

namespace ditto::jinja::testing {

// jinja2's defaults plus, when `hf` is set, transformers' trim_blocks/lstrip_blocks/loopcontrols.
inline std::shared_ptr<const Environment> test_environment(bool hf) {
  Environment env = Environment::jinja2_defaults();
  if (hf) {
    env.lexer.trim_blocks = true;
    env.lexer.lstrip_blocks = true;
    env.loop_controls = true;
  }
  return std::make_shared<const Environment>(std::move(env));
}

inline std::string render(const std::string& source, const std::string& vars_json = "{}", bool hf = false) {
  static const auto plain = test_environment(false);
  static const auto chat = test_environment(true);
  const Template t = Template::parse(source, "test", hf ? chat : plain);
  const Value vars = Value::from_json(nlohmann::ordered_json::parse(vars_json));
  return t.render(vars.as_dict());
}

}  // namespace ditto::jinja::testing
