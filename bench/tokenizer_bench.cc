// Single-thread encode throughput of ditto's tokenizer.
//
//   tokenizer_bench --model DIR --input texts.jsonl [--repeat N] [--no-add-special-tokens]
//
// Reads {"text": ...} lines, encodes every string once as warmup, then N more times, and prints
// one JSON line: {"impl", "strings", "bytes", "tokens", "repeat", "best_s", "mb_per_s", "load_s"}
// where mb_per_s = input UTF-8 bytes / 1e6 / best wall time of one full pass (best of N, so the
// noise of a shared machine only ever makes the number smaller). bench/tokenizer.sh runs this
// beside the JavaScript tokenizer on the same inputs and prints the ratio.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> read_texts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ditto::throw_not_found(path + ": cannot open");
  std::vector<std::string> texts;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      ditto::throw_invalid_argument(path + ":" + std::to_string(n) + ": expected {\"text\": string}");
    }
    texts.push_back(j["text"].get<std::string>());
  }
  return texts;
}

// Tokenizer::load may return the tokenizer itself or a pointer to it.
template <typename T>
auto& deref(T& t) {
  if constexpr (requires { *t; }) {
    return *t;
  } else {
    return t;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Single-thread encode throughput of ditto's tokenizer (MB/s of UTF-8 input)."};
  std::string model_dir, input;
  int repeat = 5;
  bool add_special_tokens = true;
  app.add_option("--model", model_dir, "directory with tokenizer.json")->required();
  app.add_option("--input", input, "JSON lines {\"text\": ...}")->required();
  app.add_option("--repeat", repeat, "timed passes after one warmup pass (best is reported)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--add-special-tokens,!--no-add-special-tokens", add_special_tokens,
               "add the post-processor's special tokens (default: add)");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<std::string> texts = read_texts(input);
    size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();

    const auto t_load = Clock::now();
    auto loaded = ditto::Tokenizer::load(model_dir);
    const double load_s = seconds_since(t_load);
    auto& tokenizer = deref(loaded);

    size_t tokens = 0;
    for (const auto& t : texts) tokens += tokenizer.encode(std::string_view(t), add_special_tokens).size();

    double best = std::numeric_limits<double>::infinity();
    size_t sink = 0;  // keeps the encodes observable
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = Clock::now();
      for (const auto& t : texts) sink += tokenizer.encode(std::string_view(t), add_special_tokens).size();
      best = std::min(best, seconds_since(t0));
    }
    if (sink != tokens * static_cast<size_t>(repeat)) {
      std::fprintf(stderr, "error: token counts differ between passes\n");
      return 1;
    }
    nlohmann::json out = {
        {"impl", "ditto"}, {"strings", texts.size()},        {"bytes", bytes},  {"tokens", tokens}, {"repeat", repeat},
        {"best_s", best},  {"mb_per_s", bytes / 1e6 / best}, {"load_s", load_s}};
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
