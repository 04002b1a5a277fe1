// Expression grammar of jinja2 (jinja2/parser.py): conditional > or > and > not > comparisons
// (chained, in / not in) > + - > ~ > * / // % > ** > unary - + > primary with postfix
// (.attr, [item], [a:b:c], calls) and filter / test chains.
#include "tokenizer/jinja/parser_impl.h"

namespace ditto::jinja::detail {

bool Parser::is_tuple_end(const EndTags& extra_end) const {
  const TokenType t = current().type;
  if (t == TokenType::kVariableEnd || t == TokenType::kBlockEnd || t == TokenType::kRParen) return true;
  return at_end_tag(extra_end);
}

ExprPtr Parser::parse_tuple_simplified(const EndTags& extra_end) {
  const int line = current().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect(TokenType::kComma);
    if (is_tuple_end(extra_end)) break;
    args.push_back(parse_primary());
    if (current().type != TokenType::kComma) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    fail("Expected an expression, got '" + describe_token(current()) + "'");
  }
  auto t = make(ExprKind::kTuple, line);
  t->items = std::move(args);
  return t;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, const EndTags& extra_end, bool explicit_parentheses) {
  const int line = current().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect(TokenType::kComma);
    if (is_tuple_end(extra_end)) break;
    args.push_back(parse_expression(with_condexpr));
    if (current().type != TokenType::kComma) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) fail("Expected an expression, got '" + describe_token(current()) + "'");
  }
  auto t = make(ExprKind::kTuple, line);
  t->items = std::move(args);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = current().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    auto cond = make(ExprKind::kCondition, line);
    cond->b = parse_or();
    if (skip_name("else")) cond->c = parse_condexpr();
    cond->a = std::move(expr1);
    expr1 = std::move(cond);
    line = current().line;
  }
  return expr1;
}

