// OpenAI chat messages put in the shape chat templates expect — the one check of a conversation,
// for every front end (the server's body, generate --chat, the C++ and Python APIs).
#pragma once

#include <nlohmann/json.hpp>

namespace ditto {

// How a message's content reaches the chat template (vLLM's --chat-template-content-format):
// kString joins text parts into one string; kOpenAi gives every content as a list of parts (a
// string becomes [{"type": "text", "text": ...}]; text parts are kept as sent, extra fields too).
enum class ChatContentFormat { kString, kOpenAi };

// Chat messages checked and put in the shape chat templates expect: roles non-empty strings,
// content a string (null → "", text-like parts joined with "\n") or, with kOpenAi, a list of text
// parts; tool_calls well formed with their arguments as objects. Idempotent. Throws
// Error(kInvalidArgument, param "messages") naming the message and field.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages,
                                               ChatContentFormat format = ChatContentFormat::kString);

}  // namespace ditto
