#include "server/pooling_api.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <set>

#include "core/base64.h"
#include "core/error.h"
#include "core/json_input.h"
#include "engine/sampling_params_json.h"
#include "server/openai_api.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

bool read_bool(const Json& body, const char* key) {
  return read_field(key, [&] { return json_bool(body[key], key); });
}

std::string read_string(const Json& body, const char* key) {
  return read_field(key, [&] { return json_string(body[key], key); });
}

// A text of /score or /rerank: a string, or Jina's and Cohere's {"text": "..."}.
std::string score_text(const Json& v, const std::string& field, const std::string& name) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.size() == 1 && v.contains("text") && v["text"].is_string())
    return v["text"].get<std::string>();
  throw_bad_param(field, "field '" + name + "' must be a string or {\"text\": string}, got " + json_excerpt(v));
}

// A string or a non-empty list of texts (score_text), at most kMaxPoolingInputs.
std::vector<std::string> score_texts(const Json& body, const std::string& field) {
  const Json& v = body[field];
  if (!v.is_array()) return {score_text(v, field, field)};
  if (v.empty()) throw_bad_param(field, "field '" + field + "' must not be empty");
  if (v.size() > kMaxPoolingInputs)
    throw_bad_param(field, "at most " + std::to_string(kMaxPoolingInputs) + " texts per request in '" + field +
                               "', got " + std::to_string(v.size()));
  std::vector<std::string> texts;
  for (size_t i = 0; i < v.size(); ++i) texts.push_back(score_text(v[i], field, field + "[" + std::to_string(i) + "]"));
  return texts;
}

bool is_message(const Json& v) { return v.is_object() && v.contains("role") && v["role"].is_string(); }
bool is_chat(const Json& v) { return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), is_message); }

// `input` of /v1/embeddings and /pooling: OpenAI's (read_prompts), or vLLM's one chat's messages or
// list of chats.
void read_inputs(const Json& input, const std::string& field, PoolingApiRequest& r) {
  if (input.is_array() && input.size() > kMaxPoolingInputs)
    throw_bad_param(field, "at most " + std::to_string(kMaxPoolingInputs) +
                               " inputs per request (OpenAI's limit), got " + std::to_string(input.size()));
  if (is_chat(input)) {
    r.chat = true;
    r.inputs.push_back(PromptInput{.messages = input.dump()});
  } else if (input.is_array() && !input.empty() && std::all_of(input.begin(), input.end(), is_chat)) {
    r.chat = true;
    for (const Json& chat : input) r.inputs.push_back(PromptInput{.messages = chat.dump()});
  } else {
    r.inputs = read_prompts(input, field);
  }
}

// The fields of /v1/embeddings and /pooling beyond the input.
void read_encoding(const Json& body, PoolingApiRequest& r) {
  if (present(body, "encoding_format")) {
    const std::string f = read_string(body, "encoding_format");
    if (f != "float" && f != "base64")
      throw_bad_param("encoding_format", "encoding_format must be float or base64, got '" + f + "'");
    r.base64 = f == "base64";
  }
  // vLLM's base64 knobs, at the values the openai client decodes (float32, the machine's little-endian).
  if (present(body, "embed_dtype") && read_string(body, "embed_dtype") != "float32")
    throw_bad_param("embed_dtype", "embed_dtype must be float32 (the only one ditto encodes)");
  if (present(body, "endianness")) {
    const std::string e = read_string(body, "endianness");
    if (e != "native" && e != "little")
      throw_bad_param("endianness", "endianness must be native or little (ditto runs on little-endian machines)");
  }
  if (present(body, "dimensions"))
    r.params.dimensions = read_field("dimensions", [&] { return json_int(body["dimensions"], "dimensions"); });
  if (present(body, "normalize")) r.params.normalize = read_bool(body, "normalize");
}

