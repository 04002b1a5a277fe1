// Splits template source into jinja2's token stream: template data, {{ }} / {% %} delimiters and
// the expression tokens inside them. Whitespace control happens here, as in jinja2's lexer:
// "{%-"/"-%}" strip all whitespace on that side, trim_blocks drops the first newline after a block
// or comment tag, lstrip_blocks drops spaces and tabs between a line start and a block or comment
// tag, "{%+"/"+%}" opt a tag out. Newlines are normalised to "\n" and one trailing newline of the
// source is dropped (keep_trailing_newline=False). Comments vanish; {% raw %} becomes data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kAdd,
  kSub,
  kDiv,
  kFloorDiv,
  kMul,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGtEq,
  kLt,
  kLtEq,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
  kEof,
  kError,  // a lexing error; the parser reports it when it reaches it (jinja2 lexes lazily)
};

struct Token {
  TokenType type;
  std::string text;  // data text, name, unescaped string literal, or the operator's spelling
  Value number;      // kInteger / kFloat
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
};

// How a token reads in an error message: "end of statement block", "'endfor'", "end of template".
std::string describe_token(const Token& token);
std::string describe_token_type(TokenType type);

// Never throws for bad input: an unterminated comment or raw block, unexpected character,
// unbalanced bracket or bad string escape ends the stream with a kError token carrying the message
// (in `text`) and line, which the parser raises as TemplateError(kSyntax) only if no earlier
// syntax error stops it first -- jinja2's lexer runs lazily, so its errors come in that order too.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace ditto::jinja
