// The transports of vLLM's weight-transfer API on a CPU engine (docs/RL.md): how a trainer's
// tensors reach LLMEngine::update_weights.
//
// "shm" (init_weight_transfer_engine's init_info {"path": FILE}): the trainer writes each tensor's
// raw bytes into a file it shares with ditto — on Linux a file under /dev/shm, i.e. shared memory —
// and each update_weights call names them (update_info: "names", "dtype_names", "shapes",
// "offsets"). ditto maps the file read-only and packs straight from it: no copy of the update is
// made, so the engine's own memory does not grow (the trainer's file is the one copy). The trainer
// must leave those bytes unchanged until finish_weight_update returns.
//
// "http" (the server's /update_weights with "data_base64" beside the names): each tensor's bytes in
// the request body, base64. The server writes them to a spill file (SpillFile below) and maps it,
// so an update held until its finish costs disk pages, not the engine's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "ditto/weight_transfer.h"

namespace ditto {

// One update_weights call's update_info (vLLM's names): tensor i is names[i], dtype_names[i],
// shapes[i]; with the shm transport its bytes start at byte offsets[i] of the shared file.
struct WeightUpdateInfo {
  std::vector<std::string> names;
  std::vector<std::string> dtype_names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;  // empty when the bytes come another way (data_base64)
};

// Reads update_info. `need_offsets`: the shm transport's "offsets" must be there. Throws
// Error(kInvalidArgument) naming the field: a missing or mistyped list, lists of different lengths,
// an empty update, a negative dimension or offset, a key it does not know (a misspelling would
// otherwise be ignored; vLLM's "packed" and "is_checkpoint_format" are accepted when false).
WeightUpdateInfo parse_weight_update_info(const nlohmann::ordered_json& update_info, bool need_offsets);

// The tensors of `info` inside `file` (offsets[i] to offsets[i] + shape × dtype size), pointing into
// the mapping. Throws Error(kInvalidArgument) naming the tensor when its bytes end past the file's
// size or its dtype is not bfloat16/float16/float32.
std::vector<WeightTensor> tensors_in_file(const WeightUpdateInfo& info, const MappedFile& file);

// The shm transport's init_info: {"path": FILE}. Throws Error(kInvalidArgument) naming the field
// for a missing or non-string path or another key, Error(kNotFound) when FILE does not exist.
std::string parse_shm_init_info(const nlohmann::ordered_json& init_info);

// A temporary file holding the bytes of an update sent over HTTP until it finishes: created in
// $TMPDIR (else /tmp) and unlinked at once, so it vanishes with the process. Not thread-safe.
class SpillFile {
 public:
  // Throws Error(kInternal) naming the directory when it cannot be created.
  SpillFile();
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  // Appends `bytes` 64-byte aligned; returns their offset. Throws Error(kResourceExhausted) when
  // the disk is full.
  int64_t append(const std::string& bytes);
  // Maps everything appended so far (a new mapping per call; the caller keeps it while in use).
  std::unique_ptr<MappedFile> map() const;

 private:
  int fd_ = -1;
  std::string path_;  // /proc/self/fd/N: the unlinked file, for MappedFile
  int64_t size_ = 0;
};

}  // namespace ditto
