// GgufWriter: files read back by an independent minimal GGUF parser written from the spec (ggml
// docs/gguf.md, checkpoint/gguf_test_reader.h), every field checked; bad input names the key or tensor
// at fault.
#include "checkpoint/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/gguf_reader.h"
#include "checkpoint/gguf_test_reader.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using testing::Array;
using testing::as_array;
using testing::as_int;
using testing::as_string;
using testing::as_uint;
using testing::parse_gguf;
using testing::ParsedGguf;
using testing::TempDir;

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 7 * i);
  return v;
}

// ---- tests -----------------------------------------------------------------------------------

TEST(GgufWriter, EveryFieldReadsBack) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  const std::vector<uint8_t> a = pattern(3 * 5 * 2, 1);      // [3, 5] bf16: 30 bytes
  const std::vector<uint8_t> b = pattern(7 * 4, 2);          // [7] f32: 28 bytes
  const std::vector<uint8_t> c = pattern(2 * 3 * 4 * 2, 3);  // [2, 3, 4] f16: 48 bytes
  {
    GgufWriter w(path);
    w.add_string("general.architecture", "qwen3");
    w.add_u32("qwen3.block_count", 28);
    w.add_i32("neg", -5);
    w.add_f32("qwen3.rope.freq_base", 1000000.0f);
    w.add_bool("yes", true);
    w.add_bool("no", false);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "", "Ġthe", std::string("\0x", 2)});
    w.add_i32_array("tokenizer.ggml.token_type", {1, 3, -1});
    w.add_f32_array("floats", {0.5f, -2.0f});
    w.add_tensor({"a.weight", GgmlType::kBF16, {3, 5}});
    w.add_tensor({"b.weight", GgmlType::kF32, {7}});
    w.add_tensor({"c.weight", GgmlType::kF16, {2, 3, 4}});
    // Arbitrary splits: part of a, the end of a with all of b, then c in two pieces.
    std::vector<uint8_t> ab(a.begin() + 11, a.end());
    ab.insert(ab.end(), b.begin(), b.end());
    w.write_tensor_data(a.data(), 11);
    w.write_tensor_data(ab.data(), ab.size());
    w.write_tensor_data(c.data(), 5);
    w.write_tensor_data(c.data() + 5, c.size() - 5);
    w.finish();
    EXPECT_EQ(w.bytes_written(), std::filesystem::file_size(path));
  }
  const ParsedGguf g = parse_gguf(path);
  EXPECT_EQ(g.version, 3u);
  ASSERT_EQ(g.kv.size(), 9u);
  const std::vector<std::pair<std::string, uint32_t>> keys = {{"general.architecture", 8},
                                                              {"qwen3.block_count", 4},
                                                              {"neg", 5},
                                                              {"qwen3.rope.freq_base", 6},
                                                              {"yes", 7},
                                                              {"no", 7},
                                                              {"tokenizer.ggml.tokens", 9},
                                                              {"tokenizer.ggml.token_type", 9},
                                                              {"floats", 9}};
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(g.kv[i].first, keys[i].first);
    EXPECT_EQ(g.kv[i].second.type, keys[i].second) << keys[i].first;
  }
  EXPECT_EQ(as_string(g.get("general.architecture")), "qwen3");
  EXPECT_EQ(as_uint(g.get("qwen3.block_count")), 28u);
  EXPECT_EQ(as_int(g.get("neg")), -5);
  EXPECT_EQ(std::get<float>(g.get("qwen3.rope.freq_base").v), 1000000.0f);
  EXPECT_TRUE(std::get<bool>(g.get("yes").v));
  EXPECT_FALSE(std::get<bool>(g.get("no").v));
  const Array& tokens = as_array(g.get("tokenizer.ggml.tokens"));
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[0].type, 8u);
  EXPECT_EQ(as_string(tokens[0]), "a");
  EXPECT_EQ(as_string(tokens[1]), "");
  EXPECT_EQ(as_string(tokens[2]), "Ġthe");
  EXPECT_EQ(as_string(tokens[3]), std::string("\0x", 2));
  const Array& types = as_array(g.get("tokenizer.ggml.token_type"));
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0].type, 5u);
  EXPECT_EQ(as_int(types[0]), 1);
  EXPECT_EQ(as_int(types[1]), 3);
  EXPECT_EQ(as_int(types[2]), -1);
  const Array& floats = as_array(g.get("floats"));
  ASSERT_EQ(floats.size(), 2u);
  EXPECT_EQ(floats[0].type, 6u);
  EXPECT_EQ(std::get<float>(floats[1].v), -2.0f);

  ASSERT_EQ(g.tensors.size(), 3u);
  EXPECT_EQ(g.tensors[0].name, "a.weight");
  EXPECT_EQ(g.tensors[0].dims, (std::vector<uint64_t>{5, 3}));  // reversed: innermost first
  EXPECT_EQ(g.tensors[0].type, 30u);
  EXPECT_EQ(g.tensors[0].offset, 0u);
  EXPECT_EQ(g.tensors[1].name, "b.weight");
  EXPECT_EQ(g.tensors[1].dims, (std::vector<uint64_t>{7}));
  EXPECT_EQ(g.tensors[1].type, 0u);
  EXPECT_EQ(g.tensors[1].offset, 32u);  // 30 bytes padded to 32
  EXPECT_EQ(g.tensors[2].name, "c.weight");
  EXPECT_EQ(g.tensors[2].dims, (std::vector<uint64_t>{4, 3, 2}));
  EXPECT_EQ(g.tensors[2].type, 1u);
  EXPECT_EQ(g.tensors[2].offset, 64u);  // 28 bytes padded to 32
  EXPECT_EQ(g.data_start % 32, 0u);

  const std::string& f = g.bytes;
  EXPECT_EQ(f.substr(g.data_start, a.size()), bytes_of(a));
  EXPECT_EQ(f.substr(g.data_start + 30, 2), std::string(2, '\0'));
  EXPECT_EQ(f.substr(g.data_start + 32, b.size()), bytes_of(b));
  EXPECT_EQ(f.substr(g.data_start + 60, 4), std::string(4, '\0'));
  EXPECT_EQ(f.substr(g.data_start + 64, c.size()), bytes_of(c));
  // The last tensor is padded too: 48 -> 64 bytes, and nothing follows.
  EXPECT_EQ(f.size(), g.data_start + 128);
  EXPECT_EQ(f.substr(g.data_start + 112), std::string(16, '\0'));
}

