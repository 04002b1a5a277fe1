#include "engine/weight_transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "core/json_fields.h"
#include "model/weight_update.h"

namespace ditto {
namespace {

std::vector<int64_t> json_dims(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_array()) throw_invalid_argument("field '" + key + "' must be a list of integers, got " + json_excerpt(v));
  std::vector<int64_t> dims;
  for (size_t i = 0; i < v.size(); ++i) dims.push_back(json_int(v[i], key + "[" + std::to_string(i) + "]", 0));
  return dims;
}

}  // namespace

WeightUpdateInfo parse_weight_update_info(const nlohmann::ordered_json& u, bool need_offsets) {
  if (!u.is_object()) throw_invalid_argument("field 'update_info' must be an object, got " + json_excerpt(u));
  for (const auto& [key, value] : u.items()) {
    if (key == "names" || key == "dtype_names" || key == "shapes" || key == "offsets" || key == "data_base64") continue;
    if ((key == "packed" || key == "is_checkpoint_format") && value.is_boolean() && !value.get<bool>()) continue;
    throw_invalid_argument("field 'update_info." + key +
                           "' is not supported (names, dtype_names, shapes, offsets; data_base64 over HTTP)");
  }
  for (const char* key : {"names", "dtype_names", "shapes"})
    if (!u.contains(key)) throw_invalid_argument(std::string("field 'update_info.") + key + "' is required");
  WeightUpdateInfo info;
  info.names = json_strings(u["names"], "update_info.names");
  info.dtype_names = json_strings(u["dtype_names"], "update_info.dtype_names");
  const auto& shapes = u["shapes"];
  if (!shapes.is_array())
    throw_invalid_argument("field 'update_info.shapes' must be a list of shapes, got " + json_excerpt(shapes));
  for (size_t i = 0; i < shapes.size(); ++i)
    info.shapes.push_back(json_dims(shapes[i], "update_info.shapes[" + std::to_string(i) + "]"));
  if (u.contains("offsets")) info.offsets = json_dims(u["offsets"], "update_info.offsets");
  if (info.names.empty())
    throw_invalid_argument("field 'update_info.names' is empty: an update needs at least one tensor");
  if (need_offsets && !u.contains("offsets"))
    throw_invalid_argument(
        "field 'update_info.offsets' is required (each tensor's byte offset in the shared file given to "
        "init_weight_transfer_engine)");
  const size_t n = info.names.size();
  const auto same_length = [&](size_t size, const char* key) {
    if (size != n)
      throw_invalid_argument(std::string("field 'update_info.") + key + "' has " + std::to_string(size) +
                             " entries, but 'names' has " + std::to_string(n));
  };
  same_length(info.dtype_names.size(), "dtype_names");
  same_length(info.shapes.size(), "shapes");
  if (u.contains("offsets")) same_length(info.offsets.size(), "offsets");
  return info;
}

std::vector<WeightTensor> tensors_in_file(const WeightUpdateInfo& info, const MappedFile& file) {
  std::vector<WeightTensor> tensors;
  for (size_t i = 0; i < info.names.size(); ++i) {
    WeightTensor t;
    t.name = info.names[i];
    t.dtype = info.dtype_names[i];
    t.shape = info.shapes[i];
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
    t.nbytes = numel * dtype_size(weight_dtype(t.dtype, t.name));
    const auto offset = static_cast<size_t>(info.offsets[i]);
    if (offset > file.size() || t.nbytes > file.size() - offset)
      throw_invalid_argument("update_weights: tensor '" + t.name + "': bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset + t.nbytes) + ") end past " + file.path() + "'s " +
                             std::to_string(file.size()) + " bytes");
    t.data = file.data() + offset;
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::string parse_shm_init_info(const nlohmann::ordered_json& init_info) {
  if (!init_info.is_object())
    throw_invalid_argument("field 'init_info' must be an object {\"path\": FILE}, got " + json_excerpt(init_info));
  for (const auto& [key, value] : init_info.items())
    if (key != "path")
      throw_invalid_argument("field 'init_info." + key + "' is not supported (the shm backend takes 'path')");
  if (!init_info.contains("path"))
    throw_invalid_argument("field 'init_info.path' is required: the file (e.g. under /dev/shm) the trainer writes");
  const std::string path = json_string(init_info["path"], "init_info.path");
  if (!std::filesystem::is_regular_file(path))
    throw_not_found("init_info.path: " + path + " is not a file the trainer has written (create it first)");
  return path;
}

SpillFile::SpillFile() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string pattern = dir;
  pattern.append("/ditto-weight-update-XXXXXX");
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) throw_error(ErrorCode::kInternal, dir + ": cannot create a spill file: " + std::strerror(errno));
  ::unlink(pattern.c_str());
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t SpillFile::append(const std::string& bytes) {
  const int64_t offset = (size_ + 63) / 64 * 64;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset) + done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_error(ErrorCode::kResourceExhausted,
                  "the weight update's spill file: " + std::string(std::strerror(errno)));
    }
    done += static_cast<size_t>(w);
  }
  size_ = offset + static_cast<int64_t>(bytes.size());
  return offset;
}

std::unique_ptr<MappedFile> SpillFile::map() const { return std::make_unique<MappedFile>(path_); }

}  // namespace ditto
