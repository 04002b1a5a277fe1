// What a template is parsed and rendered with, like a jinja2.Environment: lexer options, the
// filter / test / global tables, optional extensions, and the safety limits. jinja2_defaults()
// holds jinja2's built-ins that ditto implements; Hugging Face's chat environment
// (tokenizer/chat_template.cc) starts from it and adds its own tojson, raise_exception and
// strftime_now.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"

namespace ditto::jinja {

// Filters and tests get the interpreter (to call other filters/tests, or a macro) and the call's
// arguments; they throw RuntimeError with a Python-like message.
using FilterFn = std::function<Value(Interpreter&, const Value& input, CallArgs& args)>;
using TestFn = std::function<bool(Interpreter&, const Value& input, CallArgs& args)>;

// Bounds that keep any template, however hostile, from running forever or exhausting memory.
struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string or list built
  int max_depth = 1000;                        // nested evaluation: expressions, statements, macro calls
  int64_t max_steps = 20'000'000;              // expressions, statements and loop iterations in one render (3-12 s)
  int64_t max_range = 100'000;                 // range() length (jinja2's sandbox MAX_RANGE)
};

struct Environment {
  LexerOptions lexer;
  bool loop_controls = false;                  // {% break %} / {% continue %} (jinja2.ext.loopcontrols)
  std::unordered_set<std::string> scope_tags;  // extension tags whose body renders as is ("generation")
  std::unordered_map<std::string, FilterFn> filters;
  std::unordered_map<std::string, TestFn> tests;
  std::unordered_map<std::string, Value> globals;
  Limits limits;

  // jinja2's default filters, tests and globals. Those ditto does not implement are present as
  // stubs that fail when called ("filter 'wordwrap' is not supported"), so a template that only
  // mentions them still loads, as it does in jinja2.
  static Environment jinja2_defaults();
};

void register_builtin_filters(Environment& env);
void register_builtin_tests(Environment& env);
void register_builtin_globals(Environment& env);

}  // namespace ditto::jinja
