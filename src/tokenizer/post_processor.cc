#include "tokenizer/post_processor.h"

#include "core/error.h"

namespace ditto {
namespace {

// A [token, id] pair of BertProcessing / RobertaProcessing ("cls", "sep").
int32_t token_pair_id(const nlohmann::json& j, const char* key, const std::string& where) {
  const std::string at = where + "." + key;
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][0].is_string() ||
      !j[key][1].is_number_integer()) {
    throw_invalid_argument(at + ": expected [\"token\", id]");
  }
  return j[key][1].get<int32_t>();
}

// TemplateProcessing "single": appends to prefix/suffix the ids before and after $A.
void parse_template(const nlohmann::json& j, const std::string& where, std::vector<int32_t>& prefix,
                    std::vector<int32_t>& suffix) {
  if (!j.contains("single") || !j["single"].is_array()) throw_invalid_argument(where + ".single: expected an array");
  const auto& special = j.contains("special_tokens") ? j["special_tokens"] : nlohmann::json::object();
  if (!special.is_object()) throw_invalid_argument(where + ".special_tokens: expected an object");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  const auto& single = j["single"];
  for (size_t i = 0; i < single.size(); ++i) {
    const auto& piece = single[i];
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    if (piece.is_object() && piece.contains("Sequence") && piece["Sequence"].is_object()) {
      const auto& seq = piece["Sequence"];
      if (!seq.contains("id") || seq["id"] != "A" || seen_sequence) {
        throw_invalid_argument(at + ": a single-sequence template holds exactly one {\"Sequence\": {\"id\": \"A\"}}");
      }
      seen_sequence = true;
    } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
               piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      if (!special.contains(name) || !special[name].is_object() || !special[name].contains("ids") ||
          !special[name]["ids"].is_array()) {
        throw_invalid_argument(at + ": special token " + nlohmann::json(name).dump() + " is not in " + where +
                               ".special_tokens (with an \"ids\" array)");
      }
      for (const auto& id : special[name]["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= INT32_MAX) {
          throw_invalid_argument(where + ".special_tokens[" + nlohmann::json(name).dump() + "].ids: expected ids");
        }
        (seen_sequence ? after : before).push_back(id.get<int32_t>());
      }
    } else {
      throw_invalid_argument(at + ": expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": {\"id\": \"A\"}}");
    }
  }
  if (!seen_sequence) throw_invalid_argument(where + ".single: the template has no {\"Sequence\": {\"id\": \"A\"}}");
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& j, const std::string& where) {
  PostProcessor p;
  p.parse_into(j, where);
  return p;
}

void PostProcessor::parse_into(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw_invalid_argument(where + ": expected an object with a string \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") {
    return;  // trims offsets only
  } else if (type == "TemplateProcessing") {
    parse_template(j, where, prefix_, suffix_);
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix_.insert(prefix_.begin(), token_pair_id(j, "cls", where));
    suffix_.push_back(token_pair_id(j, "sep", where));
  } else if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) {
      throw_invalid_argument(where + ": Sequence needs an array \"processors\"");
    }
    const auto& list = j["processors"];
    for (size_t i = 0; i < list.size(); ++i) parse_into(list[i], where + ".processors[" + std::to_string(i) + "]");
  } else {
    throw_invalid_argument(where + ".type '" + type +
                           "' is not supported (ditto supports TemplateProcessing, BertProcessing, "
                           "RobertaProcessing, ByteLevel, Sequence and null)");
  }
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace ditto
