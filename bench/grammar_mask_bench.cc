// The grammar engine's cost per token on a real vocabulary: for each constraint, the compile time
// and the time to compute one token mask (GrammarMatcher::fill_mask) at every position of a valid
// output, walked REPEAT times with a fresh matcher (mean, median, 99th percentile, max, in µs; the
// first walk apart, which meets the grammar's lexer states for the first time),
// with the mask's share of a decode step given as --step-ms. Built with
// -DDITTO_BENCH_XGRAMMAR_DIR=<an xgrammar source tree built with CMake>, it times xgrammar's
// matcher on the same vocabulary and outputs in the same run and prints the ratio
// (docs/STRUCTURED_OUTPUTS.md says how the grammar engine was chosen).
//
//   build/bench/grammar_mask_bench [--tokenizer DIR] [--vocab-size 151936] [--repeat 20] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/structured_output.h"
#include "tokenizer/tokenizer.h"

#ifdef DITTO_BENCH_XGRAMMAR
#include <xgrammar/xgrammar.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  const char* name;
  const char* schema;  // a JSON Schema
  const char* output;  // a valid output, written in the schema's property order
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"person", R"j({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age":
        {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string", "pattern":
        "^[a-z]+@[a-z]+\\.com$"}}, "required": ["name", "age", "email"], "additionalProperties": false})j",
       R"j({"name": "Ada Lovelace", "age": 36, "email": "ada@example.com"})j"},
      {"inventory (bench/structured.py)",
       R"j({"type": "object", "properties": {"store": {"type": "string", "maxLength": 24}, "items": {"type":
        "array", "minItems": 3, "items": {"type": "object", "properties": {"name": {"type": "string",
        "maxLength": 16}, "qty": {"type": "integer", "minimum": 0, "maximum": 999}, "in_stock": {"type":
        "boolean"}}, "required": ["name", "qty", "in_stock"], "additionalProperties": false}}}, "required":
        ["store", "items"], "additionalProperties": false})j",
       R"j({"store": "Corner Hardware", "items": [{"name": "hammer", "qty": 12, "in_stock": true}, {"name":
        "box of nails", "qty": 340, "in_stock": true}, {"name": "saw", "qty": 0, "in_stock": false}]})j"},
      {"anyOf / enum / nested arrays",
       R"j({"type": "object", "properties": {"kind": {"enum": ["circle", "square", "triangle"]}, "points":
        {"type": "array", "items": {"type": "array", "items": {"anyOf": [{"type": "number"}, {"type":
        "null"}]}, "minItems": 2, "maxItems": 2}}}, "required": ["kind", "points"]})j",
       R"j({"kind": "triangle", "points": [[0, 0], [1.5, null], [3, -2.25]]})j"},
  };
  return c;
}

struct Stats {
  double compile_ms = 0;
  std::vector<double> first_walk_us;  // the first walk's masks (a fresh grammar: its lexer states built as met)
  std::vector<double> mask_us;        // the later walks' masks
};

nlohmann::json distribution(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  const auto n = us.size();
  double total = 0;
  for (double x : us) total += x;
  return {{"masks", n},
          {"mean_us", n ? total / static_cast<double>(n) : 0},
          {"median_us", n ? us[n / 2] : 0},
          {"p99_us", n ? us[std::min(n - 1, n * 99 / 100)] : 0},
          {"max_us", n ? us.back() : 0}};
}

nlohmann::json summary(const Stats& s) {
  nlohmann::json j = distribution(s.mask_us);
  j["compile_ms"] = s.compile_ms;
  j["first_walk"] = distribution(s.first_walk_us);
  return j;
}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

Stats time_llguidance(const Case& c, const std::vector<int32_t>& ids,
                      const std::shared_ptr<const ditto::GrammarVocabulary>& vocab, int repeat) {
  Stats s;
  ditto::StructuredOutputsParams p;
  p.json = c.schema;
  const auto t0 = Clock::now();
  const auto grammar = ditto::StructuredOutputGrammar::compile(p, vocab);
  s.compile_ms = us_since(t0) / 1000;
  std::vector<uint32_t> mask(vocab->mask_words());
  for (int r = 0; r < repeat; ++r) {
    auto m = grammar->new_matcher();
    for (int32_t t : ids) {
      const auto t1 = Clock::now();
      if (!m->fill_mask(mask)) throw std::runtime_error(std::string(c.name) + ": " + m->error());
      (r == 0 ? s.first_walk_us : s.mask_us).push_back(us_since(t1));
      if (!ditto::mask_allows(mask, t) || !m->accept(t))
        throw std::runtime_error(std::string(c.name) + ": llguidance refused token " + std::to_string(t));
    }
  }
  return s;
}

