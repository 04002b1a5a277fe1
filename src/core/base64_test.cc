#include "core/base64.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

// RFC 4648 §10's test vectors, both ways; every byte value round-trips.
TEST(Base64Test, Rfc4648VectorsBothWays) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    const std::vector<unsigned char> bytes(plain.begin(), plain.end());
    EXPECT_EQ(base64_encode(bytes), coded);
    EXPECT_EQ(base64_decode(coded, "x"), plain);
  }
  EXPECT_EQ(base64_decode("Zm8", "x"), "fo");  // padding optional
  std::vector<unsigned char> all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<unsigned char>(i));
  const std::string back = base64_decode(base64_encode(all), "x");
  EXPECT_EQ(std::vector<unsigned char>(back.begin(), back.end()), all);
}

TEST(Base64Test, NamesTheFieldAndTheCharacter) {
  try {
    base64_decode("Zm9v!mFy", "update_info.data_base64[3]");
    ADD_FAILURE() << "decoded text that is not base64";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("update_info.data_base64[3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("character 4 is '!'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ditto
