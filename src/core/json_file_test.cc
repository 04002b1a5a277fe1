#include "core/json_file.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/test_temp_dir.h"

namespace ditto {
namespace {

// A file in a fresh temporary folder that is removed with the fixture.
class JsonFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) { return dir_.write(name, text); }
  testing::TempDir dir_;
};

TEST_F(JsonFileTest, ReadsBytesAsTheyAre) {
  const std::string bytes("a\0b\r\n\xff", 6);
  EXPECT_EQ(read_text_file(write("x.bin", bytes)), bytes);
}

TEST_F(JsonFileTest, MissingFileIsNotFoundAndNamesThePath) {
  const std::string path = dir_.file("absent.json");
  try {
    read_json_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(JsonFileTest, MalformedJsonNamesThePathAndTheByte) {
  const std::string path = write("bad.json", "{\"a\": 1,,}");
  try {
    read_json_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(path + ": invalid JSON (byte 9)"), std::string::npos) << e.what();
  }
}

TEST_F(JsonFileTest, TopLevelMustBeAnObjectUnlessAskedOtherwise) {
  const std::string path = write("list.json", "[1, 2]");
  try {
    read_json_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a JSON object, got array"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_json_file(path, /*require_object=*/false).size(), 2u);
}

TEST_F(JsonFileTest, OrderedJsonKeepsKeyOrder) {
  const auto j = read_json_file<nlohmann::ordered_json>(write("o.json", R"({"b": 1, "a": 2})"));
  EXPECT_EQ(j.begin().key(), "b");
}

}  // namespace
}  // namespace ditto
