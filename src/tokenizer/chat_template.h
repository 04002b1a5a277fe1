// Chat templates rendered exactly as Hugging Face transformers renders them
// (tokenizer.apply_chat_template(..., tokenize=False)): the model's Jinja template, run by ditto's
// jinja interpreter in transformers' environment -- ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True, the loopcontrols extension, the {% generation %} tag, a
// tojson filter that does not escape HTML (json.dumps(x, ensure_ascii=False, indent, separators,
// sort_keys=False)), and the raise_exception(msg) and strftime_now(fmt) globals
// (transformers/utils/chat_template_utils.py, _compile_jinja_template). The template sees
// `messages`, `tools`, `documents`, `add_generation_prompt`, the special-token strings of
// tokenizer_config.json (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
// mask_token, additional_special_tokens: transformers' special_tokens_map) and any extra kwargs,
// which override the special tokens ({**special_tokens_map, **kwargs}).
//
// JSON comes in as nlohmann::ordered_json: key order is part of the output (tojson prints a tool
// schema's keys in the order the caller wrote them, as Python's json.loads keeps them), and
// nlohmann::json would sort them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/template.h"

namespace ditto {

class ChatTemplate {
 public:
  // Reads the template from <model_dir>/chat_template.jinja if present (newer checkpoints; then
  // additional_chat_templates/<name>.jinja are named templates beside it as "default"), else
  // <model_dir>/chat_template.json ({"chat_template": ...}), else the "chat_template" field of
  // <model_dir>/tokenizer_config.json; the special tokens always come from tokenizer_config.json.
  // Throws Error(kNotFound) when there is no template, Error(kInvalidArgument) naming the file for
  // malformed JSON or a bad field, and jinja::TemplateError (kInvalidArgument) naming the file and
  // line for a template syntax error.
  static ChatTemplate load(const std::string& model_dir);

  // `tokenizer_config`: the parsed tokenizer_config.json; its chat_template is a string or a list
  // of {"name", "template"}. `source` names it in errors (e.g. its path).
  static ChatTemplate from_config(const nlohmann::ordered_json& tokenizer_config, const std::string& source);

  // The prompt text for `messages`. `tools`: null or an array of tool schemas (objects);
  // `extra`: an object of template kwargs (enable_thinking, date_string, documents, ...).
  //
  // With several named templates, "tool_use" is used when tools is not null and exists, else
  // "default" (transformers' get_chat_template); extra {"chat_template": "<name>"} picks one.
  //
  // Messages are validated first; each error names the message index and field:
  //   - each message is an object with a string "role";
  //   - "content" is a string, or a list of content parts (objects with a string "type", passed
  //     through unchanged as transformers does for multimodal templates); for "tool" / "ipython"
  //     messages it may also be an object (a JSON tool result, which e.g. Llama 3.1 serialises);
  //     it may be null or absent only in an assistant message with non-empty "tool_calls";
  //   - "tool_calls", if present, is an array of objects; "reasoning_content" a string or null.
  // Throws Error(kInvalidArgument) for bad input and jinja::TemplateError for a failing template
  // (kRaised carries the template's raise_exception message).
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // A template of its own (Jinja text, e.g. a request's `chat_template`) with this one's special
  // tokens (bos_token, eos_token, ...). `source` names it in errors. Throws jinja::TemplateError
  // (kInvalidArgument) naming `source` and the line for a syntax error.
  ChatTemplate with_template(const std::string& template_text, const std::string& source) const;

  // Names of the templates ("" for a single unnamed one).
  std::vector<std::string> template_names() const;

  // Whether a template loops over a message's content as a list of parts (`{% for p in
  // message.content %}` or `message['content']`): vLLM's "auto" content format then gives the
  // template parts rather than a string. A look at the source text, as vLLM's detection looks at
  // the template's loops.
  bool reads_content_parts() const { return reads_content_parts_; }

 private:
  ChatTemplate() = default;
  void add_template(const std::string& name, const std::string& source_text, const std::string& display_name);
  void set_special_tokens(const nlohmann::ordered_json& tokenizer_config, const std::string& source);

  std::vector<std::pair<std::string, jinja::Template>> templates_;
  std::vector<std::pair<std::string, nlohmann::ordered_json>> special_tokens_;
  bool reads_content_parts_ = false;
};

// transformers' chat-template environment (see the top of this file). Shared and immutable.
std::shared_ptr<const jinja::Environment> hf_chat_template_environment();

}  // namespace ditto
