// The safetensors reader on arbitrary bytes: the 8-byte header length, the JSON header, tensor
// entries (dtype, shape, offsets) and their bounds. Any input must either load or throw
// ditto::Error; a crash, a leak or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ditto::fuzz::InputFile file;
  const std::string path = file.write(data, size);
  try {
    const ditto::SafetensorsFile f(path);
    int64_t total = 0;
    for (const ditto::TensorInfo& t : f.tensors()) total += t.numel();  // every entry's numbers usable
    (void)total;
  } catch (const ditto::Error&) {
  }
  return 0;
}