// The chat options of a pooling request's messages (vLLM's ChatRequestOptionsMixin; no generation
// prompt by default).
void read_chat_options(const Json& body, PoolingApiRequest& r) {
  const bool continue_final = present(body, "continue_final_message") && read_bool(body, "continue_final_message");
  const bool generation_prompt = present(body, "add_generation_prompt") && read_bool(body, "add_generation_prompt");
  if (continue_final && generation_prompt)
    throw_bad_param("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
  for (PromptInput& p : r.inputs) {
    p.add_generation_prompt = generation_prompt;
    p.continue_final_message = continue_final;
    if (present(body, "add_special_tokens")) p.chat_add_special_tokens = read_bool(body, "add_special_tokens");
    if (present(body, "chat_template")) p.chat_template = read_string(body, "chat_template");
    if (present(body, "chat_template_kwargs")) {
      if (!body["chat_template_kwargs"].is_object())
        throw_bad_param("chat_template_kwargs", "field 'chat_template_kwargs' must be an object");
      p.chat_template_kwargs = body["chat_template_kwargs"].dump();
    }
  }
}

const std::set<std::string>& known_fields(PoolingEndpoint endpoint) {
  static const std::set<std::string> embeddings = {"model",
                                                   "user",
                                                   "truncate_prompt_tokens",
                                                   "truncation_side",
                                                   "request_id",
                                                   "priority",
                                                   "use_activation",
                                                   "input",
                                                   "messages",
                                                   "encoding_format",
                                                   "embed_dtype",
                                                   "endianness",
                                                   "dimensions",
                                                   "normalize",
                                                   "add_special_tokens",
                                                   "add_generation_prompt",
                                                   "continue_final_message",
                                                   "chat_template",
                                                   "chat_template_kwargs"};
  static const std::set<std::string> pooling = [] {
    std::set<std::string> s = embeddings;
    s.insert("task");
    return s;
  }();
  static const std::set<std::string> score = {"model",           "user",       "truncate_prompt_tokens",
                                              "truncation_side", "request_id", "priority",
                                              "use_activation",  "text_1",     "text_2",
                                              "queries",         "documents",  "items",
                                              "data_1",          "data_2",     "chat_template_kwargs"};
  static const std::set<std::string> rerank = {
      "model",     "user",  "truncate_prompt_tokens", "truncation_side",  "request_id",          "priority", "query",
      "documents", "top_n", "use_activation",         "return_documents", "chat_template_kwargs"};
  switch (endpoint) {
    case PoolingEndpoint::kEmbeddings: return embeddings;
    case PoolingEndpoint::kPooling: return pooling;
    case PoolingEndpoint::kScore: return score;
    case PoolingEndpoint::kRerank: break;
  }
  return rerank;
}

// /score's two sides under any of vLLM's names.
void read_score_pairs(const Json& body, PoolingApiRequest& r) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"text_1", "text_2"}, {"queries", "documents"}, {"queries", "items"}, {"data_1", "data_2"}};
  int given = 0;
  for (const auto& [first, second] : kNames) given += present(body, first) && present(body, second) ? 1 : 0;
  if (given > 1)
    throw_bad_param("text_1",
                    "give one pair of fields (text_1 and text_2, queries and documents, queries and "
                    "items, or data_1 and data_2), not several");
  for (const auto& [first, second] : kNames) {
    if (!present(body, first) || !present(body, second)) continue;
    r.text_1_field = first;
    r.text_2_field = second;
    r.text_1 = score_texts(body, first);
    r.text_2 = score_texts(body, second);
    if (r.text_1.size() != 1 && r.text_1.size() != r.text_2.size())
      throw_bad_param(first, "field '" + std::string(first) + "' must hold one text or one per " + second + " (" +
                                 std::to_string(r.text_2.size()) + "), got " + std::to_string(r.text_1.size()));
    return;
  }
  throw_bad_param("text_1", "give text_1 and text_2 (or queries and documents, queries and items, data_1 and data_2)");
}

Json usage(int64_t prompt_tokens, bool with_completion_tokens) {
  Json u = {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
  if (with_completion_tokens) u["completion_tokens"] = 0;  // vLLM's UsageInfo
  return u;
}

}  // namespace

