// The pooling routes' bodies — OpenAI's /v1/embeddings and vLLM's /pooling, /score and /rerank
// (vllm/entrypoints/pooling/{embed,pooling,score}/protocol.py; /rerank in Jina's and Cohere's shape)
// — read into what the front door takes (PromptInput, PoolingParams), and their responses written
// from the pooled results. No I/O: http_server.cc runs the requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ditto/pooling.h"
#include "ditto/prompt_input.h"

namespace ditto {

enum class PoolingEndpoint { kEmbeddings, kPooling, kScore, kRerank };

// OpenAI's limit of inputs per embeddings request, kept by every pooling route (inputs, or pairs):
// each is an engine request of its own.
inline constexpr size_t kMaxPoolingInputs = 2048;

struct PoolingApiRequest {
  PoolingEndpoint endpoint = PoolingEndpoint::kEmbeddings;
  std::optional<std::string> model;
  // embeddings, pooling: one prompt per input (a text, token ids, or a chat's messages).
  std::vector<PromptInput> inputs;
  bool chat = false;  // the inputs are chats (`messages`, or messages in `input`)
  // score: text_1 (one text, or one per text_2) against each text_2; rerank: the query (one) against
  // each document. `text_1_field` / `text_2_field` are the names the body gave them (text_1 / text_2,
  // queries / documents, queries / items, data_1 / data_2; rerank: query / documents), for errors.
  std::vector<std::string> text_1, text_2;
  std::string text_1_field = "text_1", text_2_field = "text_2";
  PoolingParams params;
  bool base64 = false;                      // encoding_format "base64": each vector as little-endian float32 bytes
  int64_t top_n = 0;                        // rerank: the best top_n results (0 or less: all)
  bool return_documents = true;             // rerank: each result carries its document's text
  std::vector<std::string> ignored_fields;  // unknown fields: always empty (they are refused, below)
  // score, rerank on a reranker: the score template's chat_template_kwargs (JSON object text, "":
  // none), e.g. {"instruction": "..."} for Qwen3-Reranker's prompt.
  std::string chat_template_kwargs;
};

// Reads a body (already JSON). Throws Error(kInvalidArgument) whose param() is the field at fault:
// a missing or mistyped input, an empty list ("input", "text_2", "documents", ...), more than
// kMaxPoolingInputs inputs or pairs, text_1 neither one text nor one per text_2, an encoding_format
// other than float or base64, embed_dtype other than float32, endianness other than native or
// little, truncation_side other than left, a priority other than 0, a field the route does not take
// (named: never ignored, as a misspelled `dimensions` would silently change the result), two of
// /score's name pairs at once. A top_n of 0 or less is all (vLLM's). The model's own checks (dimensions, lengths, task)
// come at the front door (InputProcessor::process_pooling).
PoolingApiRequest parse_pooling_request(PoolingEndpoint endpoint, const nlohmann::ordered_json& body);

// The response body from the results in request order: `data` holds one pooled vector per input
// (embeddings, pooling) or one [score] per pair (score, rerank), `prompt_tokens` the tokens run.
// `id` is the response's ("embd-…", "pool-…", "score-…", "rerank-…"), `created` Unix seconds.
nlohmann::ordered_json pooling_response(const PoolingApiRequest& request, const std::string& id, int64_t created,
                                        const std::string& model, const std::vector<std::vector<float>>& data,
                                        int64_t prompt_tokens);

// `values` as base64 text of their little-endian float32 bytes (RFC 4648, with padding): what the
// openai client's embeddings.create decodes (numpy.frombuffer(..., "<f4")).
std::string base64_floats(std::span<const float> values);

}  // namespace ditto
