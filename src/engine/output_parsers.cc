#include "engine/output_parsers.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace ditto {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// Length of the longest suffix of `s` that is a proper prefix of `tag` (text that may still
// become the tag).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ChatOutputParser::ChatOutputParser(const ChatOutputParsers& parsers) : parsers_(parsers) {
  if (parsers_.tool_call_parser == ToolCallParser::kQwen3Coder) parameter_types_ = tool_parameter_types(parsers_.tools);
}

ChatMessageParts ChatOutputParser::feed(std::string_view text, bool finished) {
  ChatMessageParts out;
  pending_ += text;
  std::string_view rest = pending_;
  if (state_ == State::kStart) {
    if (!parsers_.reasoning || parsers_.thinking_disabled) {
      state_ = State::kBody;
    } else if (rest.starts_with(kThinkOpen)) {
      rest.remove_prefix(kThinkOpen.size());  // the model opened it itself
      state_ = State::kReasoning;
    } else if (!finished && kThinkOpen.starts_with(rest)) {
      return out;  // may still become "<think>"
    } else {
      state_ = State::kReasoning;  // opened by the prompt, or taken as open (vLLM's rule)
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
  size_t decided = rest.size();
  switch (parsers_.tool_call_parser) {
    case ToolCallParser::kNone: out.content = rest; break;
    case ToolCallParser::kHermes:
    case ToolCallParser::kQwen3Coder: decided = take_tagged_calls(rest, finished, out); break;
    case ToolCallParser::kLlama3Json: decided = take_llama3_json_calls(rest, finished, out); break;
  }
  pending_ = std::string(rest.substr(decided));  // a copy first: rest views pending_
  return out;
}

size_t ChatOutputParser::take_tagged_calls(std::string_view rest, bool finished, ChatMessageParts& out) {
  size_t at = 0;
  while (at < rest.size()) {
    const std::string_view left = rest.substr(at);
    const size_t open = left.find(kCallOpen);
    if (open == std::string_view::npos) {
      const size_t keep = finished ? left.size() : left.size() - partial_tag_suffix(left, kCallOpen);
      out.content += left.substr(0, keep);
      return at + keep;
    }
    out.content += left.substr(0, open);
    at += open;
    const std::string_view block = rest.substr(at + kCallOpen.size());
    const size_t close = block.find(kCallClose);
    if (close == std::string_view::npos) {  // an open block: undecided until it closes or the text ends
      if (!finished) return at;
      out.content += rest.substr(at);
      return rest.size();
    }
    const size_t block_size = kCallOpen.size() + close + kCallClose.size();
    const std::string_view body = block.substr(0, close);
    bool parsed = false;
    if (parsers_.tool_call_parser == ToolCallParser::kHermes) {
      if (std::optional<ToolCall> call = parse_hermes_call(body)) {
        out.tool_calls.push_back(std::move(*call));
        parsed = true;
      }
    } else if (std::optional<std::vector<ToolCall>> calls = parse_qwen3_coder_calls(body, parameter_types_)) {
      for (ToolCall& c : *calls) out.tool_calls.push_back(std::move(c));
      parsed = true;
    }
    if (!parsed) out.content += rest.substr(at, block_size);  // not a call after all: keep it as text
    at += block_size;
  }
  return at;
}

size_t ChatOutputParser::take_llama3_json_calls(std::string_view rest, bool finished, ChatMessageParts& out) {
  size_t at = 0;
  if (!in_call_region_ && !content_begun_) {
    // Leading whitespace waits for the first other byte: a '{' there opens a call region.
    const auto first =
        std::find_if(rest.begin(), rest.end(), [](char c) { return !std::isspace(static_cast<unsigned char>(c)); });
    if (first == rest.end()) {
      if (!finished) return 0;
      out.content += rest;
      return rest.size();
    }
    content_begun_ = true;
    in_call_region_ = *first == '{';
  }
  if (!in_call_region_) {
    const size_t tag = rest.find(kPythonTag);
    if (tag == std::string_view::npos) {
      const size_t keep = finished ? rest.size() : rest.size() - partial_tag_suffix(rest, kPythonTag);
      out.content += rest.substr(0, keep);
      return keep;
    }
    out.content += rest.substr(0, tag);
    at = tag;
    in_call_region_ = true;
  }
  if (!finished) return at;  // a call region is decided only when the output ends
  std::string_view region = rest.substr(at);
  std::string_view calls_text = region;
  const size_t text_start = calls_text.find_first_not_of(" \t\n\r");
  if (text_start != std::string_view::npos && calls_text.substr(text_start).starts_with(kPythonTag))
    calls_text.remove_prefix(text_start + kPythonTag.size());
  if (std::optional<std::vector<ToolCall>> calls = parse_llama3_json_calls(calls_text))
    for (ToolCall& c : *calls) out.tool_calls.push_back(std::move(c));
  else
    out.content += region;
  return rest.size();
}

ChatMessageParts parse_chat_output(std::string_view text, bool finished, const ChatOutputParsers& parsers) {
  return ChatOutputParser(parsers).feed(text, finished);
}

}  // namespace ditto
