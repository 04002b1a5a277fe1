#include "server/output_parsers.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ditto {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

// Length of the longest suffix of `s` that is a proper prefix of `tag` (text that may still
// become the tag).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// {"name": "...", "arguments": {...} or "..."} → a call; anything else → nullopt.
std::optional<ParsedToolCall> parse_call(std::string_view body) {
  const auto j = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ParsedToolCall call;
  call.name = j["name"].get<std::string>();
  const auto args = j.contains("arguments") ? j["arguments"] : nlohmann::ordered_json::object();
  if (args.is_string())
    call.arguments = args.get<std::string>();
  else if (args.is_object())
    call.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  else
    return std::nullopt;
  return call;
}

}  // namespace

ChatOutputView parse_chat_output(const std::string& text, bool finished, const ChatOutputParsers& parsers) {
  ChatOutputView v;
  std::string_view rest = text;
  if (parsers.reasoning) {
    if (rest.starts_with(kThinkOpen)) {
      rest.remove_prefix(kThinkOpen.size());
      const size_t close = rest.find(kThinkClose);
      if (close == std::string_view::npos) {
        const size_t keep = finished ? rest.size() : rest.size() - partial_tag_suffix(rest, kThinkClose);
        v.reasoning = rest.substr(0, keep);
        return v;
      }
      v.reasoning = rest.substr(0, close);
      rest.remove_prefix(close + kThinkClose.size());
    } else if (!finished && kThinkOpen.starts_with(rest)) {
      return v;  // may still become "<think>"
    }
  }
  if (!parsers.tool_calls) {
    v.content = rest;
    return v;
  }
  while (!rest.empty()) {
    const size_t open = rest.find(kCallOpen);
    if (open == std::string_view::npos) {
      const size_t keep = finished ? rest.size() : rest.size() - partial_tag_suffix(rest, kCallOpen);
      v.content += rest.substr(0, keep);
      return v;
    }
    v.content += rest.substr(0, open);
    const std::string_view block = rest.substr(open + kCallOpen.size());
    const size_t close = block.find(kCallClose);
    if (close == std::string_view::npos) {  // an open block: undecided until it closes or the text ends
      if (finished) v.content += rest.substr(open);
      return v;
    }
    const size_t block_end = open + kCallOpen.size() + close + kCallClose.size();
    if (std::optional<ParsedToolCall> call = parse_call(block.substr(0, close)))
      v.tool_calls.push_back(std::move(*call));
    else
      v.content += rest.substr(open, block_end - open);  // not a call after all: keep it as text
    rest.remove_prefix(block_end);
  }
  return v;
}

}  // namespace ditto
