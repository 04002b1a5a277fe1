// A compiled Jinja template: the entry point of the jinja library.
//
//   auto env = std::make_shared<const jinja::Environment>(jinja::Environment::jinja2_defaults());
//   jinja::Template t = jinja::Template::parse("Hello {{ name }}!", "greeting", env);
//   jinja::Dict vars;
//   vars.set(jinja::Value("name"), jinja::Value("world"));
//   t.render(vars);  // "Hello world!"
//
// Semantics follow jinja2 3.1 (Python) as closely as the supported subset allows; see
// docs in environment.h for what is configurable. A Template is immutable after parse() and may be
// rendered from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

class Template {
 public:
  // Throws TemplateError(kSyntax) naming `name`, the line and what the parser expected.
  static Template parse(std::string_view source, std::string name, std::shared_ptr<const Environment> env);

  // Renders with `vars` as the template's variables. Throws TemplateError (kRuntime with the
  // line, or kRaised with raise_exception's message).
  std::string render(const Dict& vars) const;

  const std::string& name() const { return name_; }

 private:
  Template(std::string name, std::shared_ptr<const Environment> env, std::shared_ptr<const TemplateAst> ast)
      : name_(std::move(name)), env_(std::move(env)), ast_(std::move(ast)) {}

  std::string name_;
  std::shared_ptr<const Environment> env_;
  std::shared_ptr<const TemplateAst> ast_;
};

}  // namespace ditto::jinja