TEST(GgufWriter, HeaderBytesAreExact) {
  TempDir dir;
  const std::string path = dir.file("h.gguf");
  {
    GgufWriter w(path);
    w.add_u32("k", 0x01020304u);
    w.add_tensor({"t", GgmlType::kF32, {1}});
    const float one = 1.0f;
    w.write_tensor_data(&one, 4);
    w.finish();
  }
  std::ifstream in(path, std::ios::binary);
  const std::string f(std::istreambuf_iterator<char>(in), {});
  std::string want("GGUF\x03\0\0\0", 8);
  want += std::string("\x01\0\0\0\0\0\0\0", 8);                    // 1 tensor
  want += std::string("\x01\0\0\0\0\0\0\0", 8);                    // 1 kv
  want += std::string("\x01\0\0\0\0\0\0\0k", 9);                   // key "k"
  want += std::string("\x04\0\0\0\x04\x03\x02\x01", 8);            // u32 0x01020304
  want += std::string("\x01\0\0\0\0\0\0\0t", 9);                   // name "t"
  want += std::string("\x01\0\0\0\x01\0\0\0\0\0\0\0", 12);         // 1 dim: 1
  want += std::string("\0\0\0\0\0\0\0\0\0\0\0\0", 12);             // F32, offset 0
  want += std::string(96 - want.size(), '\0');                     // pad 74 -> 96
  want += std::string("\0\0\x80\x3f", 4) + std::string(28, '\0');  // 1.0f, padded
  EXPECT_EQ(f.size(), want.size());
  EXPECT_EQ(f, want);
}

TEST(GgufWriter, CustomAlignment) {
  TempDir dir;
  const std::string path = dir.file("a.gguf");
  const std::vector<uint8_t> x = pattern(6, 9), y = pattern(4, 10);
  {
    GgufWriter w(path);
    w.add_u32("general.alignment", 64);
    EXPECT_EQ(w.alignment(), 64u);
    w.add_tensor({"x", GgmlType::kBF16, {3}});
    w.add_tensor({"y", GgmlType::kF32, {1}});
    w.write_tensor_data(x.data(), x.size());
    w.write_tensor_data(y.data(), y.size());
    w.finish();
  }
  const ParsedGguf g = parse_gguf(path);
  EXPECT_EQ(as_uint(g.get("general.alignment")), 64u);
  EXPECT_EQ(g.data_start % 64, 0u);
  EXPECT_EQ(g.tensors[1].offset, 64u);
  EXPECT_EQ(g.bytes.substr(g.data_start + 64, 4), bytes_of(y));
  EXPECT_EQ(g.bytes.size(), g.data_start + 128);
}

