// Options every model-running subcommand shares: --model, the engine flags (bound from the one
// table of engine knobs, engine/engine_args_table.h), --report-memory; and loading.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ditto/engine_args.h"
#include "ditto/llm.h"
#include "model/causal_lm.h"

namespace ditto {

struct ModelOptions {
  // model: a directory, GGUF file or hub id (resolved in the local HF cache); threads, block_size
  // and tensor_parallel_size from their flags; the rest as each command binds them.
  EngineArgs engine;
  bool report_memory = false;
};

// --model (required), --threads, --block-size, --tensor-parallel-size, --report-memory.
void add_model_options(CLI::App* cmd, ModelOptions& options);

// Binds the engine flags named (EngineArgs member names: "kv_cache_memory", ...; every row of the
// table when `names` is empty) to `args`, in the table's order, each with its help and, where the
// table shows one, the default `args` holds now. A bad value is a CLI usage error naming the flag.
void add_engine_flags(CLI::App* cmd, EngineArgs& args, std::initializer_list<const char*> names = {});

struct LoadedModel {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CausalLM> model;
};

// Resolves, loads and (with --report-memory) prints the load statistics to stderr.
LoadedModel load_model(const ModelOptions& options);
// Prints --report-memory's line: tensors, weight bytes, peak RSS and load seconds (stderr).
void report_load(const ModelInfo& model);

// Prints to stderr that `model`'s weights are seeded random numbers when its files say so
// (ModelConfig::random_weights), so that nobody takes its noise for a bug. `command`: "ditto serve".
// `model` as --model takes it (directory, GGUF file or hub id); errors are left to the loader.
void note_random_weights(const std::string& command, const std::string& model);
// That note's text ("MODEL has seeded random weights ..."), or "" for a trained model (or one the
// loader will refuse).
std::string random_weights_note(const std::string& model);

// "1,2,3" -> {1, 2, 3}. Throws Error(kInvalidArgument) naming `flag` and the bad item.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& flag);

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

}  // namespace ditto
