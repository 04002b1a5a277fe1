// Helpers shared by the model-loading tests: a self-deleting temp directory and error checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace ditto::testing {

// A fresh directory under the system temp dir, removed (with its contents) on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "ditto_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    if (info != nullptr) name += std::string("_") + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& contents) const {
    std::filesystem::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << contents;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

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