#ifdef DITTO_BENCH_XGRAMMAR
Stats time_xgrammar(const Case& c, const std::vector<int32_t>& ids, const xgrammar::TokenizerInfo& info, int vocab_size,
                    int repeat) {
  Stats s;
  xgrammar::GrammarCompiler compiler(info, 1, /*cache_enabled=*/false);
  const auto t0 = Clock::now();
  const xgrammar::CompiledGrammar cg = compiler.CompileJSONSchema(c.schema, /*any_whitespace=*/true);
  s.compile_ms = us_since(t0) / 1000;
  std::vector<int32_t> bits(static_cast<size_t>(xgrammar::GetBitmaskSize(vocab_size)));
  int64_t shape[1] = {static_cast<int64_t>(bits.size())};
  DLTensor t{};
  t.data = bits.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  for (int r = 0; r < repeat; ++r) {
    xgrammar::GrammarMatcher m(cg);
    for (int32_t id : ids) {
      const auto t1 = Clock::now();
      m.FillNextTokenBitmask(&t);
      (r == 0 ? s.first_walk_us : s.mask_us).push_back(us_since(t1));
      if (!m.AcceptToken(id))
        throw std::runtime_error(std::string(c.name) + ": xgrammar refused token " + std::to_string(id));
    }
  }
  return s;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Grammar engine cost per token on a real vocabulary (docs/STRUCTURED_OUTPUTS.md)"};
  std::string tokenizer_dir = DITTO_QWEN3_TOKENIZER_DIR;
  int64_t vocab_size = 151936;
  int repeat = 20;
  double step_ms = 0;
  bool json = false;
  app.add_option("--tokenizer", tokenizer_dir, "A directory with tokenizer.json (default: the real Qwen3 tokenizer)");
  app.add_option("--vocab-size", vocab_size, "The model's logit rows (Qwen3: 151936)");
  app.add_option("--repeat", repeat, "Walks of each output");
  app.add_option("--step-ms", step_ms, "A decode step's time, to print each mask's share of it");
  app.add_flag("--json", json, "One JSON object");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::unique_ptr<ditto::Tokenizer> tok = ditto::Tokenizer::load(tokenizer_dir);
    std::vector<int32_t> eos = tok->eos_token_ids();
    if (auto e = tok->token_to_id("<|endoftext|>"); e && std::find(eos.begin(), eos.end(), *e) == eos.end())
      eos.push_back(*e);
    const auto t0 = Clock::now();
    const auto vocab = std::make_shared<const ditto::GrammarVocabulary>(*tok, vocab_size, eos);
    nlohmann::json report = {{"vocab_size", vocab_size}, {"llguidance_vocabulary_ms", us_since(t0) / 1000}};
#ifdef DITTO_BENCH_XGRAMMAR
    std::vector<std::string> encoded(static_cast<size_t>(vocab_size));
    for (int32_t id = 0; id < tok->vocab_size(); ++id)
      encoded[static_cast<size_t>(id)] = tok->is_special(id) ? tok->id_to_token(id).value_or("") : tok->token_bytes(id);
    const auto t1 = Clock::now();
    const xgrammar::TokenizerInfo info(encoded, xgrammar::VocabType::RAW, static_cast<int>(vocab_size), eos);
    report["xgrammar_vocabulary_ms"] = us_since(t1) / 1000;
#endif
    for (const Case& c : cases()) {
      const std::vector<int32_t> ids = tok->encode(c.output, false);
      nlohmann::json row = {{"tokens", ids.size()}, {"llguidance", summary(time_llguidance(c, ids, vocab, repeat))}};
      if (step_ms > 0)
        row["llguidance_mean_share_of_step"] = row["llguidance"]["mean_us"].get<double>() / (step_ms * 1000);
#ifdef DITTO_BENCH_XGRAMMAR
      row["xgrammar"] = summary(time_xgrammar(c, ids, info, static_cast<int>(vocab_size), repeat));
      row["xgrammar_over_llguidance_mean"] =
          row["xgrammar"]["mean_us"].get<double>() / row["llguidance"]["mean_us"].get<double>();
#endif
      report["cases"][c.name] = row;
    }
    if (json) {
      std::printf("%s\n", report.dump().c_str());
    } else {
      std::printf("%s\n", report.dump(2).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_mask_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
