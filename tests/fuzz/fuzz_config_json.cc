// config.json on arbitrary bytes: JSON parsing, then every key the loader reads (types, ranges,
// the architecture registry, rope scaling, MoE fields). Any input must load or throw ditto::Error.
#include <cstddef>
#include <cstdint>

#include "architecture/config.h"
#include "core/error.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ditto::fuzz::InputFile file;
  const std::string path = file.write(data, size);
  try {
    (void)ditto::load_model_config(path);
  } catch (const ditto::Error&) {
  }
  return 0;
}
