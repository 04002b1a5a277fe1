// Typed reading of JSON fields, with errors that name the field: the one place ditto turns a JSON
// value into an int, a number, a bool or a string.
//
// Two front ends share the checks: the strict readers (json_int, json_float, ...) for JSON from
// users (request bodies, JSON-lines input, flags), whose errors read "field 'KEY' must be RULE, got
// VALUE"; and JsonFields, typed access to the keys of one object read from a file (config.json),
// whose errors read "FILE: 'KEY' must be RULE, got VALUE" and which accepts what Hugging Face files
// hold (40960.0 as an integer, an int where a list of ints may stand).
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ditto {

// The check behind every integer field.
enum class JsonInteger { kOk, kNotInteger, kTooLarge };

// Reads an int64 from `v` into *out: JSON integers, and with `allow_integral_float` also floats
// without a fraction below 9e15 (40960.0 yes, 0.5 no). kTooLarge for an unsigned value above
// INT64_MAX; kNotInteger for anything else (booleans, strings, fractions, null).
template <typename Json>
JsonInteger json_integer(const Json& v, bool allow_integral_float, int64_t* out) {
  if (v.is_number_unsigned()) {
    const auto u = v.template get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return JsonInteger::kTooLarge;
    *out = static_cast<int64_t>(u);
    return JsonInteger::kOk;
  }
  if (v.is_number_integer()) {
    *out = v.template get<int64_t>();
    return JsonInteger::kOk;
  }
  if (allow_integral_float && v.is_number_float()) {
    const double d = v.template get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      *out = static_cast<int64_t>(d);
      return JsonInteger::kOk;
    }
  }
  return JsonInteger::kNotInteger;
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
  int64_t i = 0;
  if (json_integer(v, /*allow_integral_float=*/false, &i) != JsonInteger::kOk || i < lo || i > hi)
    bad_json_field(key, rule, v);
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
// vLLM's request seed: an int64 in [-2^63, 2^63 - 1]; -1 is "no seed" (nullopt, as vLLM's
// SamplingParams reads it), another negative s is the seed 2^64 + s (vLLM seeds torch's generator
// with it, which reads a negative int64 as its two's complement). Throws as bad_json_field for
// anything else (a value of 2^63 or more included, as vLLM's schema refuses it).
inline std::optional<uint64_t> json_seed(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
    bad_json_field(key, "an integer in [-2^63, 2^63 - 1] (less than or equal to 9223372036854775807; -1: none)", v);
  const int64_t s = v.get<int64_t>();
  if (s == -1) return std::nullopt;
  return static_cast<uint64_t>(s);  // two's complement: -5 is 2^64 - 5
}

// A string or an array of strings.
inline std::vector<std::string> json_strings(const nlohmann::ordered_json& v, const std::string& key) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad_json_field(key, "a string or an array of strings", v);
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(json_string(s, key));
  return out;
}

// Typed access to the keys of one JSON object read from `source` (a file path), for files such as
// config.json. A key that is absent or null takes the fallback. Every error is
// Error(kInvalidArgument) "SOURCE: 'PREFIXKEY' WHAT", so it names the file and the key; `prefix`
// names a nested object ("rope_scaling.").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "");

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // The value of `key`, or nullptr when absent or null.
  const nlohmann::json* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  int64_t get_int(const std::string& key, int64_t fallback) const;
  int64_t require_int(const std::string& key) const;
  double get_double(const std::string& key, double fallback) const;
  double require_double(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // An int or a list of ints (eos_token_id may be either); empty when absent.
  std::vector<int64_t> get_int_list(const std::string& key) const;
  // `v` (the value of `key`) as an integer.
  int64_t as_int(const std::string& key, const nlohmann::json& v) const;

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::string prefix_;
};

}  // namespace ditto
