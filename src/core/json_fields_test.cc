#include "core/json_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace ditto {
namespace {

using nlohmann::json;

// The Error's message; fails the test if `f` does not throw kInvalidArgument.
template <typename F>
std::string invalid_argument(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(JsonFields, FileFieldsNameTheFileAndTheKey) {
  const json j = {{"hidden_size", 40960.0},
                  {"eps", "small"},
                  {"eos", 7},
                  {"big", 18446744073709551615ull},
                  {"scaling", {{"factor", 0.5}}}};
  const JsonFields f(j, "config.json");
  EXPECT_EQ(f.get_int("hidden_size", 0), 40960);  // Hugging Face files write integral floats
  EXPECT_EQ(f.get_int("absent", 3), 3);
  EXPECT_EQ(f.get_int_list("eos"), std::vector<int64_t>{7});
  EXPECT_EQ(invalid_argument([&] { f.get_double("eps", 0); }), "config.json: 'eps' must be a number, got \"small\"");
  EXPECT_EQ(invalid_argument([&] { f.get_int("big", 0); }), "config.json: 'big' is too large: 18446744073709551615");
  const JsonFields nested(j["scaling"], "config.json", "scaling.");
  EXPECT_EQ(invalid_argument([&] { nested.require_int("factor"); }),
            "config.json: 'scaling.factor' must be an integer, got 0.5");
}

// The strict readers for user input share the integer rule but refuse integral floats.
TEST(JsonFields, UserFieldsAreStrict) {
  EXPECT_EQ(json_int(nlohmann::ordered_json(12), "n"), 12);
  EXPECT_EQ(invalid_argument([] { json_int(nlohmann::ordered_json(12.0), "n"); }),
            "field 'n' must be an integer, got 12.0");
  EXPECT_EQ(invalid_argument([] { json_int(nlohmann::ordered_json(true), "n", 0, 5); }),
            "field 'n' must be an integer in [0, 5], got true");
  EXPECT_EQ(invalid_argument([] { json_int(nlohmann::ordered_json(18446744073709551615ull), "n"); }),
            "field 'n' must be an integer, got 18446744073709551615");
}

}  // namespace
}  // namespace ditto
