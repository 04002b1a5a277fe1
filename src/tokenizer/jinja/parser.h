// jinja2's grammar over the lexer's tokens, producing the AST (same precedence and the same
// statement set: if/elif/else, for (with else, loop filter), set (also block set and namespace
// attributes), macro, call, filter, with, raw, print, and break/continue and extension scope tags
// when the environment enables them).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/lexer.h"

namespace ditto::jinja {

// Throws TemplateError(kSyntax) naming the template, the line and what was expected, e.g.
// "Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'.
// The innermost block that needs to be closed is 'for'." Unknown tags (include, extends, block,
// import, do, ...) fail with "Encountered unknown tag 'x'"; unknown filters and tests fail here too
// unless inside an if block (jinja2 defers those to render time).
TemplateAst parse_template(const std::vector<Token>& tokens, const std::string& template_name, const Environment& env);

}  // namespace ditto::jinja