PoolingApiRequest parse_pooling_request(PoolingEndpoint endpoint, const Json& body) {
  if (!body.is_object()) throw_invalid_argument("the request body must be a JSON object");
  PoolingApiRequest r;
  r.endpoint = endpoint;
  const std::set<std::string>& known = known_fields(endpoint);
  for (const auto& [key, value] : body.items()) {
    if (known.contains(key)) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw_bad_param(key, "unknown field '" + key + "' (this route takes " + list + ")");
  }
  // Fields of the embedding routes that would change a score are not in the score routes' lists.
  if ((endpoint == PoolingEndpoint::kScore || endpoint == PoolingEndpoint::kRerank) &&
      present(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object())
      throw_bad_param("chat_template_kwargs", "field 'chat_template_kwargs' must be an object");
    r.chat_template_kwargs = body["chat_template_kwargs"].dump();
  }
  if (present(body, "model")) r.model = read_string(body, "model");
  if (present(body, "user")) read_string(body, "user");  // accepted and ignored, as OpenAI's
  if (present(body, "request_id")) read_string(body, "request_id");
  check_priority(body);
  if (present(body, "truncate_prompt_tokens"))
    r.params.truncate_prompt_tokens = read_field(
        "truncate_prompt_tokens", [&] { return json_int(body["truncate_prompt_tokens"], "truncate_prompt_tokens"); });
  if (present(body, "truncation_side") && read_string(body, "truncation_side") != "left")
    throw_bad_param("truncation_side", "truncation_side must be left: a pooling prompt keeps its last tokens");
  if (present(body, "use_activation")) r.params.use_activation = read_bool(body, "use_activation");

  switch (endpoint) {
    case PoolingEndpoint::kEmbeddings:
    case PoolingEndpoint::kPooling: {
      if (present(body, "input") == present(body, "messages"))
        throw_bad_param("input",
                        present(body, "input") ? "give input or messages, not both" : "field 'input' is required");
      const bool messages = present(body, "messages");
      const Json& input = body[messages ? "messages" : "input"];
      read_inputs(input, messages ? "messages" : "input", r);
      if (messages && !r.chat)
        throw_bad_param("messages", "field 'messages' must be a chat (a list of messages) or a list of chats");
      if (r.chat) {
        read_chat_options(body, r);
      } else if (present(body, "add_special_tokens")) {
        const bool add = read_bool(body, "add_special_tokens");
        for (PromptInput& p : r.inputs) p.add_special_tokens = add;
      }
      read_encoding(body, r);
      if (endpoint == PoolingEndpoint::kPooling && present(body, "task")) r.params.task = read_string(body, "task");
      if (endpoint == PoolingEndpoint::kEmbeddings) r.params.task = "embed";
      break;
    }
    case PoolingEndpoint::kScore: read_score_pairs(body, r); break;
    case PoolingEndpoint::kRerank: {
      if (!present(body, "query")) throw_bad_param("query", "field 'query' is required");
      if (!present(body, "documents")) throw_bad_param("documents", "field 'documents' is required");
      r.text_1_field = "query";
      r.text_1 = {score_text(body["query"], "query", "query")};
      r.text_2_field = "documents";
      r.text_2 = score_texts(body, "documents");
      if (present(body, "top_n")) r.top_n = read_field("top_n", [&] { return json_int(body["top_n"], "top_n"); });
      if (present(body, "return_documents")) r.return_documents = read_bool(body, "return_documents");
      break;
    }
  }
  return r;
}

std::string base64_floats(std::span<const float> values) {
  static_assert(std::endian::native == std::endian::little, "the bytes are sent as this machine holds them");
  return base64_encode({reinterpret_cast<const unsigned char*>(values.data()), values.size() * sizeof(float)});
}

Json pooling_response(const PoolingApiRequest& r, const std::string& id, int64_t created, const std::string& model,
                      const std::vector<std::vector<float>>& data, int64_t prompt_tokens) {
  const auto vector_json = [&](const std::vector<float>& v) { return r.base64 ? Json(base64_floats(v)) : Json(v); };
  Json items = Json::array();
  switch (r.endpoint) {
    case PoolingEndpoint::kEmbeddings:
      for (size_t i = 0; i < data.size(); ++i)
        items.push_back({{"object", "embedding"}, {"embedding", vector_json(data[i])}, {"index", i}});
      return {{"id", id},       {"object", "list"}, {"created", created},
              {"model", model}, {"data", items},    {"usage", usage(prompt_tokens, false)}};
    case PoolingEndpoint::kPooling:
      for (size_t i = 0; i < data.size(); ++i)
        items.push_back({{"index", i}, {"object", "pooling"}, {"data", vector_json(data[i])}});
      return {{"id", id},       {"object", "list"}, {"created", created},
              {"model", model}, {"data", items},    {"usage", usage(prompt_tokens, true)}};
    case PoolingEndpoint::kScore:
      for (size_t i = 0; i < data.size(); ++i)
        items.push_back({{"index", i}, {"object", "score"}, {"score", data[i].at(0)}});
      return {{"id", id},       {"object", "list"}, {"created", created},
              {"model", model}, {"data", items},    {"usage", usage(prompt_tokens, true)}};
    case PoolingEndpoint::kRerank: break;
  }
  // Best first; a tie keeps the lower index first (a stable sort, as vLLM's).
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return data[a].at(0) > data[b].at(0); });
  if (r.top_n > 0 && static_cast<size_t>(r.top_n) < order.size()) order.resize(static_cast<size_t>(r.top_n));
  for (size_t i : order) {
    Json result = {{"index", i}};
    if (r.return_documents) result["document"] = {{"text", r.text_2.at(i)}};
    result["relevance_score"] = data[i].at(0);
    items.push_back(std::move(result));
  }
  return {{"id", id}, {"model", model}, {"usage", usage(prompt_tokens, false)}, {"results", items}};
}

}  // namespace ditto
