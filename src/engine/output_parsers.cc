#include "engine/output_parsers.h"

#include <algorithm>
#include <optional>

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
std::optional<ToolCall> parse_call(std::string_view body) {
  const auto j = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call;
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

ChatMessageParts ChatOutputParser::feed(std::string_view text, bool finished) {
  ChatMessageParts out;
  pending_ += text;
  std::string_view rest = pending_;
  if (state_ == State::kStart) {
    if (!parsers_.reasoning) {
      state_ = State::kBody;
    } else if (rest.starts_with(kThinkOpen)) {
      rest.remove_prefix(kThinkOpen.size());
      state_ = State::kReasoning;
    } else if (!finished && kThinkOpen.starts_with(rest)) {
      return out;  // may still become "<think>"
    } else {
      state_ = parsers_.reasoning_started ? State::kReasoning : State::kBody;
    }
  }
  if (state_ == State::kReasoning) {
    const size_t close = rest.find(kThinkClose);
    if (close == std::string_view::npos) {
      const size_t keep = finished ? rest.size() : rest.size() - partial_tag_suffix(rest, kThinkClose);
      out.reasoning = rest.substr(0, keep);
      pending_ = std::string(rest.substr(keep));  // a copy first: rest views pending_
      return out;
    }
    out.reasoning = rest.substr(0, close);
    rest.remove_prefix(close + kThinkClose.size());
    state_ = State::kBody;
  }
  if (!parsers_.tool_calls) {
    out.content = rest;
    pending_.clear();
    return out;
  }
  while (!rest.empty()) {
    const size_t open = rest.find(kCallOpen);
    if (open == std::string_view::npos) {
      const size_t keep = finished ? rest.size() : rest.size() - partial_tag_suffix(rest, kCallOpen);
      out.content += rest.substr(0, keep);
      rest.remove_prefix(keep);
      break;
    }
    out.content += rest.substr(0, open);
    rest.remove_prefix(open);
    const std::string_view block = rest.substr(kCallOpen.size());
    const size_t close = block.find(kCallClose);
    if (close == std::string_view::npos) {  // an open block: undecided until it closes or the text ends
      if (finished) {
        out.content += rest;
        rest = {};
      }
      break;
    }
    const size_t block_end = kCallOpen.size() + close + kCallClose.size();
    if (std::optional<ToolCall> call = parse_call(block.substr(0, close)))
      out.tool_calls.push_back(std::move(*call));
    else
      out.content += rest.substr(0, block_end);  // not a call after all: keep it as text
    rest.remove_prefix(block_end);
  }
  pending_ = std::string(rest);  // a copy first: rest views pending_
  return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ChatMessageParts parse_chat_output(std::string_view text, bool finished, const ChatOutputParsers& parsers) {
  return ChatOutputParser(parsers).feed(text, finished);
}

}  // namespace ditto
