#include "model_options.h"

#include "parallel/tensor_parallel.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/hub.h"
#include "core/error.h"

namespace ditto {

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("--model", o.model,
                  "Model directory, GGUF file or Hugging Face hub id (looked up in the local cache)")
      ->required();
  cmd->add_option("--threads", o.threads,
                  "Worker threads; 0 (the default) means $DITTO_NUM_THREADS or "
                  "all cores. Outputs are bit-identical for any value")
      ->check(CLI::Range(0, ThreadPool::kMaxThreads));
  cmd->add_option("--block-size", o.block_size, "KV cache block size in tokens")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_flag("--report-memory", o.report_memory, "Print weight bytes and peak RSS after loading (stderr)");
  add_tensor_parallel_option(cmd, o.tensor_parallel_size);
}

void add_speculative_config_option(CLI::App* cmd, std::string& speculative_config) {
  cmd->add_option("--speculative-config", speculative_config,
                  "Speculative decoding as JSON (vLLM's keys): {\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                  "\"prompt_lookup_max\": 4} or {\"model\": DRAFT, \"num_speculative_tokens\": 4}; outputs are the "
                  "same bits with it on or off, only faster (docs/SPECULATIVE.md)");
}

void add_tensor_parallel_option(CLI::App* cmd, int& tensor_parallel_size) {
  cmd->add_option("--tensor-parallel-size,--tp", tensor_parallel_size,
                  "Split the model over N processes launched with `mpirun -np N` (one rank each, any hosts); "
                  "outputs are bit-identical for every N")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
}

LoadedModel load_model(const ModelOptions& o) {
  LoadedModel lm;
  lm.pool = std::make_unique<ThreadPool>(o.threads > 0 ? o.threads : default_num_threads());
  const std::string dir = resolve_model_path(o.model);
  lm.model =
      CausalLM::load(dir, lm.pool.get(),
                     o.tensor_parallel_size > 1 ? TensorParallelGroup::initialize(o.tensor_parallel_size) : nullptr);
  if (o.report_memory) report_load(dir, *lm.model);
  return lm;
}

void note_random_weights(const std::string& command, const std::string& model) {
  std::string model_path;
  bool random = false;
  try {
    model_path = resolve_model_path(model);
    random = is_gguf_file(model_path) ? gguf_model_config(*GgufFile::open(model_path)).random_weights
                                      : load_model_config(model_path + "/config.json").random_weights;
  } catch (const Error&) {
    return;  // the loader reports it
  }
  if (!random) return;
  std::fprintf(stderr,
               "%s: note: %s has seeded random weights (written by `ditto make-test-model`), not a trained model: "
               "the text it writes is noise, and that is not a bug. For real text use a trained model, e.g. `make "
               "run`'s SmolLM2-135M-Instruct GGUF.\n",
               command.c_str(), model_path.c_str());
}

void report_load(const std::string& dir, const CausalLM& model) {
  const LoadStats& s = model.load_stats();
  const int64_t rss = peak_rss_bytes();
  std::fprintf(stderr, "loaded %s: %lld tensors, weights %.1f MB, peak RSS %.1f MB (%.3fx weights), %.2f s\n",
               dir.c_str(), static_cast<long long>(s.num_tensors), s.weight_bytes / 1e6, rss / 1e6,
               static_cast<double>(rss) / static_cast<double>(s.weight_bytes), s.seconds);
}

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      throw_invalid_argument(flag + ": '" + item +
                             "' is not a token id (expected comma-separated "
                             "non-negative integers, e.g. 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

int64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

int64_t parse_size_bytes(const std::string& text, const std::string& flag) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    throw_invalid_argument(flag + ": expected a size such as 2GiB or 512MB, got '" + text + "'");
  }
  const std::string unit = text.substr(end);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name && value > 0 && value * scale < 9.0e18) return static_cast<int64_t>(value * scale);
  throw_invalid_argument(flag +
                         ": expected a positive size with a unit B, KB, MB, GB, TB, KiB, MiB, GiB or TiB "
                         "(e.g. 2GiB), got '" +
                         text + "'");
}

}  // namespace ditto
