// Embedding lookup: out[t, :] = table[token_ids[t], :] converted exactly to float32.
// Reads the packed layout, so a tied lm_head and the embedding share one copy of the weights.
#pragma once

#include <cstdint>

#include "kernels/packed_matrix.h"

namespace ditto {

// token_ids: [num_tokens] in [0, table.n) — anything else throws Error(kInvalidArgument) naming
// the token id and the vocabulary size. out: [num_tokens, table.k] f32.
void embedding(const PackedMatrix& table, const int32_t* token_ids, int64_t num_tokens, float* out);

}  // namespace ditto
