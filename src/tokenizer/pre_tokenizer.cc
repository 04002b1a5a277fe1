#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace ditto {
namespace {

// GPT-2's split regex, which Hugging Face's ByteLevel pre-tokenizer applies when use_regex is
// true (pre_tokenizers/byte_level.rs).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

PreTokenizer::Behavior parse_behavior(const nlohmann::json& j, const std::string& where) {
  if (!j.is_string()) throw_invalid_argument(where + ": expected a string");
  const std::string b = j.get<std::string>();
  if (b == "Removed") return PreTokenizer::Behavior::kRemoved;
  if (b == "Isolated") return PreTokenizer::Behavior::kIsolated;
  if (b == "MergedWithPrevious") return PreTokenizer::Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return PreTokenizer::Behavior::kMergedWithNext;
  if (b == "Contiguous") return PreTokenizer::Behavior::kContiguous;
  throw_invalid_argument(where + " '" + b +
                         "' is not a split behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                         "Contiguous)");
}

bool optional_bool(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) throw_invalid_argument(where + "." + key + ": expected true or false");
  return j[key].get<bool>();
}

struct Part {
  MatchSpan span;
  bool is_match;
};

// Scratch reused across calls on one thread (pre_tokenize runs once per section of every encode).
struct Scratch {
  std::vector<MatchSpan> matches;
  std::vector<Part> parts;
  std::vector<MatchSpan> next;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Splits one piece as Hugging Face's NormalizedString::split does: the regex's matches and the
// gaps between them cover the piece; `behavior` decides what is kept and what is glued together;
// empty results are dropped. Appends to `out` with offsets shifted by `base`.
void split_piece(const Regex& regex, PreTokenizer::Behavior behavior, bool invert, std::string_view piece,
                 uint32_t base, Scratch& s, std::vector<MatchSpan>& out) {
  s.matches.clear();
  s.parts.clear();
  regex.find_all(piece, s.matches);
  uint32_t prev = 0;
  for (const MatchSpan& m : s.matches) {
    if (prev != m.begin) s.parts.push_back({{prev, m.begin}, false});
    s.parts.push_back({m, true});
    prev = m.end;
  }
  if (prev != piece.size()) s.parts.push_back({{prev, static_cast<uint32_t>(piece.size())}, false});
  if (invert) {
    for (Part& p : s.parts) p.is_match = !p.is_match;
  }

  using Behavior = PreTokenizer::Behavior;
  const size_t first = out.size();
  auto emit = [&](MatchSpan span) { out.push_back({span.begin + base, span.end + base}); };
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Part& p : s.parts) emit(p.span);
      break;
    case Behavior::kRemoved:
      for (const Part& p : s.parts) {
        if (!p.is_match) emit(p.span);
      }
      break;
    case Behavior::kContiguous:
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& p : s.parts) {
        const bool glue =
            behavior == Behavior::kContiguous ? p.is_match == previous_match : p.is_match && !previous_match;
        if (glue && out.size() > first) {
          out.back().end = p.span.end + base;
        } else {
          emit(p.span);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t i = s.parts.size(); i-- > 0;) {
        const Part& p = s.parts[i];
        if (p.is_match && !previous_match && out.size() > first) {
          out.back().begin = p.span.begin + base;
        } else {
          emit(p.span);
        }
        previous_match = p.is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      break;
    }
  }
  out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                           [](const MatchSpan& m) { return m.begin == m.end; }),
            out.end());
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& where) {
  PreTokenizer p;
  p.parse_into(j, where);
  return p;
}

