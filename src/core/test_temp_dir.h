// Test-only: a fresh directory under the system temp dir (honours $TMPDIR), removed with its
// contents when the object goes. Named ditto_<pid>_<n>_<test name>, so a leftover (a crashed test)
// says which test made it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace ditto::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "ditto_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    if (info != nullptr) name += std::string("_") + info->name();
    // A parameterised test is named "Test/0": one path component, not a folder and a subfolder
    // (removing the subfolder would leave the folder behind).
    std::replace(name.begin(), name.end(), '/', '_');
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

}  // namespace ditto::testing
