// Helpers shared by the model-loading tests: a self-deleting temp directory (core/test_temp_dir.h)
// and error checks.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/test_temp_dir.h"

namespace ditto::testing {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Runs f, expects an ditto::Error with `code`, returns its message ("" and a failure otherwise).
template <typename F>
std::string error_message(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << "message: " << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ditto::Error, got std::exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an error, none was thrown";
  return "";
}

// EXPECT that the message holds every one of `parts`.
#define DITTO_EXPECT_MESSAGE_HAS(message, ...)                                               \
  do {                                                                                       \
    const std::string ditto_msg_ = (message);                                                \
    for (const std::string& ditto_part_ : std::initializer_list<std::string>{__VA_ARGS__}) { \
      EXPECT_TRUE(::ditto::testing::contains(ditto_msg_, ditto_part_))                       \
          << "message lacks \"" << ditto_part_ << "\": " << ditto_msg_;                      \
    }                                                                                        \
  } while (0)

}  // namespace ditto::testing
