// Structured outputs on arbitrary bytes: the rest after the first byte is a request body (JSON)
// read by read_sampling_params — structured_outputs and vLLM's guided_* fields — and, when it
// carries a constraint, compiled by the grammar engine against the real Qwen3 vocabulary. A
// constraint that compiles is walked for up to 24 tokens, choosing among the allowed tokens by the
// first byte: each chosen token must be accepted (a mask that allows a token the matcher then
// refuses is a finding, like a crash, unless the grammar engine's per-step limits stopped it), and rolling the last
// tokens back must give the earlier mask's bits again. Any input must work or throw ditto::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/sampling_params_json.h"
#include "engine/structured_output.h"
#include "fuzz_real_files.h"

namespace {

const std::shared_ptr<const ditto::GrammarVocabulary>& vocabulary() {
  static const std::shared_ptr<const ditto::GrammarVocabulary> v = std::make_shared<ditto::GrammarVocabulary>(
      ditto::fuzz::qwen3_tokenizer(), 151936, std::vector<int32_t>{151645, 151643});
  return v;
}

// The k-th allowed token of `mask` counting from `start` (wrapping), or -1 when none is.
int32_t pick(const std::vector<uint32_t>& mask, uint32_t start) {
  const auto n = static_cast<uint32_t>(mask.size() * 32);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t t = (start + k) % n;
    if (ditto::mask_allows(mask, static_cast<int32_t>(t))) return static_cast<int32_t>(t);
  }
  return -1;
}

void walk(const ditto::StructuredOutputGrammar& g, uint8_t salt) {
  const std::unique_ptr<ditto::GrammarMatcher> m = g.new_matcher();
  std::vector<uint32_t> mask(vocabulary()->mask_words());
  std::vector<uint32_t> first;
  for (int step = 0; step < 24 && !m->is_stopped(); ++step) {
    if (!m->fill_mask(mask)) return;
    if (step == 0) first = mask;
    const int32_t t = pick(mask, static_cast<uint32_t>(salt) * 2654435761u + static_cast<uint32_t>(step) * 40503u);
    if (t < 0) return;
    if (!m->accept(t)) {
      // The engine's per-step resource limits (lexer or parser "TooComplex") may stop a matcher
      // on any token: the engine then ends the choice with finish_reason "error" and the reason.
      if (m->error().find("TooComplex") != std::string::npos) return;
      std::fprintf(stderr, "fuzz: token %d was in the mask but refused: %s\n", t, m->error().c_str());
      std::abort();
    }
    if (step == 3) {  // back to the start and forward again: the first mask's bits
      if (!m->rollback(4)) std::abort();
      std::vector<uint32_t> again(mask.size());
      if (!m->fill_mask(again) || std::memcmp(again.data(), first.data(), first.size() * 4) != 0) {
        std::fprintf(stderr, "fuzz: the mask after rolling back 4 tokens differs from the first\n");
        std::abort();
      }
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)vocabulary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(data + 1, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return 0;
  try {
    ditto::SamplingParams p;
    ditto::read_sampling_params(body, p);
    if (!p.structured_outputs) return 0;
    p.validate(151936);
    walk(*ditto::StructuredOutputGrammar::compile(*p.structured_outputs, vocabulary()), data[0]);
  } catch (const ditto::Error&) {
  }
  return 0;
}
