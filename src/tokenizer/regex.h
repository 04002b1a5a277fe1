// A compiled PCRE2 regular expression (UTF + Unicode properties, JIT when available) used by the
// Split and ByteLevel pre-tokenizers. Patterns are compiled as the tokenizer file spells them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// A match or gap of a pre-tokenizer split: bytes [begin, end) of the piece being split.
struct MatchSpan {
  uint32_t begin;
  uint32_t end;
};

class Regex {
 public:
  // Compiles `pattern` with PCRE2_UTF | PCRE2_UCP (so \s, \p{L}, \w are Unicode-aware) and
  // JIT-compiles it when the library supports JIT. `what` names the pattern's origin for errors
  // (e.g. "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex").
  // Throws Error(kInvalidArgument) naming `what`, the pattern, PCRE2's message and the offset.
  Regex(const std::string& pattern, const std::string& what);
  // A literal string (Split's {"String": ...} pattern): every occurrence matches.
  static Regex literal(const std::string& text, const std::string& what);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the successive non-overlapping matches in `subject` (valid UTF-8) to `out`, scanning
  // left to right as Oniguruma's find_iter (Hugging Face's SysRegex) does: an empty match ending
  // where the previous match ended is skipped and the search resumes one character later.
  // Thread-safe (match data is per thread). Throws Error(kInternal) if PCRE2 fails (e.g. a
  // resource limit) with its message.
  void find_all(std::string_view subject, std::vector<MatchSpan>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  void compile(const std::string& pattern, uint32_t options, const std::string& what);

  std::string pattern_;
  std::string what_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  bool hide_mvs_ = false;  // match U+180E as U+200B (see find_all)
};

}  // namespace ditto
