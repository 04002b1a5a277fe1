#include "kernels/embedding.h"

#include <string>

#include "core/error.h"

namespace ditto {

void embedding(const PackedMatrix& table, const int32_t* token_ids, int64_t num_tokens, float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int32_t id = token_ids[t];
    if (id < 0 || id >= table.n)
      throw_invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(table.n) + ")");
    table.row_to_f32(id, out + t * table.k);
  }
}

}  // namespace ditto
