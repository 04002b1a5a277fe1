#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "architecture/config.h"
#include "checkpoint/safetensors_writer.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::error_message;
using testing::TempDir;

std::vector<uint8_t> bf16_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_bf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// A raw file: 8-byte length, header text as given, then `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s + header + std::string(data_bytes, '\0');
}

std::string invalid(const std::string& path) {
  return error_message([&] { SafetensorsFile f(path); }, ErrorCode::kInvalidArgument);
}

TEST(Safetensors, WriteThenReadRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, {{{"b", DType::kBF16, {2, 3}}, bf16_bytes({1, 2, 3, 4, 5, 6})},
                           {{"a", DType::kF32, {2}}, std::vector<uint8_t>(8, 0)},
                           {{"empty", DType::kF16, {0, 4}}, {}}});
  const SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorInfo* b = f.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->numel(), 6);
  EXPECT_EQ(b->nbytes, 12u);
  EXPECT_EQ(b->data, f.file().data() + b->file_offset);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(load_as_f32(b->data, DType::kBF16, i), i + 1.0f);
  EXPECT_EQ(f.find("missing"), nullptr);
  // The data section starts 8-aligned (header padded with spaces) and F32 comes first.
  const uint64_t header_len = f.file().size() - 8 - 8 - 12;
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(f.find("a")->file_offset, 8 + header_len);
}

TEST(Safetensors, HeaderIsDeterministicAndSorted) {
  const auto layout = safetensors_layout({{"z", DType::kBF16, {1}}, {"a", DType::kBF16, {2}}});
  EXPECT_EQ(layout[0].name, "a");
  const std::string header = safetensors_header(layout);
  EXPECT_EQ(header.size() % 8, 0u);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"data_offsets\":[0,4],\"dtype\":"
                         "\"BF16\",\"shape\":[2]},\"z\":{\"data_offsets\":[4,6],\"dtype\":\"BF16\","
                         "\"shape\":[1]}}",
                         0),
            0u);
}

TEST(Safetensors, TooShortFile) {
  TempDir dir;
  const std::string path = dir.write("x.safetensors", "abc");
  DITTO_EXPECT_MESSAGE_HAS(invalid(path), path, "8-byte");
}

TEST(Safetensors, HeaderLengthPastEndOrAbsurd) {
  TempDir dir;
  std::string s = raw_file("{}", 0);
  s[0] = 100;  // claims 100 header bytes, the file has 2
  const std::string path = dir.write("x.safetensors", s);
  DITTO_EXPECT_MESSAGE_HAS(invalid(path), path, "header length 100");
  s[0] = 0;
  s[4] = 1;  // 2^32 bytes
  const std::string path2 = dir.write("y.safetensors", s);
  DITTO_EXPECT_MESSAGE_HAS(invalid(path2), path2, "100 MB");
}

TEST(Safetensors, HeaderNotJsonOrNotObject) {
  TempDir dir;
  const std::string a = dir.write("a.safetensors", raw_file("{\"x\": [1,", 0));
  DITTO_EXPECT_MESSAGE_HAS(invalid(a), a, "invalid JSON");
  const std::string b = dir.write("b.safetensors", raw_file("[1, 2]", 0));
  DITTO_EXPECT_MESSAGE_HAS(invalid(b), b, "not a JSON object");
}

struct BadEntryCase {
  std::string entry;  // JSON of tensor "w"
  size_t data_bytes;
  std::string expected;
};

