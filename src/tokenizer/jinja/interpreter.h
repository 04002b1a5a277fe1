// Renders a parsed template: evaluates expressions with Python semantics and runs statements with
// jinja2's scoping -- a for loop body, a macro call, a with block and a block set each get their
// own scope (assignments inside do not leak out, and one loop iteration's assignments are gone in
// the next), while if blocks share the enclosing scope; namespace() objects are the way to carry
// state out of a loop. Names resolve through the scopes, then the render variables, then the
// environment's globals; a missing name is Undefined.
//
// One Interpreter renders once; it is not thread-safe, but a TemplateAst and an Environment can be
// shared by any number of interpreters on different threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/environment.h"
#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

class Interpreter {
 public:
  Interpreter(const Environment& env, const std::string& template_name);
  ~Interpreter();

  // Throws TemplateError: kRuntime naming the template and line of the failing expression, or
  // kRaised carrying raise_exception's message. Never loops forever: Environment::limits bounds
  // output size, nesting depth and the number of evaluation steps.
  std::string render(const TemplateAst& ast, const Dict& vars);

  // For filters, tests and globals.
  const Environment& env() const { return env_; }
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  size_t max_size() const { return env_.limits.max_output_bytes; }

 private:
  struct Frame;
  enum class Flow { kNormal, kBreak, kContinue };
  class DepthGuard;

  Flow exec_block(const StmtList& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_call_block(const Stmt& s, std::string& out);
  std::string render_body(const StmtList& body);
  void assign(const Expr& target, const Value& value);
  Value apply_filter_chain(const Expr& outer, Value input);
  void release_scopes();
  Value make_macro(const Stmt& s);
  Value call_macro(const Stmt& s, const std::shared_ptr<Frame>& closure, CallArgs& args);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_getitem(const Expr& e);
  CallArgs eval_args(const Expr& e);
  Value lookup(const std::string& name) const;
  void append(std::string& out, const std::string& text) const;
  void step(int line);

  const Environment& env_;
  const std::string& name_;
  const Dict* vars_ = nullptr;
  std::shared_ptr<Frame> frame_;
  std::vector<std::shared_ptr<Frame>> closures_;  // scopes that macros captured
  int line_ = 1;
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace ditto::jinja
