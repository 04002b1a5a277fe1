#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace ditto {
namespace {

// The rules of transformers' clean_up_tokenization, in order.
struct Rule {
  std::string_view from;
  std::string_view to;
};
constexpr Rule kRules[] = {
    {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = s.find(from);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t last = 0;
  while (pos != std::string::npos) {
    out.append(s, last, pos - last);
    out.append(to);
    last = pos + from.size();
    pos = s.find(from, last);
  }
  out.append(s, last, std::string::npos);
  s.swap(out);
}

// Every rule only deletes spaces (U+0020), so non-space characters are never removed and two
// adjacent ones stay adjacent through all rules. A rule occurrence spanning the boundary between
// adjacent characters x y (neither a space) would contain "xy" after its leading space; the only
// such pairs in the rules are n' 't 'm 's 've 're, so if x is not one of n ' v r no occurrence
// ever spans the boundary, and cleaning the two sides separately gives the same text.
bool safe_boundary(char x, char y) {
  return x != ' ' && y != ' ' && x != 'n' && x != '\'' && x != 'v' && x != 'r' &&
         (static_cast<unsigned char>(y) & 0xC0) != 0x80;  // y starts a character
}

}  // namespace

void Decoder::parse_into(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw_invalid_argument(where + ": expected an object with a string \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  auto string_field = [&](const nlohmann::json& o, const char* key, const std::string& at) {
    if (!o.contains(key) || !o[key].is_string()) throw_invalid_argument(at + "." + key + ": expected a string");
    return o[key].get<std::string>();
  };
  auto count_field = [&](const char* key) -> size_t {
    if (!j.contains(key)) return 0;
    if (!j[key].is_number_unsigned()) throw_invalid_argument(where + "." + key + ": expected a non-negative integer");
    return j[key].get<size_t>();
  };
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      throw_invalid_argument(where + ": Sequence needs an array \"decoders\"");
    }
    present_ = true;  // even empty: Hugging Face joins a decoder's tokens without spaces
    const auto& list = j["decoders"];
    for (size_t i = 0; i < list.size(); ++i) parse_into(list[i], where + ".decoders[" + std::to_string(i) + "]");
    return;
  }
  present_ = true;
  if (type == "Strip") {
    TokenStep step{TokenStep::Kind::kStrip, "", string_field(j, "content", where), count_field("start"),
                   count_field("stop")};
    if (step.content.empty()) throw_invalid_argument(where + ".content: expected one character");
    if (fused_) {
      if (step.stop != 0 || strip_start_ != 0) {
        throw_invalid_argument(where +
                               ": a Strip after Fuse is supported only once and with stop 0 (text is streamed)");
      }
      strip_start_ = step.start;
      strip_content_ = step.content;
    } else {
      token_steps_.push_back(std::move(step));
    }
    return;
  }
  if (fused_ || strip_start_ != 0) {
    throw_invalid_argument(where + ".type '" + type + "' after Fuse is not supported (only a Strip may follow it)");
  }
  if (type == "ByteLevel") {
    byte_level_ = true;
  } else if (type == "Fuse") {
    fused_ = true;
  } else if (type == "ByteFallback") {
    token_steps_.push_back({TokenStep::Kind::kByteFallback, "", "", 0, 0});
  } else if (type == "Replace") {
    if (!j.contains("pattern") || !j["pattern"].is_object() || !j["pattern"].contains("String")) {
      throw_invalid_argument(where +
                             ".pattern: expected {\"String\": ...} (ditto does not support a Regex pattern in "
                             "a Replace decoder)");
    }
    TokenStep step{TokenStep::Kind::kReplace, string_field(j["pattern"], "String", where + ".pattern"),
                   string_field(j, "content", where), 0, 0};
    if (step.pattern.empty()) throw_invalid_argument(where + ".pattern.String: expected a non-empty string");
    token_steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    const std::string replacement = string_field(j, "replacement", where);
    if (replacement.empty()) throw_invalid_argument(where + ".replacement: expected a non-empty string");
    token_steps_.push_back({TokenStep::Kind::kReplace, replacement, " ", 0, 0});
    bool prepend = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      prepend = j["prepend_scheme"].get<std::string>() != "never";
    } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean()) {
      prepend = j["add_prefix_space"].get<bool>();
    }
    if (prepend) {
      strip_start_ = 1;
      strip_content_ = " ";
    }
  } else {
    throw_invalid_argument(where + ".type '" + type +
                           "' is not supported (ditto supports ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                           "Metaspace, a Sequence of them, and null)");
  }
  if (byte_level_ && (!token_steps_.empty() || fused_)) {
    throw_invalid_argument(where + ": ByteLevel combined with other decoders is not supported");
  }
}

Decoder Decoder::from_json(const nlohmann::json& j, const std::string& where) {
  Decoder d;
  d.parse_into(j, where);
  return d;
}

std::string Decoder::token_bytes(std::string_view token) const {
  if (byte_level_) return byte_level::decode_token(token);
  std::string out(token);
  for (const TokenStep& step : token_steps_) {
    switch (step.kind) {
      case TokenStep::Kind::kReplace: replace_all(out, step.pattern, step.content); break;
      case TokenStep::Kind::kByteFallback: {
        // Hugging Face: exactly "<0x" + two hex digits + ">"; the byte ends this token's steps.
        auto hex = [](char c) {
          return c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
        };
        if (out.size() == 6 && out.compare(0, 3, "<0x") == 0 && out[5] == '>' && hex(out[3]) >= 0 && hex(out[4]) >= 0) {
          return std::string(1, static_cast<char>(hex(out[3]) * 16 + hex(out[4])));
        }
        break;
      }
      case TokenStep::Kind::kStrip: {
        size_t begin = 0, end = out.size();
        for (size_t i = 0; i < step.start && out.compare(begin, step.content.size(), step.content) == 0; ++i) {
          begin += step.content.size();
        }
        for (size_t i = 0; i < step.stop && end >= begin + step.content.size() &&
                           out.compare(end - step.content.size(), step.content.size(), step.content) == 0;
             ++i) {
          end -= step.content.size();
        }
        out = out.substr(begin, end - begin);
        break;
      }
    }
  }
  return out;
}

size_t Decoder::strip_leading(std::string& text, size_t at_most) const {
  if (strip_content_.empty()) return 0;
  size_t n = 0;
  size_t begin = 0;
  while (n < at_most && text.compare(begin, strip_content_.size(), strip_content_) == 0) {
    begin += strip_content_.size();
    ++n;
  }
  text.erase(0, begin);
  return n;
}

std::string clean_up_tokenization(std::string_view text) {
  std::string s(text);
  for (const Rule& rule : kRules) replace_all(s, rule.from, rule.to);
  return s;
}

void CleanUpStream::feed(std::string_view text, std::string& out) {
  pending_.append(text);
  size_t cut = 0;
  for (size_t k = pending_.size(); k-- > 1;) {
    if (safe_boundary(pending_[k - 1], pending_[k])) {
      cut = k;
      break;
    }
  }
  if (cut == 0) return;
  out += clean_up_tokenization(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
}

void CleanUpStream::finish(std::string& out) {
  out += clean_up_tokenization(pending_);
  pending_.clear();
}

}  // namespace ditto