TEST(Safetensors, BadEntriesNameFileAndTensor) {
  const std::vector<BadEntryCase> cases = {
      {R"({"shape":[2],"data_offsets":[0,4]})", 4, "missing 'dtype'"},
      {R"({"dtype":"BF16","data_offsets":[0,4]})", 4, "missing 'shape'"},
      {R"({"dtype":"BF16","shape":[2]})", 4, "missing 'data_offsets'"},
      {R"({"dtype":"I8","shape":[4],"data_offsets":[0,4]})", 4, "unsupported dtype I8"},
      {R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})", 8, "unsupported dtype F64"},
      {R"({"dtype":"Q4","shape":[1],"data_offsets":[0,8]})", 8, "unknown dtype Q4"},
      {R"({"dtype":"BF16","shape":[-2],"data_offsets":[0,4]})", 4, "negative dimension"},
      {R"({"dtype":"BF16","shape":[2],"data_offsets":[0,4]})", 2, "past the data section"},
      {R"({"dtype":"BF16","shape":[2],"data_offsets":[4,0]})", 4, "begin after they end"},
      {R"({"dtype":"BF16","shape":[3],"data_offsets":[0,4]})", 4, "needs 6"},
      {R"({"dtype":"BF16","shape":[2],"data_offsets":[0,-4]})", 4, "data_offsets"},
      {R"({"dtype":"BF16","shape":"2","data_offsets":[0,4]})", 4, "'shape'"},
      {R"([1])", 4, "not an object"},
  };
  TempDir dir;
  int i = 0;
  for (const auto& c : cases) {
    const std::string path =
        dir.write("case" + std::to_string(i++) + ".safetensors", raw_file("{\"w\":" + c.entry + "}", c.data_bytes));
    DITTO_EXPECT_MESSAGE_HAS(invalid(path), path, "tensor 'w'", c.expected);
  }
}

TEST(Safetensors, OverlappingTensors) {
  TempDir dir;
  const std::string path =
      dir.write("x.safetensors", raw_file(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
                                          R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}})",
                                          6));
  DITTO_EXPECT_MESSAGE_HAS(invalid(path), path, "tensor 'b'", "overlaps tensor 'a'");
}

TEST(Safetensors, MissingFileIsNotFound) {
  TempDir dir;
  const std::string path = dir.file("none.safetensors");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { SafetensorsFile f(path); }, ErrorCode::kNotFound), path);
}

// A two-layer-free toy model directory: one tensor per shard.
void write_sharded(const TempDir& dir, const json& index) {
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), {{{"a", DType::kBF16, {2}}, bf16_bytes({1, 2})}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{{"b", DType::kBF16, {3}}, bf16_bytes({3, 4, 5})},
                                                                   {{"extra", DType::kBF16, {1}}, bf16_bytes({9})}});
  dir.write("model.safetensors.index.json", index.dump());
}

json good_index() {
  return {{"metadata", {{"total_size", 10}}},
          {"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}};
}

TEST(WeightStore, OpensShardedDirectory) {
  TempDir dir;
  write_sharded(dir, good_index());
  const WeightStore w = WeightStore::open(dir.path().string());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b"}));  // as listed in the index
  EXPECT_EQ(w.num_files(), 2u);
  EXPECT_EQ(w.total_bytes(), 10);
  EXPECT_TRUE(w.contains("b"));
  EXPECT_EQ(load_as_f32(w.get("b").data, DType::kBF16, 2), 5.0f);
  EXPECT_TRUE(testing::contains(w.get("b").file->path(), "model-00002-of-00002"));
  w.release(w.get("a"));  // pages dropped; data is still readable (re-faulted from the file)
  EXPECT_EQ(load_as_f32(w.get("a").data, DType::kBF16, 1), 2.0f);
  const std::string msg = error_message([&] { w.get("zzz"); }, ErrorCode::kNotFound);
  DITTO_EXPECT_MESSAGE_HAS(msg, "'zzz'", "model.safetensors.index.json");
}

TEST(WeightStore, OpensSingleFile) {
  TempDir dir;
  write_safetensors(dir.file("model.safetensors"), {{{"x", DType::kF16, {1}}, {0, 0x3c}}});
  const WeightStore w = WeightStore::open(dir.path().string());
  EXPECT_EQ(load_as_f32(w.get("x").data, DType::kF16, 0), 1.0f);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { w.get("y"); }, ErrorCode::kNotFound), "'y'",
                           dir.file("model.safetensors"));
}

TEST(WeightStore, NoWeights) {
  TempDir dir;
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { WeightStore::open(dir.path().string()); }, ErrorCode::kNotFound),
                           dir.path().string(), "model.safetensors");
}

