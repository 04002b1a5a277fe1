// The pooling routes' bodies (each input kind, vLLM's field names, the field named in each error)
// and responses (OpenAI's and vLLM's shapes, base64 as the openai client decodes it, rerank order).
#include "server/pooling_api.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/openai_api.h"

namespace ditto {
namespace {

using Json = nlohmann::ordered_json;

PoolingApiRequest parse(PoolingEndpoint e, const std::string& body) {
  return parse_pooling_request(e, Json::parse(body));
}

// What `body` is refused with: an Error whose 400 names its field (a failure when it is accepted).
Error refusal(PoolingEndpoint e, const std::string& body) {
  try {
    parse(e, body);
    ADD_FAILURE() << "accepted: " << body;
    return Error(ErrorCode::kInternal, "accepted");
  } catch (const Error& err) {
    EXPECT_EQ(to_api_error(err).status(), 400) << body;
    return err;
  }
}

std::string param_of(PoolingEndpoint e, const std::string& body) { return refusal(e, body).param(); }

constexpr auto kEmbeddings = PoolingEndpoint::kEmbeddings;
constexpr auto kPooling = PoolingEndpoint::kPooling;
constexpr auto kScore = PoolingEndpoint::kScore;
constexpr auto kRerank = PoolingEndpoint::kRerank;

// OpenAI's input shapes are read_prompts' (a completion's prompt); what embeddings add is the task.
TEST(PoolingApiTest, EmbeddingInputs) {
  const PoolingApiRequest r = parse(kEmbeddings, R"({"input": [[1], [2, 3]], "add_special_tokens": false})");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(*r.inputs[1].token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_FALSE(r.inputs[1].add_special_tokens);
  EXPECT_EQ(r.params.task, "embed");
  EXPECT_FALSE(r.base64);
  EXPECT_FALSE(r.chat);
}

TEST(PoolingApiTest, EmbeddingFields) {
  const PoolingApiRequest r = parse(kEmbeddings, R"({"input": "x", "model": "m", "encoding_format": "base64",
      "dimensions": 64, "user": "u", "truncate_prompt_tokens": 10, "normalize": false, "use_activation": false,
      "request_id": "abc", "embed_dtype": "float32", "endianness": "little"})");
  EXPECT_EQ(*r.model, "m");
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(*r.params.dimensions, 64);
  EXPECT_EQ(*r.params.truncate_prompt_tokens, 10);
  EXPECT_FALSE(*r.params.normalize);
  EXPECT_FALSE(*r.params.use_activation);
  // A field the route does not take is refused by name: a misspelled "dimension" would otherwise
  // silently give a full-width embedding.
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "x", "dimension": 2})"), "dimension");
  EXPECT_EQ(parse(kPooling, R"({"input": "x", "task": "score"})").params.task, "score");
  EXPECT_EQ(parse(kPooling, R"({"input": "x"})").params.task, "");
}

TEST(PoolingApiTest, ChatInputs) {
  const PoolingApiRequest one = parse(kEmbeddings, R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_TRUE(one.chat);
  EXPECT_TRUE(one.inputs[0].messages.has_value());
  EXPECT_FALSE(one.inputs[0].add_generation_prompt);  // vLLM's pooling default
  const PoolingApiRequest in_input =
      parse(kEmbeddings, R"({"input": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})");
  EXPECT_EQ(in_input.inputs.size(), 1u);
  const PoolingApiRequest batch = parse(kEmbeddings, R"({"messages": [[{"role": "user", "content": "a"}],
      [{"role": "user", "content": "b"}]], "add_generation_prompt": true, "chat_template_kwargs": {"k": 1}})");
  ASSERT_EQ(batch.inputs.size(), 2u);
  EXPECT_TRUE(batch.inputs[1].add_generation_prompt);
  EXPECT_EQ(batch.inputs[1].chat_template_kwargs, R"({"k":1})");
}

