// The jinja parser's state and grammar, shared by parser.cc (statements) and
// expression_parser.cc (expressions). Internal to the jinja library; use parse_template().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"

namespace ditto::jinja::detail {

constexpr int kMaxNesting = 200;  // bounds the parser's own recursion on hostile input

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name, const Environment& env)
      : tokens_(tokens), name_(name), env_(env) {}

  TemplateAst parse() {
    TemplateAst ast;
    ast.body = subparse({});
    return ast;
  }

 private:
  // Reaching the lexer's error token raises it (so an earlier syntax error is reported first).
  const Token& current() const { return checked(tokens_[pos_]); }
  const Token& look() const { return checked(tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]); }
  const Token& checked(const Token& t) const {
    if (t.type == TokenType::kError) throw TemplateError(TemplateError::Kind::kSyntax, name_, t.line, t.text);
    return t;
  }
  const Token& next() {
    const Token& t = current();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_name(const Token& t, const char* value) const { return t.type == TokenType::kName && t.text == value; }
  bool skip_if(TokenType type) {
    if (current().type != type) return false;
    next();
    return true;
  }
  bool skip_name(const char* value) {
    if (!is_name(current(), value)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& message, int line = -1) const {
    throw TemplateError(TemplateError::Kind::kSyntax, name_, line < 0 ? current().line : line, message);
  }

  const Token& expect(TokenType type) {
    if (current().type != type) {
      if (current().type == TokenType::kEof) {
        fail("unexpected end of template, expected '" + describe_token_type(type) + "'.");
      }
      fail("expected token '" + describe_token_type(type) + "', got '" + describe_token(current()) + "'");
    }
    return next();
  }
  const Token& expect_name(const char* value) {
    if (!is_name(current(), value)) {
      if (current().type == TokenType::kEof) fail(std::string("unexpected end of template, expected '") + value + "'.");
      fail(std::string("expected token '") + value + "', got '" + describe_token(current()) + "'");
    }
    return next();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxNesting) p_->fail("template nesting is too deep (more than 200 levels)");
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  static ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  static StmtPtr make_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  using EndTags = std::vector<std::string>;

  // ---- statements (parser.cc) ----
  bool at_end_tag(const EndTags& end) const;
  StmtList subparse(const EndTags& end);
  // Body up to one of `end`; leaves the end tag's name as the current token (or drops it).
  StmtList parse_statements(const EndTags& end, bool drop_needle);
  [[noreturn]] void fail_unknown(const std::string* tag_name, std::vector<EndTags> stack);
  [[noreturn]] void fail_eof(const EndTags& end);
  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  void parse_signature(Stmt& s);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_print();
  ExprPtr parse_assign_target(bool with_tuple, bool name_only, const EndTags& extra_end, bool with_namespace);
  void check_assignable(const Expr& e);

  // ---- expressions (expression_parser.cc), jinja2's precedence from loosest to tightest ----
  bool is_tuple_end(const EndTags& extra_end) const;
  ExprPtr parse_tuple_simplified(const EndTags& extra_end);
  ExprPtr parse_tuple(bool with_condexpr, const EndTags& extra_end, bool explicit_parentheses);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(BinaryOp op, ExprPtr left, ExprPtr right, int line);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& call);
  ExprPtr parse_call(ExprPtr node);
  std::string parse_dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);

  const std::vector<Token>& tokens_;
  const std::string& name_;
  const Environment& env_;
  size_t pos_ = 0;
  int depth_ = 0;
  int if_depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<EndTags> end_stack_;
};

}  // namespace ditto::jinja::detail
