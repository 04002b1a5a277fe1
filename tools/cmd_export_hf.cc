// `ditto export-hf`: writes a GGUF file ditto runs as a Hugging Face model directory (float weights,
// tokenizer.json, the chat template), for a trainer that loads safetensors. The converter is
// checkpoint/hf_export.h; this file parses flags.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "checkpoint/gguf_reader.h"
#include "checkpoint/hf_export.h"
#include "commands.h"
#include "core/error.h"

namespace ditto {
namespace {

struct ExportHfFlags {
  std::string model;
  std::string out;
  std::string dtype = "bfloat16";
};

void run(const ExportHfFlags& f) {
  if (!is_gguf_file(f.model))
    throw_invalid_argument("--model " + f.model +
                           " is not a GGUF file; export-hf converts a GGUF file to a Hugging Face directory "
                           "(export-gguf goes the other way)");
  const HfExportSummary s = export_hf(f.model, f.out, parse_hf_export_dtype(f.dtype));
  std::printf("wrote %s: %s, %zu tensors, %llu parameters (%s), model.safetensors %llu bytes\n", f.out.c_str(),
              s.architecture.c_str(), s.num_tensors, static_cast<unsigned long long>(s.num_parameters), f.dtype.c_str(),
              static_cast<unsigned long long>(s.safetensors_bytes));
}

}  // namespace

void add_export_hf_command(CLI::App& app) {
  auto flags = std::make_shared<ExportHfFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-hf",
      "Write a GGUF file as a Hugging Face model directory: config.json, model.safetensors (every tensor "
      "dequantized), tokenizer.json, tokenizer_config.json, generation_config.json");
  cmd->add_option("--model", flags->model, "GGUF file ditto can load")->required();
  cmd->add_option("--out", flags->out, "Model directory to write (created; its files of the same names replaced)")
      ->required();
  cmd->add_option("--dtype", flags->dtype,
                  "Weights as bfloat16 (the dequantized values rounded to nearest even) or float32 (exactly)")
      ->capture_default_str();
  cmd->callback([flags] { run(*flags); });
}

}  // namespace ditto
