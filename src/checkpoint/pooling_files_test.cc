#include "checkpoint/pooling_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf_writer.h"
#include "core/test_support.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_message;
using testing::TempDir;

// Qwen3-Embedding's modules.json: Transformer, Pooling in 1_Pooling, Normalize in 2_Normalize.
json modules(bool normalize) {
  json m = json::array(
      {{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
       {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
  if (normalize) {
    m.push_back(
        {{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
  }
  return m;
}

// A Pooling config.json with `on` set and the other modes false.
json pooling_config(const std::vector<std::string>& on) {
  json c = {{"word_embedding_dimension", 1024},
            {"pooling_mode_cls_token", false},
            {"pooling_mode_mean_tokens", false},
            {"pooling_mode_max_tokens", false},
            {"pooling_mode_mean_sqrt_len_tokens", false},
            {"pooling_mode_weightedmean_tokens", false},
            {"pooling_mode_lasttoken", false},
            {"include_prompt", true}};
  for (const std::string& key : on) c[key] = true;
  return c;
}

// A model directory holding modules.json and 1_Pooling/config.json.
std::string write_dir(const TempDir& tmp, const std::string& name, const json& mods, const json& pooling) {
  const fs::path dir = tmp.path() / name;
  fs::create_directories(dir / "1_Pooling");
  tmp.write(name + "/modules.json", mods.dump(2));
  tmp.write(name + "/1_Pooling/config.json", pooling.dump(2));
  return dir.string();
}

// A metadata-only GGUF file whose `arch`.pooling_type is `value` (absent when negative).
std::string write_gguf(const TempDir& tmp, const std::string& name, int64_t value, const std::string& arch = "qwen3") {
  const std::string path = tmp.file(name);
  GgufWriter w(path);
  w.add_string("general.architecture", arch);
  if (value >= 0) w.add_u32(arch + ".pooling_type", static_cast<uint32_t>(value));
  w.finish();
  return path;
}

TEST(PoolingFiles, EachSupportedModeWithAndWithoutNormalize) {
  TempDir tmp;
  const std::pair<const char*, PoolingType> cases[] = {{"pooling_mode_lasttoken", PoolingType::kLast},
                                                       {"pooling_mode_mean_tokens", PoolingType::kMean},
                                                       {"pooling_mode_cls_token", PoolingType::kCls}};
  for (const auto& [key, type] : cases) {
    for (bool normalize : {true, false}) {
      const std::string dir =
          write_dir(tmp, std::string(key) + (normalize ? "_n" : ""), modules(normalize), pooling_config({key}));
      const std::optional<PoolingFiles> f = read_pooling_files(dir);
      ASSERT_TRUE(f.has_value()) << key;
      EXPECT_EQ(f->pooling_type, type) << key;
      EXPECT_EQ(f->normalize, normalize) << key;
      EXPECT_FALSE(f->rank);
      EXPECT_EQ(f->source, dir + "/modules.json");
    }
  }
}

TEST(PoolingFiles, AbsentKeysAreOffAndTheOrderOfModulesIsFree) {
  TempDir tmp;
  json mods = modules(true);
  std::swap(mods[0], mods[2]);  // Normalize listed first
  const std::string dir = write_dir(tmp, "m", mods, {{"pooling_mode_mean_tokens", true}});
  const std::optional<PoolingFiles> f = read_pooling_files(dir);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->pooling_type, PoolingType::kMean);
  EXPECT_TRUE(f->normalize);
}

TEST(PoolingFiles, NothingSaidIsNullopt) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "empty");
  EXPECT_FALSE(read_pooling_files(tmp.file("empty")).has_value());  // no modules.json
  EXPECT_FALSE(read_pooling_files(tmp.file("missing")).has_value());
  tmp.write("plain/config.json", "{}");
  EXPECT_FALSE(read_pooling_files(tmp.file("plain")).has_value());
  // modules.json without a Pooling module (a Normalize alone pools nothing).
  tmp.write("no_pooling/modules.json", json::array({modules(true)[0], modules(true)[2]}).dump());
  EXPECT_FALSE(read_pooling_files(tmp.file("no_pooling")).has_value());
  // A GGUF file without the key, or with NONE.
  EXPECT_FALSE(read_pooling_files(write_gguf(tmp, "absent.gguf", -1)).has_value());
  EXPECT_FALSE(read_pooling_files(write_gguf(tmp, "none.gguf", 0)).has_value());
}

TEST(PoolingFiles, MalformedFilesNameTheFileAndKey) {
  TempDir tmp;
  const std::string bad_json = write_dir(tmp, "bad_json", modules(true), pooling_config({"pooling_mode_lasttoken"}));
  tmp.write("bad_json/modules.json", "[{\"idx\": 0,");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(bad_json); }, ErrorCode::kInvalidArgument),
                           bad_json + "/modules.json", "invalid JSON");

  const std::string not_list = write_dir(tmp, "not_list", {{"type", "x"}}, pooling_config({"pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(not_list); }, ErrorCode::kInvalidArgument),
                           "modules.json", "expected a list");

  json no_type = modules(false);
  no_type[1].erase("type");
  const std::string untyped = write_dir(tmp, "untyped", no_type, pooling_config({"pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(untyped); }, ErrorCode::kInvalidArgument),
                           "modules.json", "module [1]", "'type'");

  json no_path = modules(false);
  no_path[1].erase("path");
  const std::string pathless = write_dir(tmp, "pathless", no_path, pooling_config({"pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(pathless); }, ErrorCode::kInvalidArgument),
                           "module [1]", "'path'");

  const std::string bad_pool = write_dir(tmp, "bad_pool", modules(false), pooling_config({}));
  tmp.write("bad_pool/1_Pooling/config.json", "{\"pooling_mode_lasttoken\": tru");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(bad_pool); }, ErrorCode::kInvalidArgument),
                           bad_pool + "/1_Pooling/config.json", "invalid JSON");

  json wrong_type = pooling_config({});
  wrong_type["pooling_mode_lasttoken"] = "yes";
  const std::string stringly = write_dir(tmp, "stringly", modules(false), wrong_type);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(stringly); }, ErrorCode::kInvalidArgument),
                           "1_Pooling/config.json", "pooling_mode_lasttoken", "\"yes\"");

  const std::string missing = write_dir(tmp, "missing_config", modules(false), pooling_config({}));
  fs::remove(tmp.path() / "missing_config/1_Pooling/config.json");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(missing); }, ErrorCode::kNotFound),
                           "1_Pooling/config.json");
}

