// Statements of jinja2 (jinja2/parser.py): data, {{ output }}, and the tags if/elif/else, for
// (else, loop filter), set (plain, block, namespace attribute), macro, call, filter, with, block,
// print, autoescape, and break/continue / extension tags as the environment enables them.
#include "tokenizer/jinja/parser.h"

#include <set>

#include "tokenizer/jinja/parser_impl.h"

namespace ditto::jinja {
namespace detail {

bool Parser::at_end_tag(const EndTags& end) const {
  if (current().type != TokenType::kName) return false;
  for (const std::string& e : end) {
    if (current().text == e) return true;
  }
  return false;
}

StmtList Parser::subparse(const EndTags& end) {
  DepthGuard guard(this);
  StmtList body;
  if (!end.empty()) end_stack_.push_back(end);
  while (current().type != TokenType::kEof) {
    const Token& t = current();
    if (t.type == TokenType::kData) {
      auto s = make_stmt(StmtKind::kData, t.line);
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == TokenType::kVariableBegin) {
      next();
      auto s = make_stmt(StmtKind::kOutput, current().line);
      s->expr = parse_tuple(true, {}, false);
      body.push_back(std::move(s));
      expect(TokenType::kVariableEnd);
    } else if (t.type == TokenType::kBlockBegin) {
      next();
      if (!end.empty() && at_end_tag(end)) {
        end_stack_.pop_back();
        return body;
      }
      StmtPtr s = parse_statement();
      if (s) body.push_back(std::move(s));
      expect(TokenType::kBlockEnd);
    } else {
      fail("unexpected '" + describe_token(t) + "'");
    }
  }
  if (!end.empty()) end_stack_.pop_back();
  return body;
}

StmtList Parser::parse_statements(const EndTags& end, bool drop_needle) {
  skip_if(TokenType::kColon);
  expect(TokenType::kBlockEnd);
  StmtList body = subparse(end);
  if (current().type == TokenType::kEof) fail_eof(end);
  if (drop_needle) next();
  return body;
}

[[noreturn]] void Parser::fail_unknown(const std::string* tag_name, std::vector<EndTags> stack) {
  std::set<std::string> expected;
  for (const EndTags& e : stack) expected.insert(e.begin(), e.end());
  std::string looking;
  if (!stack.empty()) {
    for (size_t i = 0; i < stack.back().size(); ++i) looking += (i ? " or '" : "'") + stack.back()[i] + "'";
  }
  std::string message = tag_name ? "Encountered unknown tag '" + *tag_name + "'." : "Unexpected end of template.";
  if (!looking.empty()) {
    if (tag_name && expected.count(*tag_name)) {
      message += " You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for " +
                 looking + ".";
    } else {
      message += " Jinja was looking for the following tags: " + looking + ".";
    }
  }
  if (!tag_stack_.empty()) message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  fail(message);
}

[[noreturn]] void Parser::fail_eof(const EndTags& end) {
  auto stack = end_stack_;
  stack.push_back(end);
  fail_unknown(nullptr, stack);
}

StmtPtr Parser::parse_statement() {
  const Token& t = current();
  if (t.type != TokenType::kName) fail("tag name expected");
  const std::string tag = t.text;
  tag_stack_.push_back(tag);
  StmtPtr s;
  if (tag == "for") {
    s = parse_for();
  } else if (tag == "if") {
    s = parse_if();
  } else if (tag == "set") {
    s = parse_set();
  } else if (tag == "macro") {
    s = parse_macro();
  } else if (tag == "call") {
    s = parse_call_block();
  } else if (tag == "filter") {
    s = parse_filter_block();
  } else if (tag == "with") {
    s = parse_with();
  } else if (tag == "print") {
    s = parse_print();
  } else if (tag == "autoescape") {
    next();
    parse_expression(true);
    s = make_stmt(StmtKind::kScope, t.line);
    s->body = parse_statements({"endautoescape"}, true);
  } else if ((tag == "break" || tag == "continue") && env_.loop_controls) {
    if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
    s = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, t.line);
    next();
  } else if (tag == "block") {
    // Without {% extends %} (unsupported) a block renders in place, in its own scope.
    const int line = next().line;
    const std::string block_name = expect(TokenType::kName).text;
    skip_name("scoped");
    skip_name("required");
    s = make_stmt(StmtKind::kWith, line);
    s->body = parse_statements({"endblock"}, true);
    if (current().type == TokenType::kName) {
      if (current().text != block_name) fail("mismatching name for endblock: '" + current().text + "'");
      next();
    }
  } else if (env_.scope_tags.count(tag)) {
    const int line = next().line;
    s = make_stmt(StmtKind::kScope, line);
    s->body = parse_statements({"end" + tag}, true);
  } else {
    tag_stack_.pop_back();
    fail_unknown(&tag, end_stack_);
  }
  tag_stack_.pop_back();
  return s;
}

StmtPtr Parser::parse_for() {
  auto s = make_stmt(StmtKind::kFor, expect_name("for").line);
  s->target = parse_assign_target(true, false, {"in"}, false);
  expect_name("in");
  s->expr = parse_tuple(false, {"recursive"}, false);
  if (skip_name("if")) s->test = parse_expression(true);
  if (skip_name("recursive")) fail("recursive for loops are not supported");
  ++loop_depth_;
  s->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (next().text != "endfor") {
    // In the else block break/continue would refer to an enclosing loop, if any.
    s->else_body = parse_statements({"endfor"}, true);
  }
  return s;
}

StmtPtr Parser::parse_if() {
  auto s = make_stmt(StmtKind::kIf, expect_name("if").line);
  ++if_depth_;
  Stmt* node = s.get();
  while (true) {
    node->expr = parse_tuple(false, {}, false);
    node->body = parse_statements({"elif", "else", "endif"}, false);
    const Token& t = next();
    if (t.text == "elif") {
      auto elif = make_stmt(StmtKind::kIf, current().line);
      Stmt* raw = elif.get();
      node->else_body.push_back(std::move(elif));
      node = raw;
      continue;
    }
    if (t.text == "else") node->else_body = parse_statements({"endif"}, true);
    break;
  }
  --if_depth_;
  return s;
}

StmtPtr Parser::parse_set() {
  const int line = next().line;
  ExprPtr target = parse_assign_target(true, false, {}, true);
  if (skip_if(TokenType::kAssign)) {
    auto s = make_stmt(StmtKind::kSet, line);
    s->target = std::move(target);
    s->expr = parse_tuple(true, {}, false);
    return s;
  }
  auto s = make_stmt(StmtKind::kSetBlock, line);
  s->target = std::move(target);
  if (current().type == TokenType::kPipe) s->expr = parse_filter(nullptr, false);
  s->body = parse_statements({"endset"}, true);
  return s;
}

void Parser::parse_signature(Stmt& s) {
  expect(TokenType::kLParen);
  while (current().type != TokenType::kRParen) {
    if (!s.params.empty()) expect(TokenType::kComma);
    s.params.push_back(expect(TokenType::kName).text);
    if (skip_if(TokenType::kAssign)) {
      s.defaults.push_back(parse_expression(true));
    } else if (!s.defaults.empty()) {
      fail("non-default argument follows default argument");
    }
  }
  expect(TokenType::kRParen);
}

StmtPtr Parser::parse_macro() {
  auto s = make_stmt(StmtKind::kMacro, next().line);
  s->text = expect(TokenType::kName).text;
  parse_signature(*s);
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved_loop_depth;
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = make_stmt(StmtKind::kCallBlock, next().line);
  if (current().type == TokenType::kLParen) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::kCall) fail("expected call", s->line);
  s->body = parse_statements({"endcall"}, true);
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = make_stmt(StmtKind::kFilterBlock, next().line);
  s->expr = parse_filter(nullptr, true);
  s->body = parse_statements({"endfilter"}, true);
  return s;
}

