// Options every model-running subcommand shares (--model, --threads, --block-size), and loading.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/tensor_parallel_worker.h"

namespace ditto {

struct ModelOptions {
  std::string model;        // a directory or a hub id (resolved in the local HF cache)
  int threads = 0;          // 0: default_num_threads()
  int64_t block_size = 16;  // KV cache block size in tokens
  bool report_memory = false;
  int tensor_parallel_size = 1;  // MPI ranks the model is split over (mpirun -np N)
};

void add_model_options(CLI::App* cmd, ModelOptions& options);
// --speculative-config JSON (vLLM's keys; engine/speculative.h reads it).
void add_speculative_config_option(CLI::App* cmd, std::string& speculative_config);
// --tensor-parallel-size (alias --tp), as vLLM's.
void add_tensor_parallel_option(CLI::App* cmd, int& tensor_parallel_size);

struct LoadedModel {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CausalLM> model;
};

// Resolves, loads and (with --report-memory) prints the load statistics to stderr.
LoadedModel load_model(const ModelOptions& options);
// Prints --report-memory's line: tensors, weight bytes, peak RSS and load seconds (stderr).
void report_load(const std::string& dir, const CausalLM& model);

// Prints to stderr that `model`'s weights are seeded random numbers when its files say so
// (ModelConfig::random_weights), so that nobody takes its noise for a bug. `command`: "ditto serve".
// `model` as --model takes it (directory, GGUF file or hub id); errors are left to the loader.
void note_random_weights(const std::string& command, const std::string& model);

// "1,2,3" -> {1, 2, 3}. Throws Error(kInvalidArgument) naming `flag` and the bad item.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& flag);

// "2GiB", "512MiB", "1.5GB", "1000000" (bytes) as bytes. Throws Error(kInvalidArgument) naming
// `flag` for anything else, zero or negative.
int64_t parse_size_bytes(const std::string& text, const std::string& flag);

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

}  // namespace ditto
