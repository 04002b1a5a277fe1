// Loading llama.cpp GGUF files (checkpoint/gguf_reader.h, checkpoint/gguf_model.h, CausalLM::load): a tiny
// generated model of each architecture (qwen3, llama with its regrouped q/k rows, qwen3moe with
// stacked experts, gemma3 with its norms stored as 1 + w and sliding layers) written by `ditto
// export-gguf` loads from the GGUF file with the same config and
// gives the same logits, bit for bit, as from its Hugging Face directory; and every kind of broken
// file is one clear error naming the key or tensor, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "architecture/rope_frequencies.h"
#include "checkpoint/gguf_export.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/gguf_writer.h"
#include "checkpoint/test_model_generator.h"
#include "core/test_support.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"
#include "model/weight_update.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_message;
using testing::TempDir;

// A preset shrunk to unit-test size (real vocabulary and tokenizer, 2 layers, hidden 32).
json tiny_config(const std::string& preset) {
  json c = preset_config(preset);
  c.update({{"hidden_size", 32},
            {"intermediate_size", 48},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 8},
            {"num_hidden_layers", 2},
            {"max_position_embeddings", 512}});
  if (c.contains("max_window_layers")) c["max_window_layers"] = 2;
  if (c.contains("num_experts"))
    c.update({{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 16}});
  // Gemma 3: six layers (the sixth full), a window of 4, the attention scale llama.cpp uses.
  if (c["model_type"] == "gemma3_text") {
    c["num_hidden_layers"] = 6;
    c["layer_types"].erase(c["layer_types"].begin() + 6, c["layer_types"].end());
    c.update({{"sliding_window", 4}, {"query_pre_attn_scalar", 8}});
  }
  c["rope_scaling"] = nullptr;  // llama3 scaling through GGUF is not bit-exact: Llama3RopeScalingFromRopeFreqs
  c["tie_word_embeddings"] = preset != "qwen3-30b-a3b";
  return c;
}

std::string write_model(const TempDir& dir, const std::string& preset, const json& overrides = json::object()) {
  const fs::path out = dir.path() / preset;
  fs::create_directories(out);
  json config = tiny_config(preset);
  config.update(overrides);
  std::ofstream(out / "config.json") << config.dump(2);
  const fs::path tokenizer =
      fs::path(DITTO_SOURCE_DIR) / "third_party/npm/node_modules" / preset_tokenizer_package(preset) / "models";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tokenizer / file, out / file, fs::copy_options::overwrite_existing);
  TestModelOptions options;
  options.out_dir = out.string();
  options.seed = 5;
  write_test_model_weights(parse_model_config(config, "config.json"), options);
  return out.string();
}

