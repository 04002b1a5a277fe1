// Checks the model directory `ditto make-test-model` wrote (its path comes as argv[1]): complete
// (config, generation config, tokenizer files) and loadable, with every tensor the config implies.
#include <cstdio>
#include <filesystem>

#include "architecture/config.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: generated_model_check MODEL_DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  int failures = 0;
  for (const char* file : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::is_regular_file(dir / file)) {
      std::fprintf(stderr, "missing %s\n", (dir / file).c_str());
      ++failures;
    }
  }
  try {
    const ditto::ModelConfig c = ditto::load_model_config((dir / "config.json").string());
    const ditto::WeightStore w = ditto::WeightStore::open(dir.string());
    ditto::validate_weights(c, w);
    if (w.num_files() < 2) {
      std::fprintf(stderr, "expected a sharded model, got %zu file(s)\n", w.num_files());
      ++failures;
    }
    if (w.names().size() != ditto::expected_tensors(c).size()) {
      std::fprintf(stderr, "%zu tensors, config implies %zu\n", w.names().size(), ditto::expected_tensors(c).size());
      ++failures;
    }
  } catch (const ditto::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