TEST(PoolingFiles, OneModeDittoPoolsByOrAnError) {
  TempDir tmp;
  const std::string none = write_dir(tmp, "none", modules(true), pooling_config({}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(none); }, ErrorCode::kInvalidArgument),
                           "1_Pooling/config.json", "no pooling mode is true", "pooling_mode_lasttoken");

  const std::string several =
      write_dir(tmp, "several", modules(true), pooling_config({"pooling_mode_mean_tokens", "pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(several); }, ErrorCode::kInvalidArgument),
                           "1_Pooling/config.json", "several", "pooling_mode_mean_tokens", "pooling_mode_lasttoken");

  for (const char* key :
       {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"}) {
    const std::string dir = write_dir(tmp, key, modules(true), pooling_config({key}));
    DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(dir); }, ErrorCode::kInvalidArgument),
                             "1_Pooling/config.json", key, "pooling_mode_lasttoken");
  }

  json mean_without_prompt = pooling_config({"pooling_mode_mean_tokens"});
  mean_without_prompt["include_prompt"] = false;
  const std::string excluded = write_dir(tmp, "excluded", modules(true), mean_without_prompt);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(excluded); }, ErrorCode::kInvalidArgument),
                           "1_Pooling/config.json", "include_prompt");
  json last_without_prompt = pooling_config({"pooling_mode_lasttoken"});
  last_without_prompt["include_prompt"] = false;  // the last token is the text's either way
  EXPECT_EQ(read_pooling_files(write_dir(tmp, "last_excluded", modules(true), last_without_prompt))->pooling_type,
            PoolingType::kLast);
}

TEST(PoolingFiles, AModuleDittoDoesNotApplyIsRefused) {
  TempDir tmp;
  json mods = modules(true);
  mods.push_back({{"idx", 3}, {"name", "3"}, {"path", "3_Dense"}, {"type", "sentence_transformers.models.Dense"}});
  const std::string dir = write_dir(tmp, "dense", mods, pooling_config({"pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(dir); }, ErrorCode::kInvalidArgument), "modules.json",
                           "module [3]", "sentence_transformers.models.Dense");
  json twice = modules(false);
  twice.push_back(twice[1]);
  const std::string two = write_dir(tmp, "two", twice, pooling_config({"pooling_mode_lasttoken"}));
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(two); }, ErrorCode::kInvalidArgument), "module [2]",
                           "second Pooling");
}

TEST(PoolingFiles, GgufPoolingType) {
  TempDir tmp;
  const std::pair<int64_t, PoolingType> cases[] = {
      {1, PoolingType::kMean}, {2, PoolingType::kCls}, {3, PoolingType::kLast}};
  for (const auto& [value, type] : cases) {
    const std::string path = write_gguf(tmp, std::to_string(value) + ".gguf", value);
    const std::optional<PoolingFiles> f = read_pooling_files(path);
    ASSERT_TRUE(f.has_value()) << value;
    EXPECT_EQ(f->pooling_type, type);
    EXPECT_FALSE(f->normalize);
    EXPECT_FALSE(f->rank);
    EXPECT_EQ(f->source, path + ": qwen3.pooling_type");
  }
  const std::optional<PoolingFiles> rank = read_pooling_files(write_gguf(tmp, "rank.gguf", 4));
  ASSERT_TRUE(rank.has_value());
  EXPECT_TRUE(rank->rank);
  // The key follows general.architecture.
  EXPECT_EQ(read_pooling_files(write_gguf(tmp, "llama.gguf", 1, "llama"))->pooling_type, PoolingType::kMean);

  const std::string five = write_gguf(tmp, "five.gguf", 5);
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(five); }, ErrorCode::kInvalidArgument), five,
                           "qwen3.pooling_type", "5", "4 RANK");
  const std::string text = tmp.file("text.gguf");
  {
    GgufWriter w(text);
    w.add_string("general.architecture", "qwen3");
    w.add_string("qwen3.pooling_type", "last");
    w.finish();
  }
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { read_pooling_files(text); }, ErrorCode::kInvalidArgument), text,
                           "qwen3.pooling_type");
}

TEST(PoolingFiles, TypeNames) {
  for (PoolingType t : {PoolingType::kLast, PoolingType::kMean, PoolingType::kCls}) {
    EXPECT_EQ(parse_pooling_type(pooling_type_name(t)), t);
  }
  EXPECT_EQ(parse_pooling_type("last"), PoolingType::kLast);
  EXPECT_EQ(parse_pooling_type("Mean"), PoolingType::kMean);
  try {
    parse_pooling_type("max");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "pooling_type");
    DITTO_EXPECT_MESSAGE_HAS(e.what(), "'max'", "LAST", "MEAN", "CLS");
  }
}

}  // namespace
}  // namespace ditto
