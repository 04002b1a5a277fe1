// The parsed template: expression and statement nodes, each with the source line it came from
// (every runtime error names it). Nodes are plain tagged structs; the interpreter switches on kind.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,       // value
  kName,          // name
  kList,          // items
  kTuple,         // items
  kDict,          // items: key0, value0, key1, value1, ...
  kGetAttr,       // a.name
  kGetItem,       // a[b]
  kSlice,         // a[b:c:d]; absent parts are null
  kCall,          // a(items..., kwargs...)
  kFilter,        // a | name(items..., kwargs...); a is null inside {% filter %}
  kTest,          // a is name(items..., kwargs...)
  kNot,           // not a
  kNeg,           // -a
  kPos,           // +a
  kBinary,        // a <op> b: op is one of + - * / // % ** and or
  kConcat,        // items joined with ~
  kCompare,       // a, then compare_ops[i] applied with items[i] (chained)
  kCondition,     // a if b else c (c may be null)
  kNamespaceRef,  // name.attr as an assignment target
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kAnd, kOr };
enum class CompareOp { kEq, kNe, kLt, kLtEq, kGt, kGtEq, kIn, kNotIn };

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr star_args;    // f(*x)
  ExprPtr star_kwargs;  // f(**x)
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
};

enum class StmtKind {
  kData,         // text
  kOutput,       // {{ expr }}
  kIf,           // if expr: body else else_body (elif chains nest in else_body)
  kFor,          // for target in expr [if test]: body, else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter] ... endset (filter in expr, may be null)
  kMacro,        // macro name(params = defaults): body
  kCallBlock,    // call(params) expr: body (the body is `caller`)
  kFilterBlock,  // filter expr ... endfilter
  kWith,         // with targets = values: body
  kBreak,
  kContinue,
  kScope,  // body rendered as is ({% generation %}, {% autoescape %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr test;
  StmtList body;
  StmtList else_body;
  std::vector<std::string> params;       // macro / call block parameter names
  std::vector<ExprPtr> defaults;         // defaults of the last params
  std::vector<ExprPtr> targets, values;  // with
  bool recursive = false;
};

struct TemplateAst {
  StmtList body;
};

}  // namespace ditto::jinja
