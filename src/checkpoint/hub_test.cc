#include "checkpoint/hub.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/test_support.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using testing::error_message;
using testing::TempDir;

// Sets (or unsets) environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  void set(const char* name, const std::optional<std::string>& value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Points every cache variable into `home` so the real ~/.cache is never consulted.
void isolate(ScopedEnv& env, const TempDir& home) {
  env.set("HF_HUB_CACHE", std::nullopt);
  env.set("XDG_CACHE_HOME", std::nullopt);
  env.set("HF_HOME", home.file("hf"));
  env.set("HOME", home.file("home"));
}

std::string make_snapshot(const TempDir& root, const std::string& hub, const std::string& rev) {
  const fs::path snap = fs::path(root.file(hub)) / "models--Qwen--Qwen3-8B" / "snapshots" / rev;
  fs::create_directories(snap);
  std::ofstream(snap / "config.json") << "{}";
  return snap.string();
}

TEST(Hub, DirectoryIsUsedAsIs) {
  TempDir dir;
  EXPECT_EQ(resolve_model_path(dir.path().string()), dir.path().string());
}

TEST(Hub, FindsSnapshotFromRefsMain) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  make_snapshot(root, "hf/hub", "aaaa");
  const std::string want = make_snapshot(root, "hf/hub", "bbbb");
  root.write("hf/hub/models--Qwen--Qwen3-8B/refs/main", "bbbb\n");
  EXPECT_EQ(resolve_model_path("Qwen/Qwen3-8B"), want);
}

TEST(Hub, WithoutRefsASingleSnapshotIsUsed) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  const std::string only = make_snapshot(root, "hf/hub", "aaaa");
  EXPECT_EQ(resolve_model_path("Qwen/Qwen3-8B"), only);
}

TEST(Hub, WithoutRefsSeveralSnapshotsAreAmbiguous) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  make_snapshot(root, "hf/hub", "zzzz");
  make_snapshot(root, "hf/hub", "aaaa");
  DITTO_EXPECT_MESSAGE_HAS(error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kInvalidArgument),
                           "models--Qwen--Qwen3-8B", "aaaa, zzzz", "refs/main");
}

TEST(Hub, RefsMainNamingAMissingSnapshotIsAnError) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  make_snapshot(root, "hf/hub", "aaaa");
  root.write("hf/hub/models--Qwen--Qwen3-8B/refs/main", "cccc");
  DITTO_EXPECT_MESSAGE_HAS(error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kNotFound),
                           "refs/main", "'cccc'", "does not exist");
}

TEST(Hub, RefsMainCannotLeaveTheCache) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  make_snapshot(root, "hf/hub", "aaaa");
  for (const char* bad : {"../../../../etc", "..", "a/b"}) {
    root.write("hf/hub/models--Qwen--Qwen3-8B/refs/main", bad);
    DITTO_EXPECT_MESSAGE_HAS(error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kInvalidArgument),
                             "refs/main", "not a revision name");
  }
}

TEST(Hub, HfHubCacheIsTheOnlyPlaceWhenSet) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  make_snapshot(root, "hf/hub", "aaaa");
  env.set("HF_HUB_CACHE", root.file("explicit"));
  // Present under HF_HOME, but huggingface_hub would not look there: neither does ditto.
  error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kNotFound);
  const std::string want = make_snapshot(root, "explicit", "bbbb");
  EXPECT_EQ(resolve_model_path("Qwen/Qwen3-8B"), want);
}

TEST(Hub, FallsBackToHomeCache) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  env.set("HF_HOME", std::nullopt);
  const std::string want = make_snapshot(root, "home/.cache/huggingface/hub", "aaaa");
  EXPECT_EQ(resolve_model_path("Qwen/Qwen3-8B"), want);
}

TEST(Hub, NotFoundListsEveryPlaceAndHowToGetIt) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  env.set("HF_HUB_CACHE", root.file("explicit"));
  fs::create_directories(root.file("hf/hub/models--Qwen--Qwen3-8B/snapshots"));
  const std::string msg = error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kNotFound);
  DITTO_EXPECT_MESSAGE_HAS(msg, "Qwen/Qwen3-8B", root.file("explicit"), "does not exist",
                           "huggingface-cli download Qwen/Qwen3-8B", "local directory");
  env.set("HF_HUB_CACHE", std::nullopt);
  DITTO_EXPECT_MESSAGE_HAS(error_message([] { resolve_model_path("Qwen/Qwen3-8B"); }, ErrorCode::kNotFound),
                           root.file("hf/hub"), "has no snapshot");
}

TEST(Hub, NeitherDirectoryNorHubId) {
  TempDir root;
  const std::string path = root.file("a/b/c");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { resolve_model_path(path); }, ErrorCode::kNotFound), path);
}

TEST(Hub, AMistypedLocalPathIsNotTakenForAHubId) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  // "models/nope.gguf" beside a models/ folder (the README's own style) and a bare GGUF name: both
  // paths, said so, with no download hint.
  fs::create_directories(root.file("models"));
  const fs::path cwd = fs::current_path();
  fs::current_path(root.file(""));
  const std::string beside_folder = error_message([] { resolve_model_path("models/nope"); }, ErrorCode::kNotFound);
  const std::string gguf = error_message([] { resolve_model_path("org/nope.GGUF"); }, ErrorCode::kNotFound);
  fs::current_path(cwd);
  DITTO_EXPECT_MESSAGE_HAS(beside_folder, "models/nope: no such file or directory", "'models' is a folder here");
  DITTO_EXPECT_MESSAGE_HAS(gguf, "org/nope.GGUF: no such file or directory", "GGUF file name");
  EXPECT_EQ(beside_folder.find("huggingface-cli"), std::string::npos) << beside_folder;
  EXPECT_EQ(gguf.find("huggingface-cli"), std::string::npos) << gguf;
}

TEST(Hub, CacheDirPrecedence) {
  TempDir root;
  ScopedEnv env;
  isolate(env, root);
  env.set("HF_HUB_CACHE", "/x");
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/x"});
  env.set("HF_HUB_CACHE", std::nullopt);
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{root.file("hf") + "/hub"});
  env.set("HF_HOME", std::nullopt);
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/xdg/huggingface/hub"});
  env.set("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{root.file("home") + "/.cache/huggingface/hub"});
}

TEST(Hub, AFileIsNotAModel) {
  TempDir root;
  const std::string file = root.write("model.safetensors", "x");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { resolve_model_path(file); }, ErrorCode::kInvalidArgument), file,
                           "is a file");
}

}  // namespace
}  // namespace ditto
