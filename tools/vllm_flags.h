// `vllm serve` flags that launch scripts carry and that ditto has no knob for, bound on
// `ditto serve` so that a vLLM launch line starts ditto unchanged (issue 30). Each flag is one row
// of a table (vllm_flags.cc) and gets one of two treatments:
//   - it only means something on a GPU or for vLLM's own machinery (--gpu-memory-utilization,
//     --enforce-eager, --trust-remote-code, ...): accepted, with one warning line naming it;
//   - it would change the results and ditto does not have it (--quantization, --dtype float16,
//     --logprobs-mode processed_logprobs, LoRA, ...): refused at start, naming the flag and value —
//     unless its value is what ditto does anyway (--dtype auto, --pipeline-parallel-size 1).
// The flags ditto has under vLLM's names (--max-model-len, --served-model-name, ...) are its own
// options; this file holds only the rest.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "ditto/engine_args.h"

namespace ditto {

// What the vLLM flags given on a command line asked for, collected while CLI11 parses.
struct VllmFlagReport {
  std::vector<std::string> warnings;  // one line per accepted flag that does nothing here
  std::vector<std::string> refusals;  // one line per flag ditto refuses
};

// Adds the table's flags to `cmd` (`ditto serve`), and vLLM's --enable-prefix-caching, which sets
// args.enable_prefix_caching. Parsing fills `report`.
void add_vllm_serve_flags(CLI::App* cmd, EngineArgs& args, VllmFlagReport& report);

// After parsing, before the model loads: throws Error(kInvalidArgument) listing every refused flag
// with why, else logs each warning on stderr in the server's --log-format (text or json).
void apply_vllm_flag_report(const VllmFlagReport& report, const std::string& log_format);

}  // namespace ditto
