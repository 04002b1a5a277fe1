// `ditto embed`: embeddings and relevance scores for a JSON-lines file, through LLM::encode and
// LLM::score (include/ditto/llm.h). Every line's result is the bits it gets alone.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "ditto/llm.h"
#include "model_options.h"

namespace ditto {
namespace {

using nlohmann::json;

struct EmbedCommandOptions {
  ModelOptions model;
  std::string input = "-";
  std::string output = "-";
};

// One line of the input file: an input to embed (or, on a reranker, to pool), or a pair to score.
struct EmbedLine {
  size_t number = 0;                 // 1-based line of the file
  std::optional<std::string> error;  // the line could not be read: reported on its output line
  std::string request_id;
  std::optional<PromptInput> input;  // "input": text or token ids
  PoolingParams params;
  std::string text_1, text_2;  // "text_1" / "text_2": a pair to score
};

EmbedLine parse_line(const std::string& text, size_t number) {
  const std::string where = "line " + std::to_string(number);
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw_invalid_argument(where + ": not a JSON object");
  EmbedLine line;
  line.number = number;
  line.request_id = std::to_string(number - 1);
  auto integer = [&](const std::string& key) {
    if (!j[key].is_number_integer()) throw_invalid_field(key, where + ": " + key + " must be an integer");
    return j[key].get<int64_t>();
  };
  auto boolean = [&](const std::string& key) {
    if (!j[key].is_boolean()) throw_invalid_field(key, where + ": " + key + " must be true or false");
    return j[key].get<bool>();
  };
  auto string = [&](const std::string& key) {
    if (!j[key].is_string()) throw_invalid_field(key, where + ": " + key + " must be a string");
    return j[key].get<std::string>();
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "input") {
      PromptInput p;
      if (value.is_string()) {
        p.text = value.get<std::string>();
      } else if (value.is_array() &&
                 std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number_integer(); })) {
        p.token_ids = value.get<std::vector<int32_t>>();
      } else {
        throw_invalid_field("input", where + ": input must be a string or a list of token ids");
      }
      line.input = std::move(p);
    } else if (key == "text_1") {
      line.text_1 = string(key);
    } else if (key == "text_2") {
      line.text_2 = string(key);
    } else if (key == "request_id") {
      line.request_id = string(key);
    } else if (key == "dimensions") {
      line.params.dimensions = integer(key);
    } else if (key == "normalize") {
      line.params.normalize = boolean(key);
    } else if (key == "use_activation") {
      line.params.use_activation = boolean(key);
    } else if (key == "truncate_prompt_tokens") {
      line.params.truncate_prompt_tokens = integer(key);
    } else {
      throw_invalid_field(key, where + ": unknown field '" + key +
                                   "' (input, text_1, text_2, request_id, dimensions, normalize, use_activation, "
                                   "truncate_prompt_tokens)");
    }
  }
  const bool pair = j.contains("text_1") || j.contains("text_2");
  if (pair == line.input.has_value() || (pair && (!j.contains("text_1") || !j.contains("text_2"))))
    throw_invalid_field("input", where + ": give either input, or text_1 and text_2");
  return line;
}

// Every non-blank line; one that cannot be read carries its error (the others still run).
std::vector<EmbedLine> read_lines(std::istream& in) {
  std::vector<EmbedLine> lines;
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      lines.push_back(parse_line(text, number));
    } catch (const Error& e) {
      EmbedLine& bad = lines.emplace_back();
      bad.number = number;
      bad.request_id = std::to_string(number - 1);
      bad.error = e.what();
    }
  }
  return lines;
}

// An engine error ("prompt 3: why", "pair 0: why") as its line's: "line 7: why".
std::string line_error(const EmbedLine& line, const std::string& error) {
  std::string why = error;
  for (const char* prefix : {"prompt ", "pair "})
    if (why.rfind(prefix, 0) == 0 && why.find(": ") != std::string::npos) why.erase(0, why.find(": ") + 2);
  return "line " + std::to_string(line.number) + ": " + why;
}