TEST(PoolingApiTest, EmbeddingErrorsNameTheField) {
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": []})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": 5})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": ["a", 5]})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": [1, -2]})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "messages": [{"role": "user", "content": "b"}]})"), "input");
  EXPECT_EQ(param_of(kEmbeddings, R"({"messages": ["a"]})"), "messages");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "encoding_format": "binary"})"), "encoding_format");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "embed_dtype": "float16"})"), "embed_dtype");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "endianness": "big"})"), "endianness");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "dimensions": "8"})"), "dimensions");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "priority": 1})"), "priority");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "truncation_side": "right"})"), "truncation_side");
  EXPECT_EQ(param_of(kEmbeddings, R"({"input": "a", "user": 3})"), "user");
  Json many = {{"input", Json::array()}};
  for (size_t i = 0; i <= kMaxPoolingInputs; ++i) many["input"].push_back("x");
  const Error too_many = refusal(kEmbeddings, many.dump());
  EXPECT_EQ(too_many.param(), "input");
  EXPECT_NE(std::string(too_many.what()).find("2048"), std::string::npos) << too_many.what();
  many["input"].erase(0);
  EXPECT_EQ(parse(kEmbeddings, many.dump()).inputs.size(), kMaxPoolingInputs);
}

TEST(PoolingApiTest, ScoreNames) {
  const PoolingApiRequest r = parse(kScore, R"({"text_1": "q", "text_2": ["a", "b"], "use_activation": false})");
  EXPECT_EQ(r.text_1, std::vector<std::string>{"q"});
  EXPECT_EQ(r.text_2, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(*r.params.use_activation);
  const PoolingApiRequest qd = parse(kScore, R"({"queries": ["q1", "q2"], "documents": ["a", "b"]})");
  EXPECT_EQ(qd.text_1_field, "queries");
  EXPECT_EQ(qd.text_2_field, "documents");
  EXPECT_EQ(parse(kScore, R"({"queries": "q", "items": "a"})").text_2_field, "items");
  EXPECT_EQ(parse(kScore, R"({"data_1": "q", "data_2": ["a"]})").text_2, std::vector<std::string>{"a"});
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q"})"), "text_1");
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q", "text_2": []})"), "text_2");
  EXPECT_EQ(param_of(kScore, R"({"text_1": ["a", "b"], "text_2": ["a", "b", "c"]})"), "text_1");
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q", "text_2": [3]})"), "text_2");
  EXPECT_EQ(param_of(kScore, R"({"queries": [], "documents": ["a"]})"), "queries");
}

TEST(PoolingApiTest, RerankFields) {
  const PoolingApiRequest r = parse(kRerank, R"({"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1,
      "return_documents": false})");
  EXPECT_EQ(r.text_1, std::vector<std::string>{"q"});
  EXPECT_EQ(r.text_2, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.top_n, 1);
  EXPECT_FALSE(r.return_documents);
  EXPECT_EQ(parse(kRerank, R"({"query": {"text": "q"}, "documents": "a"})").text_2, std::vector<std::string>{"a"});
  EXPECT_EQ(param_of(kRerank, R"({"documents": ["a"]})"), "query");
  EXPECT_EQ(param_of(kRerank, R"({"query": "q"})"), "documents");
  EXPECT_EQ(param_of(kRerank, R"({"query": "q", "documents": []})"), "documents");
  EXPECT_EQ(param_of(kRerank, R"({"query": "q", "documents": [{"content": []}]})"), "documents");
  EXPECT_EQ(param_of(kRerank, R"({"query": "q", "documents": ["a"], "top_n": 1.5})"), "top_n");
  // The embedding routes' fields would change a score: refused by name, not ignored.
  EXPECT_EQ(param_of(kRerank, R"({"query": "q", "documents": ["a"], "dimensions": 8})"), "dimensions");
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q", "text_2": "a", "normalize": false})"), "normalize");
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q", "text_2": "a", "encoding_format": "base64"})"), "encoding_format");
  EXPECT_EQ(param_of(kRerank, R"({"query": "q", "documents": ["a"], "rank_fields": ["x"]})"), "rank_fields");
  EXPECT_EQ(param_of(kScore, R"({"text_1": "q", "text_2": "a", "queries": "z", "documents": ["b"]})"), "text_1");
  EXPECT_EQ(parse(kRerank, R"({"query": "q", "documents": ["a"], "chat_template_kwargs": {"instruction": "x"}})")
                .chat_template_kwargs,
            R"({"instruction":"x"})");
}

