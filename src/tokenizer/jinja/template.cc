#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace ditto::jinja {

TemplateError::TemplateError(Kind kind, const std::string& template_name, int line, const std::string& detail)
    : Error(ErrorCode::kInvalidArgument, "template '" + template_name + "', line " + std::to_string(line) + ": " +
                                             (kind == Kind::kSyntax   ? "syntax error: "
                                              : kind == Kind::kRaised ? "raise_exception: "
                                                                      : "") +
                                             detail),
      kind_(kind),
      template_name_(template_name),
      line_(line),
      detail_(detail) {}

Template Template::parse(std::string_view source, std::string name, std::shared_ptr<const Environment> env) {
  const std::vector<Token> tokens = tokenize(source, env->lexer);
  auto ast = std::make_shared<TemplateAst>(parse_template(tokens, name, *env));
  return Template(std::move(name), std::move(env), std::move(ast));
}

std::string Template::render(const Dict& vars) const {
  Interpreter interpreter(*env_, name_);
  return interpreter.render(*ast_, vars);
}

}  // namespace ditto::jinja