ExprPtr Parser::binary(BinaryOp op, ExprPtr left, ExprPtr right, int line) {
  auto e = make(ExprKind::kBinary, line);
  e->binary_op = op;
  e->a = std::move(left);
  e->b = std::move(right);
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name(current(), "or")) {
    const int line = next().line;
    left = binary(BinaryOp::kOr, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name(current(), "and")) {
    const int line = next().line;
    left = binary(BinaryOp::kAnd, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name(current(), "not")) {
    DepthGuard guard(this);
    auto e = make(ExprKind::kNot, next().line);
    e->a = parse_not();
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = current().line;
  ExprPtr expr = parse_math1();
  std::vector<CompareOp> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    const TokenType t = current().type;
    CompareOp op;
    if (t == TokenType::kEq)
      op = CompareOp::kEq;
    else if (t == TokenType::kNe)
      op = CompareOp::kNe;
    else if (t == TokenType::kLt)
      op = CompareOp::kLt;
    else if (t == TokenType::kLtEq)
      op = CompareOp::kLtEq;
    else if (t == TokenType::kGt)
      op = CompareOp::kGt;
    else if (t == TokenType::kGtEq)
      op = CompareOp::kGtEq;
    else if (is_name(current(), "in"))
      op = CompareOp::kIn;
    else if (is_name(current(), "not") && is_name(look(), "in")) {
      next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    next();
    ops.push_back(op);
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return expr;
  auto e = make(ExprKind::kCompare, line);
  e->a = std::move(expr);
  e->compare_ops = std::move(ops);
  e->items = std::move(operands);
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (current().type == TokenType::kAdd || current().type == TokenType::kSub) {
    const Token& t = next();
    const BinaryOp op = t.type == TokenType::kAdd ? BinaryOp::kAdd : BinaryOp::kSub;
    left = binary(op, std::move(left), parse_concat(), t.line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = current().line;
  ExprPtr first = parse_math2();
  if (current().type != TokenType::kTilde) return first;
  auto e = make(ExprKind::kConcat, line);
  e->items.push_back(std::move(first));
  while (skip_if(TokenType::kTilde)) e->items.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    const TokenType t = current().type;
    BinaryOp op;
    if (t == TokenType::kMul)
      op = BinaryOp::kMul;
    else if (t == TokenType::kDiv)
      op = BinaryOp::kDiv;
    else if (t == TokenType::kFloorDiv)
      op = BinaryOp::kFloorDiv;
    else if (t == TokenType::kMod)
      op = BinaryOp::kMod;
    else
      break;
    const int line = next().line;
    left = binary(op, std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (current().type == TokenType::kPow) {
    const int line = next().line;
    left = binary(BinaryOp::kPow, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(this);
  const Token& t = current();
  ExprPtr node;
  if (t.type == TokenType::kSub || t.type == TokenType::kAdd) {
    node = make(t.type == TokenType::kSub ? ExprKind::kNeg : ExprKind::kPos, t.line);
    next();
    node->a = parse_unary(false);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  DepthGuard guard(this);
  const Token& t = current();
  ExprPtr node;
  switch (t.type) {
    case TokenType::kName:
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        node = make(ExprKind::kLiteral, t.line);
        node->value = Value(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        node = make(ExprKind::kLiteral, t.line);
        node->value = Value::none();
      } else {
        node = make(ExprKind::kName, t.line);
        node->name = t.text;
      }
      next();
      return node;
    case TokenType::kString: {
      node = make(ExprKind::kLiteral, t.line);
      std::string text;
      while (current().type == TokenType::kString) text += next().text;
      node->value = Value(std::move(text));
      return node;
    }
    case TokenType::kInteger:
    case TokenType::kFloat:
      node = make(ExprKind::kLiteral, t.line);
      node->value = t.number;
      next();
      return node;
    case TokenType::kLParen:
      next();
      node = parse_tuple(true, {}, true);
      expect(TokenType::kRParen);
      return node;
    case TokenType::kLBracket: return parse_list();
    case TokenType::kLBrace: return parse_dict();
    default: fail("unexpected '" + describe_token(t) + "'");
  }
}

ExprPtr Parser::parse_list() {
  auto e = make(ExprKind::kList, expect(TokenType::kLBracket).line);
  while (current().type != TokenType::kRBracket) {
    if (!e->items.empty()) expect(TokenType::kComma);
    if (current().type == TokenType::kRBracket) break;
    e->items.push_back(parse_expression(true));
  }
  expect(TokenType::kRBracket);
  return e;
}

ExprPtr Parser::parse_dict() {
  auto e = make(ExprKind::kDict, expect(TokenType::kLBrace).line);
  while (current().type != TokenType::kRBrace) {
    if (!e->items.empty()) expect(TokenType::kComma);
    if (current().type == TokenType::kRBrace) break;
    e->items.push_back(parse_expression(true));
    expect(TokenType::kColon);
    e->items.push_back(parse_expression(true));
  }
  expect(TokenType::kRBrace);
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    const TokenType t = current().type;
    if (t == TokenType::kDot || t == TokenType::kLBracket) {
      node = parse_subscript(std::move(node));
    } else if (t == TokenType::kLParen) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    const TokenType t = current().type;
    if (t == TokenType::kPipe) {
      node = parse_filter(std::move(node), false);
    } else if (is_name(current(), "is")) {
      node = parse_test(std::move(node));
    } else if (t == TokenType::kLParen) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& t = next();
  if (t.type == TokenType::kDot) {
    const Token& attr = next();
    if (attr.type == TokenType::kName) {
      auto e = make(ExprKind::kGetAttr, t.line);
      e->a = std::move(node);
      e->name = attr.text;
      return e;
    }
    if (attr.type != TokenType::kInteger) fail("expected name or number", attr.line);
    auto e = make(ExprKind::kGetItem, t.line);
    e->a = std::move(node);
    e->b = make(ExprKind::kLiteral, attr.line);
    e->b->value = attr.number;
    return e;
  }
  std::vector<ExprPtr> args;
  while (current().type != TokenType::kRBracket) {
    if (!args.empty()) expect(TokenType::kComma);
    args.push_back(parse_subscribed());
  }
  expect(TokenType::kRBracket);
  auto e = make(ExprKind::kGetItem, t.line);
  e->a = std::move(node);
  if (args.size() == 1) {
    e->b = std::move(args[0]);
  } else {
    e->b = make(ExprKind::kTuple, t.line);
    e->b->items = std::move(args);
  }
  return e;
}

ExprPtr Parser::parse_subscribed() {
  const int line = current().line;
  ExprPtr start;
  if (current().type != TokenType::kColon) {
    start = parse_expression(true);
    if (current().type != TokenType::kColon) return start;
  }
  next();  // ':'
  auto slice = make(ExprKind::kSlice, line);
  slice->a = std::move(start);
  auto ends_part = [&] {
    const TokenType t = current().type;
    return t == TokenType::kRBracket || t == TokenType::kComma || t == TokenType::kColon;
  };
  if (!ends_part()) slice->b = parse_expression(true);
  if (skip_if(TokenType::kColon)) {
    if (current().type != TokenType::kRBracket && current().type != TokenType::kComma) {
      slice->c = parse_expression(true);
    }
  }
  return slice;
}

void Parser::parse_call_args(Expr& call) {
  const Token& open = expect(TokenType::kLParen);
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", open.line);
  };
  while (current().type != TokenType::kRParen) {
    if (require_comma) {
      expect(TokenType::kComma);
      if (current().type == TokenType::kRParen) break;
    }
    if (current().type == TokenType::kMul) {
      ensure(!call.star_args && !call.star_kwargs);
      next();
      call.star_args = parse_expression(true);
    } else if (current().type == TokenType::kPow) {
      ensure(!call.star_kwargs);
      next();
      call.star_kwargs = parse_expression(true);
    } else if (current().type == TokenType::kName && look().type == TokenType::kAssign) {
      ensure(!call.star_kwargs);
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      ensure(!call.star_args && !call.star_kwargs && call.kwargs.empty());
      call.items.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect(TokenType::kRParen);
}

ExprPtr Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::kCall, current().line);
  e->a = std::move(node);
  parse_call_args(*e);
  return e;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect(TokenType::kName).text;
  while (skip_if(TokenType::kDot)) name += "." + expect(TokenType::kName).text;
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (current().type == TokenType::kPipe || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = current().line;
    auto e = make(ExprKind::kFilter, line);
    e->name = parse_dotted_name();
    if (!env_.filters.count(e->name) && if_depth_ == 0) fail("No filter named '" + e->name + "'.", line);
    e->a = std::move(node);
    if (current().type == TokenType::kLParen) parse_call_args(*e);
    node = std::move(e);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const int line = next().line;  // 'is'
  const bool negated = skip_name("not");
  auto e = make(ExprKind::kTest, line);
  e->name = parse_dotted_name();
  if (!env_.tests.count(e->name) && if_depth_ == 0) fail("No test named '" + e->name + "'.", line);
  e->a = std::move(node);
  const TokenType t = current().type;
  if (t == TokenType::kLParen) {
    parse_call_args(*e);
  } else if ((t == TokenType::kName || t == TokenType::kString || t == TokenType::kInteger || t == TokenType::kFloat ||
              t == TokenType::kLParen || t == TokenType::kLBracket || t == TokenType::kLBrace) &&
             !is_name(current(), "else") && !is_name(current(), "or") && !is_name(current(), "and")) {
    if (is_name(current(), "is")) fail("You cannot chain multiple tests with is");
    e->items.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return e;
  auto n = make(ExprKind::kNot, line);
  n->a = std::move(e);
  return n;
}

}  // namespace ditto::jinja::detail