// RFC 4648's test vectors through the float path (bytes reinterpreted), and the padding.
TEST(PoolingApiTest, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_floats({}), "");
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f, 0.5f}), "AACAPwAAAMAAAAA/");
  const char bytes[] = "foobarXY";  // eight bytes: two floats
  std::vector<float> two(2);
  std::memcpy(two.data(), bytes, 8);
  EXPECT_EQ(base64_floats(two), "Zm9vYmFyWFk=");
}

TEST(PoolingApiTest, ResponseShapes) {
  const std::vector<std::vector<float>> data = {{0.25f, -1.5f}, {3.0f, 0.125f}};
  const Json e = pooling_response(parse(kEmbeddings, R"({"input": ["a", "b"]})"), "embd-1", 7, "m", data, 9);
  EXPECT_EQ(e["id"], "embd-1");
  EXPECT_EQ(e["object"], "list");
  EXPECT_EQ(e["created"], 7);
  EXPECT_EQ(e["model"], "m");
  EXPECT_EQ(e["data"][1]["object"], "embedding");
  EXPECT_EQ(e["data"][1]["index"], 1);
  EXPECT_EQ(e["data"][1]["embedding"][1].get<float>(), 0.125f);
  EXPECT_EQ(e["usage"], (Json{{"prompt_tokens", 9}, {"total_tokens", 9}}));
  const Json b64 =
      pooling_response(parse(kEmbeddings, R"({"input": "a", "encoding_format": "base64"})"), "i", 0, "m", {{1.0f}}, 1);
  EXPECT_EQ(b64["data"][0]["embedding"], "AACAPw==");
  const Json p = pooling_response(parse(kPooling, R"({"input": "a"})"), "pool-1", 0, "m", {{2.0f}}, 1);
  EXPECT_EQ(p["data"][0]["object"], "pooling");
  EXPECT_EQ(p["data"][0]["data"][0].get<float>(), 2.0f);
  const Json s = pooling_response(parse(kScore, R"({"text_1": "q", "text_2": ["a", "b"]})"), "score-1", 0, "m",
                                  {{0.5f}, {0.75f}}, 4);
  EXPECT_EQ(s["data"][1]["object"], "score");
  EXPECT_EQ(s["data"][1]["score"].get<float>(), 0.75f);
  EXPECT_EQ(s["usage"]["completion_tokens"], 0);
}

TEST(PoolingApiTest, RerankSortsBestFirstTiesByIndex) {
  const PoolingApiRequest r = parse(kRerank, R"({"query": "q", "documents": ["a", "b", "c", "d"]})");
  const std::vector<std::vector<float>> scores = {{0.5f}, {0.9f}, {0.5f}, {0.1f}};
  const Json all = pooling_response(r, "rerank-1", 0, "m", scores, 12);
  ASSERT_EQ(all["results"].size(), 4u);
  std::vector<size_t> order;
  for (const Json& x : all["results"]) order.push_back(x["index"].get<size_t>());
  EXPECT_EQ(order, (std::vector<size_t>{1, 0, 2, 3}));
  EXPECT_EQ(all["results"][0]["document"]["text"], "b");
  EXPECT_EQ(all["results"][0]["relevance_score"].get<float>(), 0.9f);
  EXPECT_EQ(all["usage"]["total_tokens"], 12);
  const Json top = pooling_response(parse(kRerank, R"({"query": "q", "documents": ["a", "b", "c", "d"], "top_n": 2,
      "return_documents": false})"),
                                    "rerank-2", 0, "m", scores, 12);
  ASSERT_EQ(top["results"].size(), 2u);
  EXPECT_FALSE(top["results"][1].contains("document"));
  EXPECT_EQ(top["results"][1]["index"], 0);
}

}  // namespace
}  // namespace ditto