StmtPtr Parser::parse_with() {
  auto s = make_stmt(StmtKind::kWith, next().line);
  while (current().type != TokenType::kBlockEnd) {
    if (!s->targets.empty()) expect(TokenType::kComma);
    s->targets.push_back(parse_assign_target(true, false, {}, false));
    expect(TokenType::kAssign);
    s->values.push_back(parse_expression(true));
  }
  s->body = parse_statements({"endwith"}, true);
  return s;
}

StmtPtr Parser::parse_print() {
  const int line = next().line;
  auto s = make_stmt(StmtKind::kOutput, line);
  auto tuple = make(ExprKind::kTuple, line);
  while (current().type != TokenType::kBlockEnd) {
    if (!tuple->items.empty()) expect(TokenType::kComma);
    tuple->items.push_back(parse_expression(true));
  }
  // {% print a, b %} writes each expression in turn.
  auto concat = make(ExprKind::kConcat, line);
  concat->items = std::move(tuple->items);
  s->expr = std::move(concat);
  return s;
}

ExprPtr Parser::parse_assign_target(bool with_tuple, bool name_only, const EndTags& extra_end, bool with_namespace) {
  ExprPtr target;
  if (with_namespace && look().type == TokenType::kDot) {
    const Token& ns = expect(TokenType::kName);
    next();
    target = make(ExprKind::kNamespaceRef, ns.line);
    target->name = ns.text;
    target->value = Value(expect(TokenType::kName).text);
    return target;
  }
  if (name_only) {
    const Token& t = expect(TokenType::kName);
    target = make(ExprKind::kName, t.line);
    target->name = t.text;
    return target;
  }
  target = with_tuple ? parse_tuple_simplified(extra_end) : parse_primary();
  check_assignable(*target);
  return target;
}

void Parser::check_assignable(const Expr& e) {
  if (e.kind == ExprKind::kName) {
    if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" || e.name == "False" ||
        e.name == "None") {
      fail("can't assign to 'const'", e.line);
    }
    return;
  }
  if (e.kind == ExprKind::kTuple) {
    for (const ExprPtr& item : e.items) check_assignable(*item);
    return;
  }
  fail("can't assign to '" + std::string(e.kind == ExprKind::kLiteral ? "const" : "expression") + "'", e.line);
}

}  // namespace detail

TemplateAst parse_template(const std::vector<Token>& tokens, const std::string& template_name, const Environment& env) {
  return detail::Parser(tokens, template_name, env).parse();
}

}  // namespace ditto::jinja
