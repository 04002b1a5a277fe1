#include "tokenizer/jinja/interpreter.h"

#include <new>
#include <unordered_map>

#include "tokenizer/jinja/access.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/py_format.h"

namespace ditto::jinja {

struct Interpreter::Frame {
  explicit Frame(std::shared_ptr<Frame> p) : parent(std::move(p)) {}
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

// Counts nesting (expressions, statements, calls) so hostile input cannot overflow the stack.
class Interpreter::DepthGuard {
 public:
  explicit DepthGuard(Interpreter* in) : in_(in) {
    if (++in_->depth_ > in_->env_.limits.max_depth) {
      throw RuntimeError("RecursionError: template nesting deeper than " + std::to_string(in_->env_.limits.max_depth) +
                         " levels (recursive macro?)");
    }
  }
  ~DepthGuard() { --in_->depth_; }

 private:
  Interpreter* in_;
};

namespace {

// Restores the current scope when a block that opened a new one ends (also on exceptions).
template <typename FramePtr>
class ScopeGuard {
 public:
  ScopeGuard(FramePtr& slot, FramePtr next) : slot_(slot), saved_(slot) { slot_ = std::move(next); }
  ~ScopeGuard() { slot_ = std::move(saved_); }

 private:
  FramePtr& slot_;
  FramePtr saved_;
};

}  // namespace

Interpreter::Interpreter(const Environment& env, const std::string& template_name) : env_(env), name_(template_name) {}

Interpreter::~Interpreter() = default;

std::string Interpreter::render(const TemplateAst& ast, const Dict& vars) {
  vars_ = &vars;
  frame_ = std::make_shared<Frame>(nullptr);
  std::string out;
  try {
    exec_block(ast.body, out);
  } catch (const RuntimeError& e) {
    release_scopes();
    throw TemplateError(e.raised_by_template() ? TemplateError::Kind::kRaised : TemplateError::Kind::kRuntime, name_,
                        line_, e.what());
  } catch (const std::bad_alloc&) {
    release_scopes();
    throw TemplateError(TemplateError::Kind::kRuntime, name_, line_, "MemoryError: out of memory");
  }
  release_scopes();
  return out;
}

void Interpreter::release_scopes() {
  for (const auto& f : closures_) f->vars.clear();
  closures_.clear();
  frame_.reset();
}

void Interpreter::step(int line) {
  if (line > 0) line_ = line;
  if (++steps_ > env_.limits.max_steps) {
    throw RuntimeError("template evaluation exceeded " + std::to_string(env_.limits.max_steps) +
                       " steps (runaway loop or recursion?)");
  }
}

void Interpreter::append(std::string& out, const std::string& text) const {
  if (out.size() + text.size() > env_.limits.max_output_bytes) {
    throw RuntimeError("template output exceeds " + std::to_string(env_.limits.max_output_bytes) + " bytes");
  }
  out += text;
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    const auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (const Value* v = vars_->find(std::string_view(name))) return *v;
  const auto it = env_.globals.find(name);
  if (it != env_.globals.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_block(const StmtList& body, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::string Interpreter::render_body(const StmtList& body) {
  std::string out;
  exec_block(body, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  DepthGuard guard(this);
  step(s.line);
  switch (s.kind) {
    case StmtKind::kData: append(out, s.text); return Flow::kNormal;
    case StmtKind::kOutput: {
      const Value v = eval(*s.expr);
      if (v.is_string()) {
        append(out, v.as_string());
      } else {
        append(out, py_str(v));
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf: return exec_block(eval(*s.expr).truthy() ? s.body : s.else_body, out);
    case StmtKind::kFor: return exec_for(s, out);
    case StmtKind::kSet: assign(*s.target, eval(*s.expr)); return Flow::kNormal;
    case StmtKind::kSetBlock: {
      std::string text;
      {
        ScopeGuard scope(frame_, std::make_shared<Frame>(frame_));
        text = render_body(s.body);
      }
      Value v(std::move(text));
      if (s.expr) v = apply_filter_chain(*s.expr, std::move(v));
      assign(*s.target, v);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: frame_->vars[s.text] = make_macro(s); return Flow::kNormal;
    case StmtKind::kCallBlock: exec_call_block(s, out); return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      const Value text = apply_filter_chain(*s.expr, Value(render_body(s.body)));
      append(out, py_str(text));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const ExprPtr& v : s.values) values.push_back(eval(*v));
      ScopeGuard scope(frame_, std::make_shared<Frame>(frame_));
      for (size_t i = 0; i < s.targets.size(); ++i) assign(*s.targets[i], values[i]);
      return exec_block(s.body, out);
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return exec_block(s.body, out);
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, std::string& out) {
  const Value iterable = eval(*s.expr);
  List items = py_iterate(iterable);
  if (s.test) {
    List kept;
    for (Value& item : items) {
      step(s.line);  // every iteration counts, so even an empty body cannot run unbounded
      ScopeGuard scope(frame_, std::make_shared<Frame>(frame_));
      assign(*s.target, item);
      if (eval(*s.test).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ScopeGuard scope(frame_, std::make_shared<Frame>(frame_));
    return exec_block(s.else_body, out);
  }
  const auto n = static_cast<int64_t>(items.size());
  auto last_changed = std::make_shared<std::optional<List>>();
  for (int64_t i = 0; i < n; ++i) {
    step(s.line);  // every iteration counts, so even an empty body cannot run unbounded
    ScopeGuard scope(frame_, std::make_shared<Frame>(frame_));
    assign(*s.target, items[static_cast<size_t>(i)]);
    auto loop = std::make_shared<Object>();
    loop->type_name = "LoopContext";
    Dict& a = loop->attrs;
    a.set(Value("index0"), Value(i));
    a.set(Value("index"), Value(i + 1));
    a.set(Value("revindex0"), Value(n - i - 1));
    a.set(Value("revindex"), Value(n - i));
    a.set(Value("first"), Value(i == 0));
    a.set(Value("last"), Value(i == n - 1));
    a.set(Value("length"), Value(n));
    a.set(Value("depth0"), Value(int64_t{0}));
    a.set(Value("depth"), Value(int64_t{1}));
    a.set(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    a.set(Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    a.set(Value("cycle"), Value::callable("loop.cycle", [i](Interpreter&, CallArgs& args) {
            if (args.args.empty()) throw RuntimeError("TypeError: no items for cycling given");
            return args.args[static_cast<size_t>(i) % args.args.size()];
          }));
    a.set(Value("changed"), Value::callable("loop.changed", [last_changed](Interpreter&, CallArgs& args) {
            if (*last_changed && py_equals(Value::list(**last_changed), Value::list(args.args))) return Value(false);
            *last_changed = args.args;
            return Value(true);
          }));
    frame_->vars["loop"] = Value::object(loop);
    const Flow flow = exec_block(s.body, out);
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

// A filter chain parsed without an input ({% filter a | b %}, {% set x | a %}): the innermost
// filter's `a` is null; apply from the inside out.
Value Interpreter::apply_filter_chain(const Expr& outer, Value input) {
  std::vector<const Expr*> chain;
  for (const Expr* f = &outer; f != nullptr; f = f->a.get()) chain.push_back(f);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    CallArgs args = eval_args(**it);
    input = apply_filter((*it)->name, input, args);
  }
  return input;
}

void Interpreter::assign(const Expr& target, const Value& value) {
  switch (target.kind) {
    case ExprKind::kName: frame_->vars[target.name] = value; return;
    case ExprKind::kTuple: {
      const List items = py_iterate(value);
      const size_t want = target.items.size();
      if (items.size() < want) {
        throw RuntimeError("ValueError: not enough values to unpack (expected " + std::to_string(want) + ", got " +
                           std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        throw RuntimeError("ValueError: too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t i = 0; i < want; ++i) assign(*target.items[i], items[i]);
      return;
    }
    case ExprKind::kNamespaceRef: {
      const Value ns = lookup(target.name);
      if (!ns.is_object() || ns.as_object().type_name != "Namespace") {
        throw RuntimeError("TemplateRuntimeError: cannot assign attribute on non-namespace object");
      }
      ns.as_object().attrs.set(target.value, value);
      return;
    }
    default: throw RuntimeError("cannot assign to this expression");
  }
}

Value Interpreter::make_macro(const Stmt& s) {
  std::shared_ptr<Frame> closure = frame_;
  // The scope holds the macro and the macro holds the scope: render() clears these scopes at the
  // end to break the cycle.
  closures_.push_back(closure);
  const Stmt* macro = &s;
  return Value::callable(
      s.text, [macro, closure](Interpreter& in, CallArgs& args) { return in.call_macro(*macro, closure, args); });
}

Value Interpreter::call_macro(const Stmt& s, const std::shared_ptr<Frame>& closure, CallArgs& args) {
  DepthGuard guard(this);
  ScopeGuard scope(frame_, std::make_shared<Frame>(closure));
  const size_t n_params = s.params.size();
  const size_t first_default = n_params - s.defaults.size();
  std::vector<bool> bound(n_params, false);
  List varargs;
  for (size_t i = 0; i < args.args.size(); ++i) {
    if (i < n_params) {
      frame_->vars[s.params[i]] = args.args[i];
      bound[i] = true;
    } else {
      varargs.push_back(args.args[i]);
    }
  }
  Dict kwargs;
  for (auto& [key, value] : args.kwargs) {
    size_t i = 0;
    while (i < n_params && s.params[i] != key) ++i;
    if (i < n_params) {
      if (bound[i])
        throw RuntimeError("TypeError: macro '" + s.text + "' got multiple values for argument '" + key + "'");
      frame_->vars[key] = value;
      bound[i] = true;
    } else if (key == "caller") {
      frame_->vars["caller"] = value;
    } else {
      kwargs.set(Value(key), value);
    }
  }
  for (size_t i = 0; i < n_params; ++i) {
    if (bound[i]) continue;
    frame_->vars[s.params[i]] = i >= first_default
                                    ? eval(*s.defaults[i - first_default])
                                    : Value::undefined("parameter '" + s.params[i] + "' was not provided");
  }
  frame_->vars["varargs"] = Value::tuple(std::move(varargs));
  frame_->vars["kwargs"] = Value::dict(std::move(kwargs));
  const int caller_line = line_;
  Value result(render_body(s.body));
  line_ = caller_line;  // a later error in the calling expression is on the caller's line
  return result;
}

void Interpreter::exec_call_block(const Stmt& s, std::string& out) {
  const Expr& call = *s.expr;
  Value callee = eval(*call.a);
  CallArgs args = eval_args(call);
  args.kwargs.emplace_back("caller", make_macro(s));
  append(out, py_str(this->call(callee, args)));
}

// ---- expressions ----

CallArgs Interpreter::eval_args(const Expr& e) {
  CallArgs args;
  for (const ExprPtr& a : e.items) args.args.push_back(eval(*a));
  for (const auto& [key, a] : e.kwargs) args.kwargs.emplace_back(key, eval(*a));
  if (e.star_args) {
    for (Value& v : py_iterate(eval(*e.star_args))) args.args.push_back(std::move(v));
  }
  if (e.star_kwargs) {
    const Value d = eval(*e.star_kwargs);
    if (!d.is_dict())
      throw RuntimeError(std::string("TypeError: argument after ** must be a mapping, not ") + d.type_name());
    for (const auto& [k, v] : d.as_dict().items()) {
      if (!k.is_string()) throw RuntimeError("TypeError: keywords must be strings");
      args.kwargs.emplace_back(k.as_string(), v);
    }
  }
  return args;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) throw_undefined(callee);
  if (!callee.is_callable())
    throw RuntimeError(std::string("TypeError: '") + callee.type_name() + "' object is not callable");
  DepthGuard guard(this);
  return callee.as_callable().fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  const auto it = env_.filters.find(name);
  if (it == env_.filters.end()) throw RuntimeError("TemplateRuntimeError: No filter named '" + name + "' found.");
  DepthGuard guard(this);
  return it->second(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  const auto it = env_.tests.find(name);
  if (it == env_.tests.end()) throw RuntimeError("TemplateRuntimeError: No test named '" + name + "' found.");
  DepthGuard guard(this);
  return it->second(*this, input, args);
}

Value Interpreter::eval_getitem(const Expr& e) {
  const Value obj = eval(*e.a);
  if (e.b->kind != ExprKind::kSlice) return get_item(obj, eval(*e.b));
  const Expr& slice = *e.b;
  bool valid = true;
  auto part = [&](const ExprPtr& p) -> std::optional<int64_t> {
    if (!p) return std::nullopt;
    const Value v = eval(*p);
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) {
      valid = false;
      return std::nullopt;
    }
    return v.to_int();
  };
  const auto start = part(slice.a);
  const auto stop = part(slice.b);
  const auto stride = part(slice.c);
  // jinja2 compiles slicing to a plain Python obj[a:b:c] (no sandbox getitem), so errors are raised.
  if (obj.is_undefined()) throw_undefined(obj);
  if (obj.is_dict()) throw RuntimeError("TypeError: unhashable type: 'slice'");
  if (!(obj.is_string() || obj.is_sequence())) {
    throw RuntimeError(std::string("TypeError: '") + obj.type_name() + "' object is not subscriptable");
  }
  if (!valid) throw RuntimeError("TypeError: slice indices must be integers or None or have an __index__ method");
  return py_slice(obj, start, stop, stride);
}

Value Interpreter::eval_call(const Expr& e) {
  const Value callee = eval(*e.a);
  CallArgs args = eval_args(e);
  return call(callee, args);
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(this);
  step(0);  // errors report the enclosing statement's line, as jinja2's tracebacks do
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) items.push_back(eval(*item));
      return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        if (key.is_list() || key.is_dict() || key.is_undefined()) {
          throw RuntimeError(std::string("TypeError: unhashable type: '") + key.type_name() + "'");
        }
        d.set(std::move(key), eval(*e.items[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr: return get_attr(eval(*e.a), e.name);
    case ExprKind::kGetItem: return eval_getitem(e);
    case ExprKind::kCall: return eval_call(e);
    case ExprKind::kFilter: {
      const Value input = eval(*e.a);
      CallArgs args = eval_args(e);
      return apply_filter(e.name, input, args);
    }
    case ExprKind::kTest: {
      const Value input = eval(*e.a);
      CallArgs args = eval_args(e);
      return Value(apply_test(e.name, input, args));
    }
    case ExprKind::kNot: return Value(!eval(*e.a).truthy());
    case ExprKind::kNeg: return negate(eval(*e.a));
    case ExprKind::kPos: return unary_plus(eval(*e.a));
    case ExprKind::kBinary: {
      Value left = eval(*e.a);
      if (e.binary_op == BinaryOp::kAnd) return left.truthy() ? eval(*e.b) : left;
      if (e.binary_op == BinaryOp::kOr) return left.truthy() ? left : eval(*e.b);
      return binary_op(e.binary_op, left, eval(*e.b), max_size());
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& item : e.items) append(out, py_str(eval(*item)));
      return Value(std::move(out));
    }
    case ExprKind::kCompare: {
      Value left = eval(*e.a);
      for (size_t i = 0; i < e.compare_ops.size(); ++i) {
        Value right = eval(*e.items[i]);
        if (!compare(e.compare_ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondition:
      if (eval(*e.b).truthy()) return eval(*e.a);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::kSlice:
    case ExprKind::kNamespaceRef: break;
  }
  throw RuntimeError("internal error: unexpected expression node");
}

}  // namespace ditto::jinja