// Logits [7, vocab_size] f32 of a 7-token prompt.
std::vector<float> prompt_logits(const CausalLM& model) {
  KvCache cache(model.config(), /*num_blocks=*/1, /*block_size=*/16);
  const std::vector<int32_t> tokens = {3, 1410, 59, 26, 2990, 7, 100}, positions = {0, 1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> slots = {0, 1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> token_seq(7, 0), block_tables = {0}, logits_indices = {0, 1, 2, 3, 4, 5, 6};
  ForwardBatch batch{tokens, positions, slots, token_seq, block_tables, 1, logits_indices};
  std::vector<float> logits(7 * static_cast<size_t>(model.config().vocab_size));
  model.forward(batch, cache, logits.data());
  return logits;
}

// Weights packed from GGUF's types cannot take a Hugging Face update in place: refused by name.
TEST(GgufWeightUpdateTest, IsRefusedNamingGguf) {
  TempDir dir;
  const std::string model_dir = write_model(dir, "qwen3-0.6b");
  const std::string gguf = dir.file("model.gguf");
  export_gguf(model_dir, gguf, "tiny");
  ThreadPool pool(1);
  const auto model = CausalLM::load(gguf, &pool);
  const std::string message = error_message([&] { WeightUpdate update(*model); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("GGUF"), std::string::npos) << message;
  EXPECT_NE(message.find("bf16/f16/f32 Hugging Face checkpoint"), std::string::npos) << message;
}

class GgufModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufModelTest, LoadsWithTheDirectorysConfigAndLogitsBitForBit) {
  TempDir dir;
  const std::string model_dir = write_model(dir, GetParam());
  const std::string gguf = dir.file("model.gguf");
  export_gguf(model_dir, gguf, "tiny");
  ThreadPool pool(2);
  const auto from_dir = CausalLM::load(model_dir, &pool);
  const auto from_gguf = CausalLM::load(gguf, &pool);
  const ModelConfig& a = from_dir->config();
  const ModelConfig& b = from_gguf->config();
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(static_cast<float>(a.rms_norm_eps), static_cast<float>(b.rms_norm_eps));
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.sliding_layers, b.sliding_layers);
  EXPECT_EQ(a.rope_local_base_freq, b.rope_local_base_freq);
  EXPECT_EQ(a.attention_scale(), b.attention_scale());
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  // The converter stores routers as F32 (they were bf16): the same values, twice the bytes.
  if (!a.is_moe()) {
    EXPECT_EQ(from_dir->decode_weight_bytes(), from_gguf->decode_weight_bytes());
  }
  const std::vector<float> x = prompt_logits(*from_dir);
  const std::vector<float> y = prompt_logits(*from_gguf);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufModelTest,
                         ::testing::Values("qwen3-0.6b", "llama-3.2-1b", "qwen3-30b-a3b", "qwen2.5-0.5b",
                                           "gemma-3-270m"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// export-gguf --outtype: every weight matrix in the requested type (a K-quant falling back to Q8_0
// where 256 does not divide the row), norm weights F32, general.file_type llama.cpp's ftype; the
// file loads and runs. (Its logits against the float64 reference: tests/reference.)
TEST(GgufExport, QuantizedOuttypes) {
  TempDir dir;
  const std::string model_dir = write_model(dir, "qwen3-0.6b");
  // Rows of 32: every 256-value type falls back as llama.cpp's tensor_type_fallback does.
  const std::vector<std::pair<QuantType, std::pair<GgmlType, int64_t>>> cases = {
      {QuantType::kQ8_0, {GgmlType::kQ8_0, 7}},  {QuantType::kQ4_0, {GgmlType::kQ4_0, 2}},
      {QuantType::kQ4_1, {GgmlType::kQ4_1, 3}},  {QuantType::kQ5_0, {GgmlType::kQ5_0, 8}},
      {QuantType::kQ5_1, {GgmlType::kQ5_1, 9}},  {QuantType::kIQ4_NL, {GgmlType::kIQ4_NL, 25}},
      {QuantType::kQ4_K, {GgmlType::kQ5_0, 14}}, {QuantType::kQ5_K, {GgmlType::kQ5_1, 16}},
      {QuantType::kQ6_K, {GgmlType::kQ8_0, 18}}, {QuantType::kQ3_K, {GgmlType::kQ4_0, 11}},
      {QuantType::kQ2_K, {GgmlType::kQ4_0, 10}}, {QuantType::kIQ4_XS, {GgmlType::kIQ4_NL, 30}}};
  for (const auto& [outtype, want] : cases) {
    const std::string gguf = dir.file(std::string(quant_format(outtype).name) + ".gguf");
    export_gguf(model_dir, gguf, "tiny", outtype);
    const auto g = GgufFile::open(gguf);
    EXPECT_EQ(g->get_int("general.file_type"), want.second);
    for (const GgufTensor& t : g->tensors()) {
      if (t.ne.size() == 1) {
        EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
      } else if (t.ne[0] % 32 != 0) {  // ffn_down's rows of 48: no block divides them, kept as stored
        EXPECT_EQ(t.type, GgmlType::kBF16) << t.name << " " << quant_format(outtype).name;
      } else {
        EXPECT_EQ(t.type, want.first) << t.name << " " << quant_format(outtype).name;
      }
    }
    ThreadPool pool(2);
    const auto model = CausalLM::load(gguf, &pool);
    for (float v : prompt_logits(*model)) ASSERT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(parse_gguf_outtype("q4_k").type, QuantType::kQ4_K);
  EXPECT_EQ(parse_gguf_outtype("q4_k").mix, GgufMix::kNone);
  EXPECT_EQ(parse_gguf_outtype("q4_k_m").type, QuantType::kQ4_K);
  EXPECT_EQ(parse_gguf_outtype("q4_k_m").mix, GgufMix::kQ4_K_M);
  EXPECT_EQ(parse_gguf_outtype("iq4_xs").mix, GgufMix::kIQ4_XS);
  EXPECT_EQ(parse_gguf_outtype("auto").type, QuantType::kNone);
  DITTO_EXPECT_MESSAGE_HAS(error_message([] { parse_gguf_outtype("q8_k"); }, ErrorCode::kInvalidArgument), "--outtype",
                           "q8_k", "q4_k_m", "iq4_xs");
}

// llama-quantize's mixes on a model whose rows 256 divides (16 layers, GQA 4, tied embedding): each
// matrix takes the type llama.cpp's llama_tensor_get_type gives it (use_more_bits(i, 16): layers 0,
// 1, 4, 7, 10, 13, 14, 15), and the file loads and runs.
TEST(GgufExport, MixesChooseLlamaQuantizesTypePerTensor) {
  TempDir dir;
  const std::string model_dir = write_model(dir, "qwen3-0.6b",
                                            {{"hidden_size", 256},
                                             {"intermediate_size", 256},
                                             {"num_attention_heads", 4},
                                             {"num_key_value_heads", 1},
                                             {"head_dim", 64},
                                             {"num_hidden_layers", 16}});
  const auto more_bits = [](int64_t i) { return i < 2 || i >= 14 || (i - 2) % 3 == 2; };
  using Q = QuantType;
  struct Case {
    const char* outtype;
    int64_t file_type;
    std::function<Q(const std::string& role, int64_t layer)> want;
  };
  const Case cases[] = {{"q4_k_m", 15,
                         [&](const std::string& role, int64_t i) {
                           if (role == "token_embd") return Q::kQ6_K;
                           if (role == "attn_v" || role == "ffn_down") return more_bits(i) ? Q::kQ6_K : Q::kQ4_K;
                           return Q::kQ4_K;
                         }},
                        {"q5_k_m", 17,
                         [&](const std::string& role, int64_t i) {
                           if (role == "token_embd") return Q::kQ6_K;
                           if (role == "attn_v" || role == "ffn_down") return more_bits(i) ? Q::kQ6_K : Q::kQ5_K;
                           return Q::kQ5_K;
                         }},
                        {"q3_k_m", 12,
                         [&](const std::string& role, int64_t i) {
                           if (role == "token_embd") return Q::kQ6_K;
                           if (role == "attn_v") return i < 2 ? Q::kQ5_K : Q::kQ4_K;
                           if (role == "ffn_down") return i < 1 ? Q::kQ5_K : Q::kQ4_K;
                           if (role == "attn_output") return Q::kQ4_K;
                           return Q::kQ3_K;
                         }},
                        {"q2_k", 10,
                         [&](const std::string& role, int64_t) {
                           if (role == "token_embd") return Q::kQ6_K;
                           if (role == "attn_v") return Q::kQ4_K;  // GQA 4
                           if (role == "ffn_down" || role == "attn_output") return Q::kQ3_K;
                           return Q::kQ2_K;
                         }},
                        {"iq4_xs", 30, [&](const std::string& role, int64_t i) {
                           if (role == "token_embd") return Q::kQ6_K;
                           if (role == "attn_v") return Q::kQ5_K;  // GQA 4
                           if (role == "ffn_down" && i < 2) return Q::kQ5_K;
                           return Q::kIQ4_XS;
                         }}};
  for (const Case& c : cases) {
    const std::string gguf = dir.file(std::string(c.outtype) + ".gguf");
    export_gguf(model_dir, gguf, "mix", parse_gguf_outtype(c.outtype));
    const auto g = GgufFile::open(gguf);
    EXPECT_EQ(g->get_int("general.file_type"), c.file_type) << c.outtype;
    for (const GgufTensor& t : g->tensors()) {
      if (t.ne.size() == 1) continue;
      // "blk.N.attn_v.weight" -> ("attn_v", N); "token_embd.weight" -> ("token_embd", -1)
      int64_t layer = -1;
      std::string role = t.name.substr(0, t.name.rfind('.'));
      if (role.rfind("blk.", 0) == 0) {
        const size_t dot = role.find('.', 4);
        layer = std::stoll(role.substr(4, dot - 4));
        role = role.substr(dot + 1);
      }
      EXPECT_EQ(t.type, ggml_type_of(c.want(role, layer))) << c.outtype << " " << t.name;
    }
    ThreadPool pool(2);
    const auto model = CausalLM::load(gguf, &pool);
    for (float v : prompt_logits(*model)) ASSERT_TRUE(std::isfinite(v)) << c.outtype;
  }
}

// The 32-value types added after the first five (kernels/quant_gemm.h multiplies them in a wider
// layout): a file of each loads, and the prompt's logits are finite and the same bits with one
// thread or two. (Their GEMM against the canonical formulas: quant_gemm_test; the model against
// the float64 reference: tests/reference.)
TEST(GgufModel, FilesOfTheNewer32ValueTypesLoadAndRun) {
  TempDir dir;
  const std::string model_dir = write_model(dir, "qwen3-0.6b");
  for (QuantType q : {QuantType::kQ5_0, QuantType::kQ5_1, QuantType::kIQ4_NL}) {
    const std::string name(quant_format(q).name);
    const std::string gguf = dir.file(name + ".gguf");
    export_gguf(model_dir, gguf, "tiny", q);
    const auto g = GgufFile::open(gguf);
    const GgufTensor* embd = g->find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->type, ggml_type_of(q));
    ThreadPool one(1), two(2);
    const auto a = CausalLM::load(gguf, &one);
    const auto b = CausalLM::load(gguf, &two);
    const std::vector<float> x = prompt_logits(*a), y = prompt_logits(*b);
    for (float v : x) ASSERT_TRUE(std::isfinite(v)) << name;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << name;
  }
}

// llama3 RoPE scaling travels as rope_freqs.weight: the same frequencies up to the divisors'
// float32 rounding, so logits agree to float32 rounding, not bit for bit.
TEST(GgufModel, Llama3RopeScalingFromRopeFreqs) {
  TempDir dir;
  json config = tiny_config("llama-3.2-1b");
  config["rope_scaling"] = preset_config("llama-3.2-1b")["rope_scaling"];
  config["rope_scaling"]["original_max_position_embeddings"] = 64;  // every band within head_dim 8
  const fs::path out = dir.path() / "llama";
  fs::create_directories(out);
  std::ofstream(out / "config.json") << config.dump(2);
  const fs::path tokenizer =
      fs::path(DITTO_SOURCE_DIR) / "third_party/npm/node_modules" / preset_tokenizer_package("llama-3.2-1b") / "models";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tokenizer / file, out / file, fs::copy_options::overwrite_existing);
  TestModelOptions options;
  options.out_dir = out.string();
  options.seed = 5;
  write_test_model_weights(parse_model_config(config, "config.json"), options);
  export_gguf(out.string(), dir.file("llama.gguf"), "tiny");
  ThreadPool pool(2);
  const auto from_dir = CausalLM::load(out.string(), &pool);
  const auto from_gguf = CausalLM::load(dir.file("llama.gguf"), &pool);
  ASSERT_EQ(from_gguf->config().rope_freq_divisors.size(), 4u);
  const std::vector<double> a = rope_inv_freq(from_dir->config()), b = rope_inv_freq(from_gguf->config());
  bool scaled = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 1e-7 * a[i]) << i;
    scaled |= from_gguf->config().rope_freq_divisors[i] != 1.0;
  }
  EXPECT_TRUE(scaled);
  const std::vector<float> x = prompt_logits(*from_dir), y = prompt_logits(*from_gguf);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4) << i;
}