TEST(GgufWriter, NoTensors) {
  TempDir dir;
  const std::string path = dir.file("v.gguf");
  {
    GgufWriter w(path);
    w.add_string("general.type", "vocab");
    w.finish();
  }
  const ParsedGguf g = parse_gguf(path);
  EXPECT_TRUE(g.tensors.empty());
  EXPECT_EQ(g.bytes.size(), g.data_start);
}

TEST(GgufWriter, DuplicateTensorNameNamesTheTensor) {
  TempDir dir;
  GgufWriter w(dir.file("d.gguf"));
  w.add_tensor({"blk.0.attn_q.weight", GgmlType::kBF16, {2, 2}});
  const std::string m = testing::error_message(
      [&] {
        w.add_tensor({"blk.0.attn_q.weight", GgmlType::kF32, {4}});
      },
      ErrorCode::kInvalidArgument);
  DITTO_EXPECT_MESSAGE_HAS(m, "blk.0.attn_q.weight", "duplicate");
}

TEST(GgufWriter, UnsupportedTypeNamesTheTensor) {
  TempDir dir;
  GgufWriter w(dir.file("u.gguf"));
  const std::string m = testing::error_message(
      [&] {
        w.add_tensor({"token_embd.weight", static_cast<GgmlType>(77), {4, 4}});
      },
      ErrorCode::kInvalidArgument);
  DITTO_EXPECT_MESSAGE_HAS(m, "token_embd.weight", "unsupported GGML type 77", "Q4_K");
  // A quantized type stores rows in blocks: the innermost dimension must be a multiple of one.
  const std::string b = testing::error_message(
      [&] {
        w.add_tensor({"blk.0.attn_q.weight", GgmlType::kQ4_0, {4, 48}});
      },
      ErrorCode::kInvalidArgument);
  DITTO_EXPECT_MESSAGE_HAS(b, "blk.0.attn_q.weight", "innermost dimension 48", "Q4_0", "multiple of 32");
  w.add_tensor({"blk.0.attn_k.weight", GgmlType::kQ4_K, {2, 512}});
  EXPECT_EQ(w.tensors().back().nbytes(), 2u * 2 * 144);
}

TEST(GgufWriter, BadShapesAndNamesNameTheTensor) {
  TempDir dir;
  GgufWriter w(dir.file("s.gguf"));
  DITTO_EXPECT_MESSAGE_HAS(testing::error_message(
                               [&] {
                                 w.add_tensor({"zero", GgmlType::kF32, {3, 0}});
                               },
                               ErrorCode::kInvalidArgument),
                           "'zero'", "dimension 0");
  DITTO_EXPECT_MESSAGE_HAS(testing::error_message(
                               [&] {
                                 w.add_tensor({"scalar", GgmlType::kF32, {}});
                               },
                               ErrorCode::kInvalidArgument),
                           "'scalar'", "1 to 4 dimensions");
  DITTO_EXPECT_MESSAGE_HAS(testing::error_message(
                               [&] {
                                 w.add_tensor({"five", GgmlType::kF32, {1, 1, 1, 1, 1}});
                               },
                               ErrorCode::kInvalidArgument),
                           "'five'", "1 to 4 dimensions");
  DITTO_EXPECT_MESSAGE_HAS(testing::error_message(
                               [&] {
                                 w.add_tensor({std::string(64, 'n'), GgmlType::kF32, {1}});
                               },
                               ErrorCode::kInvalidArgument),
                           "name must be 1 to 63 bytes");
  // A rejected tensor does not take its name.
  w.add_tensor({"zero", GgmlType::kF32, {3}});
}

TEST(GgufWriter, MetadataErrors) {
  TempDir dir;
  GgufWriter w(dir.file("k.gguf"));
  w.add_u32("qwen3.block_count", 2);
  DITTO_EXPECT_MESSAGE_HAS(
      testing::error_message([&] { w.add_i32("qwen3.block_count", 2); }, ErrorCode::kInvalidArgument),
      "duplicate metadata key 'qwen3.block_count'");
  DITTO_EXPECT_MESSAGE_HAS(
      testing::error_message([&] { w.add_string_array("tokenizer.ggml.merges", {}); }, ErrorCode::kInvalidArgument),
      "tokenizer.ggml.merges", "empty array");
  DITTO_EXPECT_MESSAGE_HAS(
      testing::error_message([&] { w.add_u32("general.alignment", 24); }, ErrorCode::kInvalidArgument),
      "general.alignment 24");
}

