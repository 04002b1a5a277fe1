// `ditto render-chat`: the prompt text a model's chat template makes of each conversation, as
// transformers' apply_chat_template(..., tokenize=False) would. Input: JSON lines
//   {"messages": [...], "tools": [...], "add_generation_prompt": true, ...template kwargs}
// Output: one line {"prompt": "..."} per input line, written only once every line rendered.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/hub.h"
#include "commands.h"
#include "core/error.h"
#include "core/json_input.h"
#include "engine/model_files.h"
#include "tokenizer/chat_template.h"

namespace ditto {
namespace {

struct RenderChatOptions {
  std::string model;
  std::string input;
};

// One input line -> prompt. Errors name the input and line (and the message/field, from render).
std::string render_line(const ChatTemplate& tmpl, const std::string& line, const std::string& where) {
  const auto request = parse_json_input<nlohmann::ordered_json>(line, where);
  if (!request.is_object()) throw_invalid_argument(where + ": expected a JSON object {\"messages\": [...], ...}");
  if (!request.contains("messages")) throw_invalid_argument(where + ": missing field 'messages'");
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = false;  // transformers' default
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (const auto& [key, value] : request.items()) {
    if (key == "messages") continue;
    if (key == "tools") {
      tools = value;
    } else if (key == "add_generation_prompt") {
      if (!value.is_boolean()) throw_invalid_argument(where + ": add_generation_prompt: expected true or false");
      add_generation_prompt = value.get<bool>();
    } else {
      extra[key] = value;
    }
  }
  try {
    return tmpl.render(request["messages"], tools, add_generation_prompt, extra);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
}

void run_render_chat(const RenderChatOptions& o) {
  const ChatTemplate tmpl = load_chat_template(resolve_model_path(o.model));
  std::ifstream file;
  std::istream* in = &std::cin;
  if (o.input != "-") {
    if (std::filesystem::is_directory(o.input)) throw_invalid_argument("--input: '" + o.input + "' is a directory");
    file.open(o.input, std::ios::binary);
    if (!file) throw_not_found("--input: cannot open '" + o.input + "'");
    in = &file;
  }
  const std::string name = o.input == "-" ? "<stdin>" : o.input;
  std::string out, line;
  for (int64_t number = 1; std::getline(*in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string prompt = render_line(tmpl, line, name + " line " + std::to_string(number));
    out += nlohmann::ordered_json{{"prompt", prompt}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_render_chat_command(CLI::App& app) {
  auto o = std::make_shared<RenderChatOptions>();
  CLI::App* cmd = app.add_subcommand(
      "render-chat", "Render conversations with the model's chat template (transformers' apply_chat_template)");
  cmd->add_option("--model", o->model,
                  "Model directory or hub id (only tokenizer_config.json / chat_template.* are read)")
      ->required();
  cmd->add_option("--input", o->input,
                  "JSON lines {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...kwargs}; "
                  "'-' for stdin")
      ->required();
  cmd->callback([o] { run_render_chat(*o); });
}

}  // namespace ditto