// ---- Broken files ------------------------------------------------------------------------------

// Copies GGUF `src` to `dst` through GgufWriter, letting `edit_kv` change or drop (return false)
// metadata and `edit_tensor` change a tensor's spec and bytes.
using KvEdit = std::function<bool(const std::string& key, GgufValue& v)>;
using TensorEdit = std::function<void(GgufTensorSpec& spec, std::string& bytes)>;

void rewrite(const std::string& src, const std::string& dst, const KvEdit& edit_kv,
             const TensorEdit& edit_tensor = nullptr) {
  const auto g = GgufFile::open(src);
  GgufWriter w(dst);
  for (const auto& [key, value] : g->metadata()) {
    GgufValue v = value;
    if (edit_kv && !edit_kv(key, v)) continue;
    switch (v.type) {
      case GgufValueType::kUint32: w.add_u32(key, static_cast<uint32_t>(v.u)); break;
      case GgufValueType::kInt32: w.add_i32(key, static_cast<int32_t>(v.i)); break;
      case GgufValueType::kFloat32: w.add_f32(key, static_cast<float>(v.f)); break;
      case GgufValueType::kBool: w.add_bool(key, v.b); break;
      case GgufValueType::kString: w.add_string(key, v.s); break;
      case GgufValueType::kArray: {
        if (v.element_type == GgufValueType::kString) {
          std::vector<std::string> s;
          for (const GgufValue& e : v.array) s.push_back(e.s);
          w.add_string_array(key, s);
        } else if (v.element_type == GgufValueType::kInt32) {
          std::vector<int32_t> s;
          for (const GgufValue& e : v.array) s.push_back(static_cast<int32_t>(e.i));
          w.add_i32_array(key, s);
        } else {
          ADD_FAILURE() << "rewrite: array type of " << key;
        }
        break;
      }
      default: ADD_FAILURE() << "rewrite: type of " << key;
    }
  }
  std::vector<std::string> data;
  for (const GgufTensor& t : g->tensors()) {
    GgufTensorSpec spec{t.name, t.type, t.shape()};
    std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (edit_tensor) edit_tensor(spec, bytes);
    w.add_tensor(spec);
    data.push_back(std::move(bytes));
  }
  for (const std::string& bytes : data) w.write_tensor_data(bytes.data(), bytes.size());
  w.finish();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string load_error(const std::string& path, ErrorCode code = ErrorCode::kInvalidArgument) {
  return error_message(
      [&] {
        ThreadPool pool(1);
        CausalLM::load(path, &pool);
      },
      code);
}

// One valid exported file per test process (qwen3, real vocabulary): the base every break edits.
class GgufBrokenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    good_ = dir_->file("good.gguf");
    export_gguf(write_model(*dir_, "qwen3-0.6b"), good_, "tiny");
  }
  static void TearDownTestSuite() { delete dir_; }
  std::string path(const std::string& name) const { return dir_->file(name); }
  static TempDir* dir_;
  static std::string good_;
};
TempDir* GgufBrokenTest::dir_ = nullptr;
std::string GgufBrokenTest::good_;

