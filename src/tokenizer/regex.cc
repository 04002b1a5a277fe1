#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

// Per-thread match data and JIT stack, shared by every Regex: find_all is called for every piece
// of every encode, so these are allocated once per thread rather than per call.
constexpr std::string_view kMongolianVowelSeparator = "\xe1\xa0\x8e";  // U+180E
constexpr std::string_view kZeroWidthSpace = "\xe2\x80\x8b";           // U+200B

struct ThreadMatchState {
  std::string subject_copy;
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context != nullptr && jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  DITTO_CHECK(state.data != nullptr && state.context != nullptr) << "PCRE2 match data allocation failed";
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& what) { compile(pattern, 0, what); }

Regex Regex::literal(const std::string& text, const std::string& what) {
  // Hugging Face compiles a String pattern as the escaped regex (pre_tokenizers/split.rs), so an
  // empty one matches the empty string at every character boundary, as here.
  Regex r;
  r.compile(text, PCRE2_LITERAL, what);
  return r;
}

void Regex::compile(const std::string& pattern, uint32_t options, const std::string& what) {
  pattern_ = pattern;
  what_ = what;
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   // PCRE2 refuses UCP with LITERAL; a literal needs no classes.
                                   (options & PCRE2_LITERAL) ? options | PCRE2_UTF : options | PCRE2_UTF | PCRE2_UCP,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    throw_invalid_argument(what + ": cannot compile regex '" + pattern + "': " + pcre2_message(error) + " at offset " +
                           std::to_string(offset));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  // The U+180E substitution (see find_all) is exact unless the pattern names U+180E or U+200B
  // itself; a literal pattern has no classes to fix.
  auto names = [&](std::string_view raw, std::string_view hex_upper, std::string_view hex_lower) {
    return pattern.find(raw) != std::string::npos || pattern.find(hex_upper) != std::string::npos ||
           pattern.find(hex_lower) != std::string::npos;
  };
  hide_mvs_ = (options & PCRE2_LITERAL) == 0 && !names(kMongolianVowelSeparator, "180E", "180e") &&
              !names(kZeroWidthSpace, "200B", "200b");
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      what_(std::move(other.what_)),
      code_(std::exchange(other.code_, nullptr)),
      jit_(other.jit_),
      hide_mvs_(other.hide_mvs_) {}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
    pattern_ = std::move(other.pattern_);
    what_ = std::move(other.what_);
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
    hide_mvs_ = other.hide_mvs_;
  }
  return *this;
}

void Regex::find_all(std::string_view subject, std::vector<MatchSpan>& out) const {
  ThreadMatchState& state = thread_match_state();
  // PCRE2 10.42 counts U+180E MONGOLIAN VOWEL SEPARATOR as white space (\s, \h) for Perl's sake;
  // Unicode (since 6.3) and Oniguruma, Hugging Face's engine, do not: it is a format character
  // (Cf). Match on a copy where it is U+200B ZERO WIDTH SPACE, also Cf and also 3 bytes, so the
  // offsets hold for the original.
  if (hide_mvs_ && subject.find(kMongolianVowelSeparator) != std::string_view::npos) {
    std::string& copy = state.subject_copy;
    copy.assign(subject);
    for (size_t at = copy.find(kMongolianVowelSeparator); at != std::string::npos;
         at = copy.find(kMongolianVowelSeparator, at + 3)) {
      copy.replace(at, 3, kZeroWidthSpace);
    }
    subject = copy;
  }
  const auto* code = static_cast<const pcre2_code*>(code_);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const size_t n = subject.size();
  // Oniguruma's find_iter (Hugging Face's SysRegex): search from `start`; an empty match that
  // ends where the previous match ended is rejected and the search resumes one character later.
  size_t start = 0;
  size_t last_match_end = std::string_view::npos;
  while (start <= n) {
    // The subject was validated once by the caller; PCRE2 need not re-check it on every call.
    const int rc = jit_ ? pcre2_jit_match(code, s, n, start, PCRE2_NO_UTF_CHECK, state.data, state.context)
                        : pcre2_match(code, s, n, start, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw_error(ErrorCode::kInternal, what_ + ": matching regex '" + pattern_ + "' failed: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin == end && end == last_match_end) {
      start += start < n ? utf8::sequence_length(static_cast<unsigned char>(subject[start])) : 1;
      continue;
    }
    out.push_back(MatchSpan{static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
    start = end;
    last_match_end = end;
  }
}

}  // namespace ditto
