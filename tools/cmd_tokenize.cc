// `ditto tokenize` and `ditto detokenize`: the model's tokenizer.json on JSON lines.
//   tokenize:   {"text": "..."}  -> {"ids": [...]}   (Hugging Face's tokenizer(text).input_ids)
//   detokenize: {"ids": [...]}   -> {"text": "..."}  (transformers' tokenizer.decode(ids)), with
//               --stream also "pieces": the IncrementalDetokenizer's output per token + finish.
// One output line per input line, in order, written only once every line succeeded; blank lines
// are skipped. Only tokenizer.json and tokenizer_config.json are read (no weights needed).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/hub.h"
#include "commands.h"
#include "core/error.h"
#include "core/json_input.h"
#include "engine/model_files.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string input;
  std::optional<std::string> text;
  bool add_special_tokens = true;
};

struct DetokenizeOptions {
  std::string model;
  std::string input;
  std::optional<std::string> ids;
  bool skip_special_tokens = false;
  std::optional<bool> clean_up_tokenization_spaces;
  bool stream = false;
};

std::string dump_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Calls on_line(line, "<name> line N") for each non-blank line of `input` ("-": stdin).
template <typename F>
void for_each_line(const std::string& input, F&& on_line) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (input != "-") {
    if (std::filesystem::is_directory(input)) throw_invalid_argument("--input: '" + input + "' is a directory");
    file.open(input, std::ios::binary);
    if (!file) throw_not_found("--input: cannot open '" + input + "'");
    in = &file;
  }
  const std::string name = input == "-" ? "<stdin>" : input;
  std::string line;
  for (int64_t number = 1; std::getline(*in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    on_line(line, name + " line " + std::to_string(number));
  }
}

nlohmann::json parse_object(const std::string& line, const std::string& where, const char* shape) {
  const auto j = parse_json_input<nlohmann::json>(line, where);
  if (!j.is_object()) throw_invalid_argument(where + ": expected a JSON object " + shape);
  return j;
}

std::vector<int32_t> parse_ids(const nlohmann::json& ids, const Tokenizer& tokenizer, const std::string& where) {
  if (!ids.is_array()) throw_invalid_argument(where + ": field 'ids': expected an array of token ids");
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto& v = ids[i];
    if (!v.is_number_integer()) {
      throw_invalid_argument(where + ": field 'ids[" + std::to_string(i) + "]': expected an integer, got " +
                             json_excerpt(v));
    }
    const bool is_unsigned = v.is_number_unsigned();
    const int64_t id =
        is_unsigned ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX)) : v.get<int64_t>();
    if (id < 0 || id >= tokenizer.vocab_size()) {
      throw_invalid_argument(where + ": field 'ids[" + std::to_string(i) + "]': token id " + json_excerpt(v) +
                             " is out of range [0, " + std::to_string(tokenizer.vocab_size()) + ")");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

void run_tokenize(const TokenizeOptions& o) {
  if (o.text.has_value() == !o.input.empty())
    throw_invalid_argument("tokenize: give exactly one of --input and --text");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(resolve_model_path(o.model));
  std::string out;
  auto encode = [&](const std::string& text, const std::string& where) {
    std::vector<int32_t> ids;
    try {
      ids = tokenizer->encode(text, o.add_special_tokens);
    } catch (const Error& e) {
      throw Error(e.code(), where + ": " + e.what());
    }
    out += dump_line(nlohmann::json{{"ids", ids}});
  };
  if (o.text) {
    encode(*o.text, "--text");
  } else {
    for_each_line(o.input, [&](const std::string& line, const std::string& where) {
      const nlohmann::json j = parse_object(line, where, "{\"text\": \"...\"}");
      if (!j.contains("text")) throw_invalid_argument(where + ": missing field 'text'");
      if (!j["text"].is_string())
        throw_invalid_argument(where + ": field 'text': expected a string, got " + json_excerpt(j["text"]));
      encode(j["text"].get<std::string>(), where);
    });
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run_detokenize(const DetokenizeOptions& o) {
  if (o.ids.has_value() == !o.input.empty())
    throw_invalid_argument("detokenize: give exactly one of --input and --ids");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(resolve_model_path(o.model));
  std::string out;
  auto decode = [&](const std::vector<int32_t>& ids) {
    nlohmann::json j{{"text", tokenizer->decode(ids, o.skip_special_tokens, o.clean_up_tokenization_spaces)}};
    if (o.stream) {
      IncrementalDetokenizer stream(*tokenizer, o.skip_special_tokens, o.clean_up_tokenization_spaces);
      nlohmann::json pieces = nlohmann::json::array();
      for (const int32_t id : ids) pieces.push_back(stream.add(id));
      pieces.push_back(stream.finish());
      j["pieces"] = std::move(pieces);
    }
    out += dump_line(j);
  };
  if (o.ids) {
    const auto ids = parse_json_input<nlohmann::json>(*o.ids, "--ids");
    decode(parse_ids(ids, *tokenizer, "--ids"));
  } else {
    for_each_line(o.input, [&](const std::string& line, const std::string& where) {
      const nlohmann::json j = parse_object(line, where, "{\"ids\": [...]}");
      if (!j.contains("ids")) throw_invalid_argument(where + ": missing field 'ids'");
      decode(parse_ids(j["ids"], *tokenizer, where));
    });
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto t = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Text to token ids with the model's tokenizer.json");
  tokenize
      ->add_option("--model", t->model,
                   "Model directory or hub id (only tokenizer.json / tokenizer_config.json are read)")
      ->required();
  tokenize->add_option("--input", t->input, "JSON lines {\"text\": \"...\"}; '-' for stdin");
  tokenize->add_option("--text", t->text, "One text to tokenize instead of --input");
  tokenize->add_flag("--add-special-tokens,!--no-add-special-tokens", t->add_special_tokens,
                     "Apply the post-processor's special tokens, e.g. Llama-3's <|begin_of_text|> (default: true)");
  tokenize->callback([t] { run_tokenize(*t); });

  auto d = std::make_shared<DetokenizeOptions>();
  CLI::App* detokenize = app.add_subcommand("detokenize", "Token ids to text with the model's tokenizer.json");
  detokenize
      ->add_option("--model", d->model,
                   "Model directory or hub id (only tokenizer.json / tokenizer_config.json are read)")
      ->required();
  detokenize->add_option("--input", d->input, "JSON lines {\"ids\": [...]}; '-' for stdin");
  detokenize->add_option("--ids", d->ids, "One JSON list of ids to decode instead of --input");
  detokenize->add_flag("--skip-special-tokens", d->skip_special_tokens, "Drop special tokens from the text");
  detokenize->add_flag_function(
      "--clean-up-tokenization-spaces,!--no-clean-up-tokenization-spaces",
      [d](int64_t n) { d->clean_up_tokenization_spaces = n > 0; },
      "transformers' clean_up_tokenization (default: tokenizer_config.json's clean_up_tokenization_spaces)");
  detokenize->add_flag("--stream", d->stream,
                       "Also print \"pieces\": the streaming detokenizer's output per token, then its final flush");
  detokenize->callback([d] { run_detokenize(*d); });
}

}  // namespace ditto
