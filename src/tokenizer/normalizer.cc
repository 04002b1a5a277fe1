#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

// True when `form` provably leaves `text` unchanged: for the compatibility and decomposing forms,
// which change Latin-1 letters too, only ASCII is safe.
bool ascii_only(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

void apply(Normalizer::Form form, std::string_view text, std::string& out) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Normalizer::Form::kNFC: options |= UTF8PROC_COMPOSE; break;
    case Normalizer::Form::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case Normalizer::Form::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Normalizer::Form::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  if (n < 0) {
    throw_invalid_argument(std::string("normalizer: utf8proc failed: ") + utf8proc_errmsg(n));
  }
  out.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

// NFC of `text`, normalizing only the segments around code points that are not nfc_inert. The
// position before an inert code point is a normalization boundary (it is a starter that never
// combines with what precedes it), so NFC(x y) = NFC(x) NFC(y) when y starts with one; a segment
// runs from the inert character before a non-inert one (it may compose with what follows) to the
// next inert character that is followed by an inert one (or the end). Returns `text` itself when
// everything is inert, otherwise writes to `out` and returns a view of it.
std::string_view nfc(std::string_view text, std::string& out) {
  auto inert_at = [&](size_t i, size_t* next) {
    if (static_cast<unsigned char>(text[i]) < 0xCC) {  // lead bytes of code points below U+0300
      *next = i + utf8::sequence_length(static_cast<unsigned char>(text[i]));
      return true;
    }
    *next = i;
    return nfc_inert(utf8::next(text, *next));
  };
  bool changed = false;
  size_t copied = 0;      // text[0, copied) is accounted for in `out`
  size_t last_inert = 0;  // start of the latest inert code point (a boundary before it)
  bool have_inert = false;
  std::string segment;
  size_t i = 0;
  while (i < text.size()) {
    size_t next = 0;
    if (inert_at(i, &next)) {
      last_inert = i;
      have_inert = true;
      i = next;
      continue;
    }
    const size_t begin = have_inert && last_inert >= copied ? last_inert : std::max(copied, i);
    // Extend over non-inert code points and single inert ones between them.
    size_t end = next;
    while (end < text.size()) {
      size_t after = 0;
      if (!inert_at(end, &after)) {
        end = after;
        continue;
      }
      size_t after2 = 0;
      if (after < text.size() && !inert_at(after, &after2)) {
        end = after2;
        continue;
      }
      break;
    }
    if (!changed) {
      out.clear();
      out.reserve(text.size() + 16);
      changed = true;
    }
    out.append(text.substr(copied, begin - copied));
    apply(Normalizer::Form::kNFC, text.substr(begin, end - begin), segment);
    out += segment;
    copied = end;
    have_inert = false;
    i = end;
  }
  if (!changed) return text;
  out.append(text.substr(copied));
  return out;
}

}  // namespace

bool nfc_inert(char32_t cp) {
  // Below U+0300 nothing has a decomposition that NFC would not recompose, nothing combines, and
  // nothing is the second half of a canonical composition.
  if (cp < 0x300) return true;
  // Hangul syllables are stable starters; a trailing jamo that would compose with an LV syllable
  // is itself flagged below (the conjoining jamo block).
  if (cp >= 0xAC00 && cp <= 0xD7A3) return true;
  if (cp >= 0x1100 && cp <= 0x11FF) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  // The second halves of canonical compositions are all marks (besides the jamo above).
  if (p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
      p->category == UTF8PROC_CATEGORY_ME) {
    return false;
  }
  // A canonical decomposition (decomp_type 0) may not come back as the same code point
  // (singletons, composition exclusions); compatibility decompositions are left alone by NFC.
  return p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0;
}

void Normalizer::parse_into(const nlohmann::json& j, const std::string& where, std::vector<Step>& steps) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw_invalid_argument(where + ": expected an object with a string \"type\"");
  }
  auto string_field = [&](const nlohmann::json& o, const char* key, const std::string& at) {
    if (!o.contains(key) || !o[key].is_string()) throw_invalid_argument(at + "." + key + ": expected a string");
    return o[key].get<std::string>();
  };
  const std::string type = j["type"].get<std::string>();
  Step step;
  if (type == "NFC") {
    step.form = Form::kNFC;
  } else if (type == "NFD") {
    step.form = Form::kNFD;
  } else if (type == "NFKC") {
    step.form = Form::kNFKC;
  } else if (type == "NFKD") {
    step.form = Form::kNFKD;
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    step.content = string_field(j, "prepend", where);
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    if (!j.contains("pattern") || !j["pattern"].is_object() || !j["pattern"].contains("String")) {
      throw_invalid_argument(where +
                             ".pattern: expected {\"String\": ...} (ditto does not support a Regex pattern "
                             "in a Replace normalizer)");
    }
    step.pattern = string_field(j["pattern"], "String", where + ".pattern");
    if (step.pattern.empty()) throw_invalid_argument(where + ".pattern.String: expected a non-empty string");
    step.content = string_field(j, "content", where);
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      throw_invalid_argument(where + ": Sequence needs an array \"normalizers\"");
    }
    const auto& list = j["normalizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      parse_into(list[i], where + ".normalizers[" + std::to_string(i) + "]", steps);
    }
    return;
  } else {
    throw_invalid_argument(where + ".type '" + type +
                           "' is not supported (ditto supports NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence and "
                           "null)");
  }
  steps.push_back(std::move(step));
}

Normalizer Normalizer::from_json(const nlohmann::json& j, const std::string& where) {
  Normalizer n;
  parse_into(j, where, n.steps_);
  return n;
}

std::string_view Normalizer::normalize(std::string_view text, std::string& storage) const {
  std::string_view current = text;
  std::string scratch;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kForm:
        if (step.form == Form::kNFC) {
          const std::string_view result = nfc(current, scratch);
          if (result.data() == current.data()) continue;  // unchanged
        } else {
          if (ascii_only(current)) continue;
          apply(step.form, current, scratch);
        }
        break;
      case Kind::kPrepend:
        if (current.empty()) continue;
        scratch.assign(step.content);
        scratch.append(current);
        break;
      case Kind::kReplace: {
        size_t pos = current.find(step.pattern);
        if (pos == std::string_view::npos) continue;
        scratch.clear();
        size_t last = 0;
        while (pos != std::string_view::npos) {
          scratch.append(current.substr(last, pos - last));
          scratch.append(step.content);
          last = pos + step.pattern.size();
          pos = current.find(step.pattern, last);
        }
        scratch.append(current.substr(last));
        break;
      }
    }
    storage.swap(scratch);
    current = storage;
  }
  return current;
}

}  // namespace ditto