TEST_F(GgufBrokenTest, TheGoodFileLoads) {
  ThreadPool pool(1);
  EXPECT_EQ(CausalLM::load(good_, &pool)->config().architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(is_gguf_file(good_));
  EXPECT_FALSE(is_gguf_file(dir_->path().string()));
}

TEST_F(GgufBrokenTest, HeaderDamage) {
  const std::string good = read_bytes(good_);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{10}, size_t{30}, good.size() / 3, good.size() - 5}) {
    const std::string p = dir_->write("cut.gguf", good.substr(0, cut));
    const std::string m = load_error(p);
    EXPECT_TRUE(testing::contains(m, "cut.gguf")) << m;
    if (cut > 24) {
      EXPECT_TRUE(testing::contains(m, "truncated") || testing::contains(m, "past the end")) << m;
    }
  }
  std::string bad = good;
  bad[0] = 'X';
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("magic.gguf", bad)), "not a GGUF file");
  bad = good;
  bad[4] = 9;
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("version.gguf", bad)), "GGUF version 9");
  bad = good;
  bad[8 + 7] = 0x7f;  // tensor count 2^62-ish
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("count.gguf", bad)), "tensors, more than the file can hold");
}

// Byte offset of the tensor info of `name` (just after its name string) in file bytes.
size_t tensor_info_at(const std::string& bytes, const std::string& name) {
  std::string needle(8, '\0');
  for (int i = 0; i < 8; ++i) needle[static_cast<size_t>(i)] = static_cast<char>((name.size() >> (8 * i)) & 0xff);
  needle += name;
  const size_t at = bytes.rfind(needle);
  EXPECT_NE(at, std::string::npos);
  return at + needle.size();
}

