// system_fingerprint: the same weight bytes give the same fingerprint, any changed byte, renamed or
// re-split shard gives another; the format is OpenAI's ("fp_" + 16 hex digits).
#include "engine/system_fingerprint.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/test_temp_dir.h"

namespace ditto {
namespace {

using testing::TempDir;

TEST(SystemFingerprintTest, SameBytesSameFingerprintAnyChangeAnother) {
  TempDir a, b;
  const std::string weights(1 << 20, 'w');
  const std::string one = a.write("model.gguf", weights);
  const std::string copy = b.write("model.gguf", weights);
  EXPECT_EQ(hash_weight_files(one), hash_weight_files(copy));  // content, not path
  std::string flipped = weights;
  flipped[123456] ^= 1;
  EXPECT_NE(hash_weight_files(one), hash_weight_files(b.write("other.gguf", flipped)));

  const std::string fp = system_fingerprint(hash_weight_files(one));
  ASSERT_EQ(fp.size(), 19u);
  EXPECT_EQ(fp.substr(0, 3), "fp_");
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef", 3), std::string::npos) << fp;
  EXPECT_EQ(fp, system_fingerprint(hash_weight_files(copy)));
  EXPECT_NE(fp, system_fingerprint(hash_weight_files(one) + 1));
}

TEST(SystemFingerprintTest, DirectoryHashesItsSafetensorsInNameOrder) {
  TempDir one, split, renamed;
  one.write("model.safetensors", "abcdef");
  one.write("config.json", "{}");
  split.write("model-00001-of-00002.safetensors", "abc");
  split.write("model-00002-of-00002.safetensors", "def");
  renamed.write("weights.safetensors", "abcdef");
  const uint64_t h = hash_weight_files(one.path().string());
  one.write("config.json", "{\"changed\": true}");  // not a weight file
  EXPECT_EQ(hash_weight_files(one.path().string()), h);
  EXPECT_NE(hash_weight_files(split.path().string()), h);  // the same bytes split differently
  EXPECT_NE(hash_weight_files(renamed.path().string()), h);
  TempDir empty;
  empty.write("config.json", "{}");
  try {
    hash_weight_files(empty.path().string());
    ADD_FAILURE() << "a directory without weights was fingerprinted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find(".safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ditto