TEST(WeightStore, MalformedIndex) {
  TempDir dir;
  write_sharded(dir, good_index());
  const std::string index = dir.write("model.safetensors.index.json", "{\"weight_map\": {");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { WeightStore::open(dir.path().string()); }, ErrorCode::kInvalidArgument),
                           index, "invalid JSON");
  dir.write("model.safetensors.index.json", "{\"metadata\": {}}");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { WeightStore::open(dir.path().string()); }, ErrorCode::kInvalidArgument),
                           index, "weight_map");
}

TEST(WeightStore, IndexNamesMissingShard) {
  TempDir dir;
  json index = good_index();
  index["weight_map"]["c"] = "model-00003-of-00002.safetensors";
  write_sharded(dir, index);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { WeightStore::open(dir.path().string()); }, ErrorCode::kNotFound),
                           "model.safetensors.index.json", "model-00003-of-00002.safetensors", "'c'");
}

TEST(WeightStore, IndexListsTensorMissingFromShard) {
  TempDir dir;
  json index = good_index();
  index["weight_map"]["c"] = "model-00001-of-00002.safetensors";
  write_sharded(dir, index);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { WeightStore::open(dir.path().string()); }, ErrorCode::kInvalidArgument),
                           "model.safetensors.index.json", "'c'", "model-00001-of-00002.safetensors");
}

ModelConfig tiny_config() {
  return parse_model_config({{"architectures", {"Qwen3ForCausalLM"}},
                             {"vocab_size", 8},
                             {"hidden_size", 4},
                             {"intermediate_size", 6},
                             {"num_hidden_layers", 1},
                             {"num_attention_heads", 2},
                             {"num_key_value_heads", 1},
                             {"head_dim", 2},
                             {"tie_word_embeddings", true}},
                            "tiny/config.json");
}

void write_tiny(const TempDir& dir, const ModelConfig& c, const std::string& wrong = "") {
  std::vector<std::pair<SafetensorsEntry, std::vector<uint8_t>>> tensors;
  for (auto spec : expected_tensors(c)) {
    if (spec.name == wrong) spec.shape.back() += 1;
    SafetensorsEntry e{spec.name, DType::kBF16, spec.shape};
    tensors.emplace_back(e, std::vector<uint8_t>(e.nbytes(), 0));
  }
  tensors.emplace_back(SafetensorsEntry{"model.rotary_emb.inv_freq", DType::kF32, {1}}, std::vector<uint8_t>(4, 0));
  write_safetensors(dir.file("model.safetensors"), tensors);
}

TEST(ValidateWeights, AcceptsCompleteCheckpointWithExtras) {
  TempDir dir;
  write_tiny(dir, tiny_config());
  validate_weights(tiny_config(), WeightStore::open(dir.path().string()));
}

TEST(ValidateWeights, WrongShapeNamesTensorFileAndShapes) {
  TempDir dir;
  write_tiny(dir, tiny_config(), "model.layers.0.mlp.up_proj.weight");
  const WeightStore w = WeightStore::open(dir.path().string());
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { validate_weights(tiny_config(), w); }, ErrorCode::kInvalidArgument),
                           dir.file("model.safetensors"), "'model.layers.0.mlp.up_proj.weight'", "[6, 5]", "[6, 4]");
}

TEST(ValidateWeights, MissingTensor) {
  TempDir dir;
  write_tiny(dir, tiny_config());
  json j = {{"architectures", {"Qwen3ForCausalLM"}},
            {"vocab_size", 8},
            {"hidden_size", 4},
            {"intermediate_size", 6},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 2},
            {"tie_word_embeddings", false}};
  const ModelConfig deeper = parse_model_config(j, "tiny/config.json");
  const WeightStore w = WeightStore::open(dir.path().string());
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { validate_weights(deeper, w); }, ErrorCode::kNotFound),
                           dir.file("model.safetensors"), "12 of 25 tensors", "model.layers.1.self_attn.q_proj.weight",
                           "[4, 4]");
}

}  // namespace
}  // namespace ditto
