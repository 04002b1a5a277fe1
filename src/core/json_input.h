// Parsing JSON that comes from users (command-line flags, JSON-lines input).
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ditto {

// Deeper documents are refused while parsing: serialising or converting them later recurses
// once per level, and 100,000 levels overflow the stack.
inline constexpr int kMaxJsonDepth = 512;

// Parses `text` as Json (nlohmann::json or nlohmann::ordered_json). Throws Error(kInvalidArgument)
// starting with `where` for invalid JSON or nesting deeper than kMaxJsonDepth.
template <typename Json>
Json parse_json_input(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text, [&](int depth, nlohmann::json::parse_event_t, Json&) {
      if (depth > kMaxJsonDepth)
        throw_invalid_argument(where + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    throw_invalid_argument(where + ": invalid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double (1e400)
    throw_invalid_argument(where + ": invalid JSON: " + e.what());
  }
}

// A value for an error message: compact JSON, invalid UTF-8 replaced, at most ~80 characters.
template <typename Json>
std::string json_excerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 80) + "... (" + std::to_string(text.size()) + " bytes)";
  return text;
}

// Strict readers for fields of user JSON. Each throws Error(kInvalidArgument) as
// "field 'KEY' must be RULE, got VALUE" when the value is not exactly what is asked: no fractions
// or booleans for integers, no wrap-around, no strings for numbers.
[[noreturn]] inline void bad_json_field(const std::string& key, const std::string& rule,
                                        const nlohmann::ordered_json& value) {
  throw_invalid_argument("field '" + key + "' must be " + rule + ", got " + json_excerpt(value));
}

// Far above any real count, far below wrap-around.
inline constexpr int64_t kMaxJsonCount = int64_t{1} << 40;

// A JSON integer in [lo, hi].
inline int64_t json_int(const nlohmann::ordered_json& v, const std::string& key, int64_t lo = -kMaxJsonCount,
                        int64_t hi = kMaxJsonCount) {
  const std::string rule = lo == -kMaxJsonCount && hi == kMaxJsonCount
                               ? std::string("an integer")
                               : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) bad_json_field(key, rule, v);
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) bad_json_field(key, rule, v);
  const auto i = v.get<int64_t>();
  if (i < lo || i > hi) bad_json_field(key, rule, v);
  return i;
}

// A JSON number that fits a float.
inline float json_float(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_number()) bad_json_field(key, "a number", v);
  const double d = v.get<double>();
  if (!(std::fabs(d) <= 3.4e38)) bad_json_field(key, "a finite number", v);
  return static_cast<float>(d);
}

inline bool json_bool(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_boolean()) bad_json_field(key, "true or false", v);
  return v.get<bool>();
}

inline std::string json_string(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_string()) bad_json_field(key, "a string", v);
  return v.get<std::string>();
}

// An array of token ids in [0, 2^31 - 1].
inline std::vector<int32_t> json_token_ids(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_array()) bad_json_field(key, "an array of token ids", v);
  std::vector<int32_t> out;
  out.reserve(v.size());
  for (const auto& id : v) out.push_back(static_cast<int32_t>(json_int(id, key, 0, INT32_MAX)));
  return out;
}

// A seed: an integer in [0, 2^64 - 1].
inline uint64_t json_seed(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    bad_json_field(key, "an integer in [0, 2^64 - 1]", v);
  return v.get<uint64_t>();
}

// A string or an array of strings.
inline std::vector<std::string> json_strings(const nlohmann::ordered_json& v, const std::string& key) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad_json_field(key, "a string or an array of strings", v);
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(json_string(s, key));
  return out;
}

}  // namespace ditto
