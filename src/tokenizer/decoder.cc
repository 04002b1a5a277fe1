#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace ditto {
namespace {

void parse_into(const nlohmann::json& j, const std::string& where, bool& byte_level, int& count) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw_invalid_argument(where + ": expected an object with a string \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") {
    byte_level = true;
    ++count;
  } else if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      throw_invalid_argument(where + ": Sequence needs an array \"decoders\"");
    }
    const auto& list = j["decoders"];
    for (size_t i = 0; i < list.size(); ++i) {
      parse_into(list[i], where + ".decoders[" + std::to_string(i) + "]", byte_level, count);
    }
  } else {
    throw_invalid_argument(where + ".type '" + type +
                           "' is not supported (ditto supports the ByteLevel decoder, a Sequence of it, and null)");
  }
}

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

Decoder Decoder::from_json(const nlohmann::json& j, const std::string& where) {
  Decoder d;
  int count = 0;
  parse_into(j, where, d.byte_level_, count);
  return d;
}

std::string Decoder::token_bytes(std::string_view token) const {
  return byte_level_ ? byte_level::decode_token(token) : std::string(token);
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
