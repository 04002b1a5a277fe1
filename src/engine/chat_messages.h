// OpenAI chat messages put in the shape chat templates expect — the one check of a conversation,
// for every front end (the server's body, generate --chat, the C++ and Python APIs).
#pragma once

#include <nlohmann/json.hpp>

namespace ditto {

// Chat messages checked and put in the shape chat templates expect: roles known, content a string
// (null → "", text parts joined with "\n"), tool_calls well formed with their arguments as objects.
// Idempotent. Throws Error(kInvalidArgument, param "messages") naming the message and field.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace ditto
