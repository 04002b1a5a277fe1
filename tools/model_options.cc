#include "model_options.h"

#include "parallel/tensor_parallel.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/hub.h"
#include "core/error.h"
#include "engine/engine_args_table.h"

namespace ditto {

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("--model", o.engine.model,
                  "Model directory, GGUF file or Hugging Face hub id (looked up in the local cache)")
      ->required();
  add_engine_flags(cmd, o.engine, {"threads", "block_size", "tensor_parallel_size"});
  cmd->add_flag("--report-memory", o.report_memory, "Print weight bytes and peak RSS after loading (stderr)");
}

void add_engine_flags(CLI::App* cmd, EngineArgs& args, std::initializer_list<const char*> names) {
  for (const EngineArgField& field : engine_arg_fields()) {
    if (names.size() != 0 &&
        std::none_of(names.begin(), names.end(), [&](const char* n) { return std::string_view(n) == field.name; }))
      continue;
    const std::string flag = std::string(field.flag).substr(0, std::string(field.flag).find(','));
    if (field.kind == EngineArgKind::kBool) {
      cmd->add_flag_callback(
          field.flag, [&args, &field] { field.assign(args, nlohmann::json(field.cli_flag_value)); }, field.help);
      continue;
    }
    CLI::Option* option = cmd->add_option_function<std::string>(
        field.flag,
        [&args, &field, flag](const std::string& text) {
          set_engine_arg(args, field, engine_arg_from_text(field, text, flag), flag);
        },
        field.help);
    // The same check at parse time, so that a bad value is CLI11's usage error naming the flag.
    option->check(CLI::Validator(
        [&field, flag](std::string& text) {
          try {
            EngineArgs scratch;
            set_engine_arg(scratch, field, engine_arg_from_text(field, text, flag), flag);
            return std::string();
          } catch (const Error& e) {
            std::string message = e.what();  // CLI11 puts the flag in front: say it once
            if (message.rfind(flag, 0) == 0) message.erase(0, message.find_first_not_of(": ", flag.size()));
            return message;
          }
        },
        ""));
    option->type_name(field.kind == EngineArgKind::kInteger ? "INT"
                      : field.kind == EngineArgKind::kBytes ? "SIZE"
                                                            : "TEXT");
    if (field.show_default) option->default_str(field.show(args));
  }
}

LoadedModel load_model(const ModelOptions& o) {
  LoadedModel lm;
  const EngineArgs& a = o.engine;
  lm.pool = std::make_unique<ThreadPool>(a.threads > 0 ? a.threads : default_num_threads());
  const std::string dir = resolve_model_path(a.model);
  lm.model =
      CausalLM::load(dir, lm.pool.get(),
                     a.tensor_parallel_size > 1 ? TensorParallelGroup::initialize(a.tensor_parallel_size) : nullptr);
  if (o.report_memory) {
    const LoadStats& s = lm.model->load_stats();
    ModelInfo info;
    info.model_dir = dir;
    info.num_tensors = s.num_tensors;
    info.weight_bytes = s.weight_bytes;
    info.load_seconds = s.seconds;
    report_load(info);
  }
  return lm;
}

std::string random_weights_note(const std::string& model) {
  std::string model_path;
  bool random = false;
  try {
    model_path = resolve_model_path(model);
    random = is_gguf_file(model_path) ? gguf_model_config(*GgufFile::open(model_path)).random_weights
                                      : load_model_config(model_path + "/config.json").random_weights;
  } catch (const Error&) {
    return "";  // the loader reports it
  }
  if (!random) return "";
  return model_path +
         " has seeded random weights (written by `ditto make-test-model`), not a trained model: the text it writes "
         "is noise, and that is not a bug. For real text use a trained model, e.g. `make run`'s "
         "SmolLM2-135M-Instruct GGUF.";
}

void note_random_weights(const std::string& command, const std::string& model) {
  if (const std::string note = random_weights_note(model); !note.empty())
    std::fprintf(stderr, "%s: note: %s\n", command.c_str(), note.c_str());
}

void report_load(const ModelInfo& m) {
  const int64_t rss = peak_rss_bytes();
  std::fprintf(stderr, "loaded %s: %lld tensors, weights %.1f MB, peak RSS %.1f MB (%.3fx weights), %.2f s\n",
               m.model_dir.c_str(), static_cast<long long>(m.num_tensors), static_cast<double>(m.weight_bytes) / 1e6,
               static_cast<double>(rss) / 1e6, static_cast<double>(rss) / static_cast<double>(m.weight_bytes),
               m.load_seconds);
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

}  // namespace ditto