// Inputs go through LLM::encode together and pairs through LLM::score together (one batch each);
// a line's result is written in input order as
// {"request_id", "embedding" | "score", "prompt_tokens"} or {"request_id", "error"}.
void run_embed(const EmbedCommandOptions& o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;
  std::ifstream file;
  if (o.input != "-") {
    file.open(o.input);
    if (!file) throw_invalid_argument("--input: cannot open '" + o.input + "': " + std::strerror(errno));
  }
  const std::vector<EmbedLine> lines = read_lines(o.input == "-" ? std::cin : file);
  LLM llm(o.model.engine);
  if (o.model.report_memory) report_load(llm.model_info());
  std::vector<PromptInput> inputs;
  std::vector<PoolingParams> params;
  std::vector<std::string> text_1, text_2;
  for (const EmbedLine& l : lines) {
    if (l.error) continue;
    if (l.input) {
      inputs.push_back(*l.input);
      params.push_back(l.params);
    } else {
      text_1.push_back(l.text_1);
      text_2.push_back(l.text_2);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<PoolingResult> encoded =
      inputs.empty() ? std::vector<PoolingResult>{} : llm.encode(inputs, params, /*progress=*/true);
  const std::vector<PoolingResult> scored = text_2.empty() ? std::vector<PoolingResult>{} : llm.score(text_1, text_2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t tokens = 0;
  for (const std::vector<PoolingResult>* results : {&encoded, &scored})
    for (const PoolingResult& r : *results) tokens += static_cast<int64_t>(r.output.prompt_token_ids.size());
  std::fprintf(stderr, "pooled %zu lines, %lld prompt tokens in %.3f s: %.1f tokens/s (model loaded in %.2f s)\n",
               lines.size(), static_cast<long long>(tokens), seconds, seconds > 0 ? tokens / seconds : 0.0,
               llm.model_info().load_seconds);
  std::ofstream out_file;
  if (o.output != "-") {
    out_file.open(o.output);
    if (!out_file) throw_invalid_argument("--output: cannot open '" + o.output + "': " + std::strerror(errno));
  }
  std::ostream& out = o.output == "-" ? std::cout : out_file;
  const bool embeds = llm.model_info().pooling_task == "embed";
  size_t next_input = 0, next_pair = 0, failed = 0;
  for (const EmbedLine& l : lines) {
    json j = {{"request_id", l.request_id}};
    if (l.error) {
      j["error"] = *l.error;
      out << j.dump() << "\n";
      ++failed;
      continue;
    }
    const PoolingResult& r = l.input ? encoded[next_input++] : scored[next_pair++];
    if (r.error) {
      ++failed;
      j["error"] = line_error(l, *r.error);
    } else if (l.input && embeds) {
      j["embedding"] = r.output.data;
      j["prompt_tokens"] = r.output.prompt_token_ids.size();
    } else {
      j["score"] = r.output.data.at(0);
      j["prompt_tokens"] = r.output.prompt_token_ids.size();
    }
    out << j.dump() << "\n";
  }
  out.flush();
  if (!out) throw_invalid_argument("--output: cannot write '" + o.output + "': " + std::strerror(errno));
  if (failed > 0)
    throw_invalid_argument(std::to_string(failed) + " of " + std::to_string(lines.size()) +
                           " lines failed (their output lines say why)");
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto o = std::make_shared<EmbedCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "Embeddings and relevance scores for a JSON-lines file, one result line per input line, in order. A line is "
      "{\"input\": TEXT or [TOKEN IDS], optional \"dimensions\", \"normalize\", \"truncate_prompt_tokens\", "
      "\"request_id\"} (an embedding; on a reranker, its score), or {\"text_1\": QUERY, \"text_2\": DOCUMENT} (a "
      "pair's relevance: a reranker's yes/no score, or an embedding model's cosine). The model must pool: "
      "sentence-transformers files, --runner pooling, or --task embed|score. Each result is bit-identical to "
      "that line run alone. A line that fails gets {\"request_id\", \"error\"} and the others still run; the exit "
      "status is then 1.");
  add_model_options(cmd, o->model);
  add_engine_flags(
      cmd, o->model.engine,
      {"runner", "task", "hf_overrides", "pooler_config", "chat_template", "kv_cache_memory", "max_num_batched_tokens",
       "max_num_seqs", "long_prefill_token_threshold", "enable_prefix_caching", "max_model_len"});
  cmd->add_option("--input", o->input, "JSON-lines file to read ('-': standard input)")->capture_default_str();
  cmd->add_option("--output", o->output, "JSON-lines file to write ('-': standard output)")->capture_default_str();
  cmd->callback([o] { run_embed(*o); });
}

}  // namespace ditto
