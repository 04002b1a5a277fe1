#include "core/json_fields.h"

#include <utility>

namespace ditto {

using nlohmann::json;

JsonFields::JsonFields(const json& object, std::string source, std::string prefix)
    : j_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

void JsonFields::fail(const std::string& key, const std::string& what) const {
  throw_invalid_argument(source_ + ": '" + prefix_ + key + "' " + what);
}

const json* JsonFields::find(const std::string& key) const {
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

int64_t JsonFields::get_int(const std::string& key, int64_t fallback) const {
  const json* v = find(key);
  return v == nullptr ? fallback : as_int(key, *v);
}

int64_t JsonFields::require_int(const std::string& key) const {
  const json* v = find(key);
  if (v == nullptr) fail(key, "is required");
  return as_int(key, *v);
}

double JsonFields::get_double(const std::string& key, double fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail(key, "must be a number, got " + v->dump());
  return v->get<double>();
}

double JsonFields::require_double(const std::string& key) const {
  if (!has(key)) fail(key, "is required");
  return get_double(key, 0);
}

bool JsonFields::get_bool(const std::string& key, bool fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, "must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string JsonFields::get_string(const std::string& key, const std::string& fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(key, "must be a string, got " + v->dump());
  return v->get<std::string>();
}

int64_t JsonFields::as_int(const std::string& key, const json& v) const {
  int64_t out = 0;
  switch (json_integer(v, /*allow_integral_float=*/true, &out)) {
    case JsonInteger::kOk: return out;
    case JsonInteger::kTooLarge: fail(key, "is too large: " + v.dump());
    case JsonInteger::kNotInteger: break;
  }
  fail(key, "must be an integer, got " + v.dump());
}

std::vector<int64_t> JsonFields::get_int_list(const std::string& key) const {
  std::vector<int64_t> out;
  const json* v = find(key);
  if (v == nullptr) return out;
  if (v->is_array()) {
    for (const auto& e : *v) out.push_back(as_int(key, e));
  } else {
    out.push_back(as_int(key, *v));  // eos_token_id may be a single int
  }
  return out;
}

}  // namespace ditto
