// `ditto export-gguf`: writes a Hugging Face model directory as the GGUF file llama.cpp's
// convert_hf_to_gguf.py writes for it. The converter is checkpoint/gguf_export.h; this file parses flags.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "checkpoint/gguf_export.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/hub.h"
#include "commands.h"
#include "core/error.h"
#include "core/progress.h"

namespace ditto {
namespace {

struct ExportFlags {
  std::string model;
  std::string output;
  std::string outtype = "auto";
  bool quiet = false;  // no progress bar
};

void run(const ExportFlags& f) {
  enable_progress_bars(!f.quiet);
  const std::string dir = resolve_model_path(f.model);
  if (is_gguf_file(dir))
    throw_invalid_argument("--model " + f.model +
                           " is a GGUF file; export-gguf converts a Hugging Face model directory (config.json and "
                           "safetensors) to GGUF");
  std::string name = std::filesystem::path(f.model).filename().string();  // general.name
  if (name.empty()) name = std::filesystem::path(dir).filename().string();
  const GgufExportSummary s = export_gguf(dir, f.output, name, parse_gguf_outtype(f.outtype));
  std::printf("wrote %s: %s, %zu tensors, %s parameters, %llu bytes\n", f.output.c_str(), s.arch.c_str(), s.num_tensors,
              s.size_label.c_str(), static_cast<unsigned long long>(s.bytes));
}

}  // namespace

void add_export_gguf_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-gguf",
      "Write a Qwen3 / Qwen3-MoE / Llama model directory as GGUF, as llama.cpp's convert_hf_to_gguf.py "
      "does");
  cmd->add_option("--model", flags->model, "Model directory or Hugging Face hub id (local cache)")->required();
  cmd->add_option("--output", flags->output, "GGUF file to write (replaced if it exists)")->required();
  cmd->add_option(
         "--outtype", flags->outtype,
         "Weight matrices as stored (auto); every one in one type: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, "
         "q5_k, q6_k, q3_k; or llama-quantize's mixes: q2_k, q3_k_m, q4_k_m, q5_k_m, iq4_xs (its per-tensor "
         "choices). Plain round-to-nearest; rows a type's blocks do not divide fall back as llama.cpp's do; norms "
         "and biases stay F32")
      ->capture_default_str();
  cmd->add_flag("--quiet", flags->quiet, "No progress bars on stderr (they appear only on a terminal)");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace ditto