TEST_F(GgufBrokenTest, TensorInfoDamage) {
  const std::string good = read_bytes(good_);
  const std::string name = "blk.1.ffn_down.weight";  // 2 dims: u32 n_dims, 2 × u64, u32 type, u64 offset
  const size_t info = tensor_info_at(good, name);
  std::string bad = good;
  bad[info + 4 + 16] = 77;  // type
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("type.gguf", bad)), name, "ggml type 77", "Q4_K");
  bad[info + 4 + 16] = 16;  // IQ2_XXS: a ggml type ditto does not read
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("iq2.gguf", bad)), name, "ggml type 16 (IQ2_XXS)",
                           "which ditto does not read", "IQ4_XS");
  bad = good;
  bad[info + 4 + 16 + 4] += 1;  // offset no longer aligned
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("align.gguf", bad)), name, "not a multiple of the alignment");
  bad = good;
  bad[info + 4 + 16 + 4 + 6] = 0x10;  // offset far past the end
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("past.gguf", bad)), name, "runs past the end of the file");
  bad = good;
  bad[info] = 7;  // 7 dimensions
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir_->write("dims.gguf", bad)), name, "7 dimensions");
}

TEST_F(GgufBrokenTest, MetadataThatDisagreesWithTheTensors) {
  rewrite(good_, path("layers.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "qwen3.block_count") v.u = 3;
    return true;
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("layers.gguf")), "blk.2.", "is missing");
  rewrite(good_, path("ffn.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "qwen3.feed_forward_length") v.u = 64;
    return true;
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("ffn.gguf")), "ffn_gate.weight", "has shape (ggml ne) {32, 48}",
                           "implies {32, 64}");
  rewrite(good_, path("noheads.gguf"),
          [](const std::string& k, GgufValue&) { return k != "qwen3.attention.head_count"; });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("noheads.gguf")), "'qwen3.attention.head_count' is missing");
  rewrite(good_, path("arch.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "general.architecture") v.s = "mamba";
    return true;
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("arch.gguf")), "\"mamba\"", "llama", "qwen3moe");
  rewrite(good_, path("eps.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "qwen3.attention.layer_norm_rms_epsilon") {
      v.type = GgufValueType::kString;
      v.s = "small";
    }
    return true;
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("eps.gguf")), "'qwen3.attention.layer_norm_rms_epsilon' is string",
                           "expected a number");
  rewrite(good_, path("qnorm.gguf"), nullptr, [](GgufTensorSpec& spec, std::string& bytes) {
    if (spec.name == "blk.0.attn_q_norm.weight") {  // [8] f32 cut to a wrong length
      spec.shape = {4};
      bytes.resize(16);
    }
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(path("qnorm.gguf")), "blk.0.attn_q_norm.weight", "{4}", "{8}");
}