TEST(GgufWriter, DataErrors) {
  TempDir dir;
  const std::string path = dir.file("e.gguf");
  {
    GgufWriter w(path);
    w.add_tensor({"a", GgmlType::kF32, {2}});
    w.add_tensor({"b", GgmlType::kF32, {2}});
    const std::vector<uint8_t> eight(8, 1);
    w.write_tensor_data(eight.data(), 8);
    w.write_tensor_data(eight.data(), 4);
    // Short: 'b' got 4 of 8 bytes.
    DITTO_EXPECT_MESSAGE_HAS(testing::error_message([&] { w.finish(); }, ErrorCode::kInvalidArgument), "tensor 'b'",
                             "4 of 8 bytes");
    // Metadata after data is a bug in the caller.
    testing::error_message([&] { w.add_u32("late", 1); }, ErrorCode::kInternal);
    DITTO_EXPECT_MESSAGE_HAS(
        testing::error_message([&] { w.write_tensor_data(eight.data(), 8); }, ErrorCode::kInvalidArgument),
        "past the last tensor");
  }
  // The unfinished file was removed.
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, UncreatableFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.gguf");
  DITTO_EXPECT_MESSAGE_HAS(testing::error_message([&] { GgufWriter w(path); }, ErrorCode::kInvalidArgument), path,
                           "cannot create");
}

TEST(GgufWriter, TypeHelpers) {
  EXPECT_EQ(ggml_type_of(DType::kBF16), GgmlType::kBF16);
  EXPECT_EQ(ggml_type_of(DType::kF16), GgmlType::kF16);
  EXPECT_EQ(ggml_type_of(DType::kF32), GgmlType::kF32);
  EXPECT_EQ(ggml_type_size(GgmlType::kBF16), 2u);
  EXPECT_EQ(ggml_type_size(GgmlType::kF32), 4u);
  EXPECT_EQ(ggml_type_name(GgmlType::kF16), "F16");
  EXPECT_EQ((GgufTensorSpec{"t", GgmlType::kBF16, {3, 4}}.nbytes()), 24u);
}

// The quantized types: ggml.h's numbers and names, kernels/quant.h's block geometry, and a file
// holding one tensor of each written and parsed back by the reader.
TEST(GgufWriter, QuantizedTypesAreGgmlsNumbersWithTheBlockFormatsGeometry) {
  const std::vector<std::pair<uint32_t, std::string>> ids = {
      {2, "Q4_0"},  {3, "Q4_1"},  {6, "Q5_0"},  {7, "Q5_1"},  {8, "Q8_0"},    {10, "Q2_K"},
      {11, "Q3_K"}, {12, "Q4_K"}, {13, "Q5_K"}, {14, "Q6_K"}, {20, "IQ4_NL"}, {23, "IQ4_XS"}};
  TempDir dir;
  const std::string path = dir.file("q.gguf");
  {
    GgufWriter w(path);
    for (const auto& [id, name] : ids) {
      const GgmlTypeTraits* traits = ggml_type_traits(id);
      ASSERT_NE(traits, nullptr) << name;
      const auto type = static_cast<GgmlType>(id);
      const QuantType q = quant_type_of(type);
      EXPECT_EQ(traits->name, name);
      EXPECT_EQ(quant_format(q).name, name);
      EXPECT_EQ(traits->block_size, quant_format(q).block_size) << name;
      EXPECT_EQ(traits->block_bytes, quant_format(q).block_bytes) << name;
      EXPECT_EQ(ggml_type_of(q), type) << name;
      EXPECT_TRUE(ggml_type_is_quantized(type)) << name;
      EXPECT_NE(supported_ggml_types().find(name), std::string::npos) << name;
      w.add_tensor({name, type, {3, 2 * traits->block_size}});
    }
    for (const GgufTensorSpec& t : w.tensors()) {
      const std::vector<uint8_t> bytes = pattern(t.nbytes(), 1);
      w.write_tensor_data(bytes.data(), bytes.size());
    }
    w.finish();
  }
  for (uint32_t unknown : {4u, 5u, 9u, 15u, 16u, 21u, 22u, 24u, 39u})
    EXPECT_EQ(ggml_type_traits(unknown), nullptr) << unknown;
  const auto g = GgufFile::open(path);
  for (const auto& [id, name] : ids) {
    const GgufTensor* t = g->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(static_cast<uint32_t>(t->type), id);
    EXPECT_EQ(t->row_bytes(), static_cast<size_t>(2 * ggml_type_traits(id)->block_bytes)) << name;
    EXPECT_EQ(t->nbytes, 3 * t->row_bytes()) << name;
  }
}

}  // namespace
}  // namespace ditto
