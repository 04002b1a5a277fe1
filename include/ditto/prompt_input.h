// A prompt as the offline API takes it: text, token ids, or chat messages.
// Part of ditto's public C++ API (needs nlohmann-json, for chat messages and tool schemas).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditto {

// One prompt: exactly one of text, token ids, or chat messages (rendered with the model's chat
// template and chat_template_kwargs such as enable_thinking).
struct PromptInput {
  std::optional<std::string> text = std::nullopt;
  std::optional<std::vector<int32_t>> token_ids = std::nullopt;
  std::optional<nlohmann::ordered_json> messages = std::nullopt;  // OpenAI chat messages
  nlohmann::ordered_json tools = nullptr;                         // chat: the tool schemas the template lists
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;    // chat: end with the assistant turn's opening
  bool continue_final_message = false;  // chat: continue the final (assistant) message instead
  bool add_special_tokens = true;       // text: the tokenizer's BOS etc. (a rendered chat has its own)
};

}  // namespace ditto
