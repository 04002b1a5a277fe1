#include "engine/system_fingerprint.h"

// xxHash header-only (Debian's libxxhash-dev): inlined here, so nothing new is linked. This is the
// one file that includes it.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "checkpoint/gguf_reader.h"
#include "core/error.h"
#include "core/numerics_version.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;

// The one instruction-set class: every path (scalar, AVX2, AVX-512) gives the same bits
// (docs/INVARIANCE.md row 7). A path that did not would get a class of its own here.
constexpr char kIsaClass[] = "any-isa";

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

void update(XXH3_state_t* state, const void* data, size_t size) {
  if (XXH3_64bits_update(state, data, size) == XXH_ERROR) throw Error(ErrorCode::kInternal, "xxHash update failed");
}

void hash_file(XXH3_state_t* state, const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInternal, path.string() + ": cannot be read to fingerprint the weights");
  std::vector<char> buffer(size_t{4} << 20);  // 4 MiB reads: the cost is the bytes, not the calls
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    update(state, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(ErrorCode::kInternal, path.string() + ": read failed while fingerprinting the weights");
}

}  // namespace

uint64_t hash_weight_files(const std::string& model_path) {
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state || XXH3_64bits_reset(state.get()) == XXH_ERROR)
    throw Error(ErrorCode::kInternal, "xxHash state could not be created");
  if (!fs::is_directory(model_path)) {
    hash_file(state.get(), model_path);  // a GGUF file (or whatever single file was loaded)
    return XXH3_64bits_digest(state.get());
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(model_path))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors") files.push_back(entry.path());
  if (files.empty()) throw_not_found(model_path + ": no .safetensors file to fingerprint the weights from");
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    const uint64_t size = fs::file_size(f);
    update(state.get(), name.data(), name.size() + 1);  // with its terminating NUL: names cannot run together
    update(state.get(), &size, sizeof size);
    hash_file(state.get(), f);
  }
  return XXH3_64bits_digest(state.get());
}

uint64_t hash_weight_update(uint64_t weights_hash, const std::map<std::string, WeightTensor>& tensors) {
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state || XXH3_64bits_reset(state.get()) == XXH_ERROR)
    throw Error(ErrorCode::kInternal, "xxHash state could not be created");
  update(state.get(), &weights_hash, sizeof weights_hash);
  for (const auto& [name, t] : tensors) {
    update(state.get(), name.data(), name.size() + 1);  // with its NUL, as a file name above
    const auto dtype = static_cast<uint8_t>(weight_dtype(t.dtype, name));
    const auto rank = static_cast<uint64_t>(t.shape.size());
    update(state.get(), &dtype, sizeof dtype);
    update(state.get(), &rank, sizeof rank);
    update(state.get(), t.shape.data(), t.shape.size() * sizeof(int64_t));
    update(state.get(), t.data, t.nbytes);
  }
  return XXH3_64bits_digest(state.get());
}

std::string system_fingerprint(uint64_t weights_hash) {
  std::vector<unsigned char> bytes;
  auto put = [&bytes](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    bytes.insert(bytes.end(), b, b + n);
  };
  const int32_t numerics = kNumericsVersion;
  put(&weights_hash, sizeof weights_hash);
  put(&numerics, sizeof numerics);
  put(kIsaClass, sizeof kIsaClass - 1);
  char out[24];
  std::snprintf(out, sizeof out, "fp_%016" PRIx64, static_cast<uint64_t>(XXH3_64bits(bytes.data(), bytes.size())));
  return out;
}

}  // namespace ditto
