// The one table of engine knobs: every EngineArgs field (include/ditto/engine_args.h) a user sets
// from outside, with its name (the EngineArgs member, vLLM's EngineArgs / LLM keyword), its CLI
// flag, its help text, its bounds and the one function that checks and sets it. The CLI commands
// that start an engine bind their flags from it (tools/engine_flags.h), the Python LLM its keyword
// arguments (python/src/ditto_module.cc: EngineArgs.set); a new knob is one row in
// engine_args_table.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ditto/engine_args.h"

namespace ditto {

enum class EngineArgKind {
  kInteger,  // a JSON integer (CLI: decimal text) in [min, max]
  kBytes,    // a size: an integer of bytes or text such as "2GiB" (core/memory_info.h parse_size_bytes)
  kBool,     // a JSON boolean; on the CLI a flag that sets `cli_flag_value`
  kString,   // a JSON string
  kJson,     // a JSON object (CLI: its text); parsed by the field's own reader
};

struct EngineArgField {
  const char* name;  // "max_num_batched_tokens": the EngineArgs member and the Python keyword
  const char* flag;  // "--max-num-batched-tokens" (CLI11 spelling; ",--tp" adds an alias)
  const char* help;
  EngineArgKind kind;
  int64_t min = 0, max = 0;    // kInteger: the accepted range
  bool cli_flag_value = true;  // kBool: what the CLI flag sets (false for --no-prefix-caching)
  bool show_default = true;    // print the default in --help (false where 0 means "the model's")
  bool nullable = false;       // null (Python's None) means the default: the field's "automatic" value
  // Sets `args` from a value already checked by set_engine_arg.
  void (*assign)(EngineArgs& args, const nlohmann::json& value);
  // The field's value as the CLI shows it ("2048", "auto").
  std::string (*show)(const EngineArgs& args);
};

// Every row, in --help order.
const std::vector<EngineArgField>& engine_arg_fields();

// The row named `name` (a member name or, with its dashes, a flag: "max_num_seqs",
// "--max-num-seqs"); nullptr when there is none.
const EngineArgField* find_engine_arg(const std::string& name);

// Checks `value` against `field` and sets it in `args`; a null value leaves the default where the
// field is nullable and is refused elsewhere.
// `where` names the value in errors: the flag on the CLI, the keyword in Python. Throws
// Error(kInvalidArgument, param = field.name) naming `where`, the expected form and the value.
void set_engine_arg(EngineArgs& args, const EngineArgField& field, const nlohmann::json& value,
                    const std::string& where);

// The CLI's text for `field` as the value set_engine_arg takes: decimal integers for kInteger, the
// parsed object for kJson, the text itself otherwise. Throws as set_engine_arg, naming `where`.
nlohmann::json engine_arg_from_text(const EngineArgField& field, const std::string& text, const std::string& where);

}  // namespace ditto
