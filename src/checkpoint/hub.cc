#include "checkpoint/hub.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "checkpoint/gguf_reader.h"
#include "core/error.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// "org/name": one slash, neither part empty, no path syntax.
bool looks_like_hub_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size()) return false;
  if (s.find('/', slash + 1) != std::string::npos) return false;
  const std::string org = s.substr(0, slash);
  return org != "." && org != ".." && org[0] != '~' && s.substr(slash + 1) != "..";
}

// A mistyped local path rather than a hub id: a GGUF file name, or a path whose first part is a
// folder here ("models/nope.gguf", "checkpoints/qwen3" beside a checkpoints/ folder).
bool looks_like_local_path(const std::string& s) {
  const std::string lower = [&] {
    std::string l = s;
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  }();
  if (lower.size() > 5 && lower.compare(lower.size() - 5, 5, ".gguf") == 0) return true;
  std::error_code ec;
  const size_t slash = s.find('/');
  return slash != std::string::npos && fs::is_directory(s.substr(0, slash), ec);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The snapshot directory of one repo folder (models--org--name), or "" with *why set. Like
// huggingface_hub: refs/main names the revision, and it must be there; without refs/main a
// single snapshot is unambiguous, several are not (ditto never guesses which one is meant).
std::string pick_snapshot(const fs::path& repo, std::string* why) {
  std::error_code ec;
  const fs::path snapshots = repo / "snapshots";
  if (!fs::is_directory(snapshots, ec)) {
    *why = "has no snapshots/ folder";
    return "";
  }
  std::ifstream ref(repo / "refs" / "main");
  std::string commit;
  if (ref && std::getline(ref, commit)) {
    commit = trim(commit);
    if (commit.empty() || commit == "." || commit == ".." || commit.find('/') != std::string::npos ||
        commit.find('\\') != std::string::npos) {
      throw_invalid_argument((repo / "refs" / "main").string() + ": not a revision name: '" + commit + "'");
    }
    if (!fs::is_directory(snapshots / commit, ec)) {
      throw_not_found((repo / "refs" / "main").string() + " names revision '" + commit + "', but " +
                      (snapshots / commit).string() + " does not exist (incomplete download?)");
    }
    return (snapshots / commit).string();
  }
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
    if (entry.is_directory(ec)) found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    *why = "has no snapshot";
    return "";
  }
  if (found.size() > 1) {
    std::string list;
    for (const auto& f : found) list += (list.empty() ? "" : ", ") + f;
    throw_invalid_argument(repo.string() + ": no refs/main and several snapshots (" + list +
                           "); pass the snapshot directory you mean as --model");
  }
  return (snapshots / found.front()).string();
}

}  // namespace

std::vector<std::string> hub_cache_dirs() {
  // huggingface_hub's precedence: HF_HUB_CACHE, else HF_HOME/hub, else
  // $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. Exactly one folder is used.
  if (!env("HF_HUB_CACHE").empty()) return {env("HF_HUB_CACHE")};
  if (!env("HF_HOME").empty()) return {(fs::path(env("HF_HOME")) / "hub").string()};
  if (!env("XDG_CACHE_HOME").empty()) return {(fs::path(env("XDG_CACHE_HOME")) / "huggingface" / "hub").string()};
  if (!env("HOME").empty()) return {(fs::path(env("HOME")) / ".cache" / "huggingface" / "hub").string()};
  return {};
}

std::string resolve_model_path(const std::string& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) return model;
  if (fs::exists(model, ec)) {
    if (is_gguf_file(model)) return model;
    throw_invalid_argument(model +
                           ": is a file but not a GGUF file; --model takes a model directory, a GGUF file or a hub id");
  }
  if (!looks_like_hub_id(model)) {
    throw_not_found(model + ": no such model directory (and not a hub id of the form org/name)");
  }
  if (looks_like_local_path(model))
    throw_not_found(model + ": no such file or directory (" +
                    (fs::is_directory(model.substr(0, model.find('/')), ec)
                         ? "'" + model.substr(0, model.find('/')) + "' is a folder here, so this is read as a path"
                         : std::string("a GGUF file name is read as a path")) +
                    ", not a hub id; check the name, or pass the model's full path)");
  const std::string folder = "models--" + model.substr(0, model.find('/')) + "--" + model.substr(model.find('/') + 1);
  std::string looked;
  for (const auto& cache : hub_cache_dirs()) {
    const fs::path repo = fs::path(cache) / folder;
    std::string why = "does not exist";
    if (fs::is_directory(repo, ec)) {
      const std::string snapshot = pick_snapshot(repo, &why);
      if (!snapshot.empty()) return snapshot;
    }
    looked += "\n  " + repo.string() + " (" + why + ")";
  }
  if (looked.empty()) looked = "\n  (no cache folder: HF_HUB_CACHE, HF_HOME and HOME are unset)";
  throw_not_found(model + ": not a local directory, and not in the Hugging Face cache. Looked in:" + looked +
                  "\nditto never downloads. On a machine with network access run `huggingface-cli "
                  "download " +
                  model +
                  "` (it fills the cache; copy it here or set HF_HOME), or "
                  "pass the model's local directory instead.");
}

}  // namespace ditto
