#include "tokenizer/jinja/environment.h"

namespace ditto::jinja {

Environment Environment::jinja2_defaults() {
  Environment env;
  register_builtin_filters(env);
  register_builtin_tests(env);
  register_builtin_globals(env);
  return env;
}

}  // namespace ditto::jinja