void PreTokenizer::parse_into(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw_invalid_argument(where + ": expected an object with a string \"type\"");
  }
  if (byte_level_) {
    throw_invalid_argument(where + ": a pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      throw_invalid_argument(where + ": Sequence needs an array \"pretokenizers\"");
    }
    const auto& list = j["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      parse_into(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
    }
  } else if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object()) {
      throw_invalid_argument(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
    const auto& pattern = j["pattern"];
    Step step;
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = std::make_shared<Regex>(pattern["Regex"].get<std::string>(), where + ".pattern.Regex");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      step.regex =
          std::make_shared<Regex>(Regex::literal(pattern["String"].get<std::string>(), where + ".pattern.String"));
    } else {
      throw_invalid_argument(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
    if (!j.contains("behavior")) throw_invalid_argument(where + ": Split needs a \"behavior\"");
    step.behavior = parse_behavior(j["behavior"], where + ".behavior");
    step.invert = optional_bool(j, "invert", false, where);
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    Step step;
    step.add_prefix_space = optional_bool(j, "add_prefix_space", true, where);
    if (optional_bool(j, "use_regex", true, where)) {
      step.regex = std::make_shared<Regex>(kGpt2Pattern, where + " (GPT-2 regex)");
    }
    step.behavior = Behavior::kIsolated;
    steps_.push_back(std::move(step));
    byte_level_ = true;
  } else if (type == "Metaspace") {
    Step step;
    if (!j.contains("replacement") || !j["replacement"].is_string() || j["replacement"].get<std::string>().empty()) {
      throw_invalid_argument(where + ".replacement: expected a non-empty string");
    }
    step.replacement = j["replacement"].get<std::string>();
    // Current files name prepend_scheme; older ones only add_prefix_space (true: "always").
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      const std::string scheme = j["prepend_scheme"].is_string() ? j["prepend_scheme"].get<std::string>() : "";
      if (scheme == "always") {
        step.prepend = Step::Prepend::kAlways;
      } else if (scheme == "first") {
        step.prepend = Step::Prepend::kFirst;
      } else if (scheme == "never") {
        step.prepend = Step::Prepend::kNever;
      } else {
        throw_invalid_argument(where + ".prepend_scheme: expected \"always\", \"first\" or \"never\"");
      }
    } else {
      step.prepend = optional_bool(j, "add_prefix_space", true, where) ? Step::Prepend::kAlways : Step::Prepend::kNever;
    }
    if (optional_bool(j, "split", true, where)) {
      step.regex = std::make_shared<Regex>(Regex::literal(step.replacement, where + ".replacement"));
    }
    step.behavior = Behavior::kMergedWithNext;
    steps_.push_back(std::move(step));
  } else {
    throw_invalid_argument(where + ".type '" + type +
                           "' is not supported (ditto supports Split, ByteLevel, Metaspace, Sequence and null)");
  }
}

void PreTokenizer::pre_tokenize(std::string& buffer, std::vector<MatchSpan>& pieces, bool at_text_start) const {
  Scratch& s = scratch();
  for (const Step& step : steps_) {
    s.next.clear();
    for (size_t index = 0; index < pieces.size(); ++index) {
      MatchSpan piece = pieces[index];
      if (!step.replacement.empty()) {
        // Metaspace: the rewritten piece is appended to the buffer (never read while it grows).
        const bool starts_text = at_text_start && index == 0 && piece.begin == 0;
        std::string rewritten;
        const std::string_view text(buffer.data() + piece.begin, piece.end - piece.begin);
        for (const char c : text) {
          if (c == ' ') {
            rewritten += step.replacement;
          } else {
            rewritten.push_back(c);
          }
        }
        const bool prepend =
            step.prepend == Step::Prepend::kAlways || (step.prepend == Step::Prepend::kFirst && starts_text);
        if (prepend && rewritten.compare(0, step.replacement.size(), step.replacement) != 0) {
          rewritten.insert(0, step.replacement);
        }
        const auto begin = static_cast<uint32_t>(buffer.size());
        buffer += rewritten;
        piece = {begin, static_cast<uint32_t>(buffer.size())};
      }
      if (step.add_prefix_space && buffer[piece.begin] != ' ') {
        const size_t length = piece.end - piece.begin;
        const auto begin = static_cast<uint32_t>(buffer.size());
        buffer.reserve(buffer.size() + length + 1);  // so the copy below reads stable storage
        buffer.push_back(' ');
        buffer.append(buffer.data() + piece.begin, length);
        piece = {begin, static_cast<uint32_t>(buffer.size())};
      }
      if (step.regex == nullptr) {
        s.next.push_back(piece);
        continue;
      }
      const std::string_view text(buffer.data() + piece.begin, piece.end - piece.begin);
      split_piece(*step.regex, step.behavior, step.invert, text, piece.begin, s, s.next);
    }
    pieces.swap(s.next);
  }
}

}  // namespace ditto