// Gemma 3 files: the norms are stored as 1 + w (what loading the directory computes), a missing
// norm or sliding-window key is one error naming it, and a window wider than the context loads.
TEST(GgufGemma3, NormsAreOnePlusWAndBadInputNamesTheKeyOrTensor) {
  TempDir dir;
  const std::string good = dir.file("gemma.gguf");
  export_gguf(write_model(dir, "gemma-3-270m"), good, "tiny");
  {
    const std::unique_ptr<GgufFile> g = GgufFile::open(good);
    const GgufTensor* norm = g->find_tensor("blk.0.post_ffw_norm.weight");
    ASSERT_NE(norm, nullptr);
    ASSERT_EQ(norm->type, GgmlType::kF32);
    float first;
    std::memcpy(&first, norm->data, 4);
    EXPECT_GT(first, 0.5f);  // 1 + normal(0, 0.02), not w itself
    EXPECT_EQ(g->get_int("gemma3.attention.sliding_window"), 4);
  }
  rewrite(good, dir.file("nonorm.gguf"), nullptr, [](GgufTensorSpec& spec, std::string&) {
    if (spec.name == "blk.1.post_ffw_norm.weight") spec.name = "blk.1.unused.weight";
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir.file("nonorm.gguf")), "'blk.1.post_ffw_norm.weight' is missing",
                           "post_feedforward_layernorm");
  rewrite(good, dir.file("nowindow.gguf"),
          [](const std::string& k, GgufValue&) { return k != "gemma3.attention.sliding_window"; });
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir.file("nowindow.gguf")), "'gemma3.attention.sliding_window' is missing");
  rewrite(good, dir.file("zerowindow.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "gemma3.attention.sliding_window") v.u = 0;
    return true;
  });
  DITTO_EXPECT_MESSAGE_HAS(load_error(dir.file("zerowindow.gguf")), "'sliding_window'", "positive");
  rewrite(good, dir.file("widewindow.gguf"), [](const std::string& k, GgufValue& v) {
    if (k == "gemma3.attention.sliding_window") v.u = 100000;
    return true;
  });
  ThreadPool pool(1);
  EXPECT_EQ(CausalLM::load(dir.file("widewindow.gguf"), &pool)->config().sliding_window, 100000);
}

}  // namespace
}  // namespace ditto
