// Embedding lookup (embedding.h): out[t, :] = table[token_ids[t], :] converted exactly to float32,
// read from the packed layout; out-of-range ids throw Error(kInvalidArgument) naming the id.
#include "kernels/embedding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;
using test::StoredMatrix;

PackedMatrix pack_one(const StoredMatrix& w) {
  const MatrixSource src = w.source();
  return pack_matrix({&src, 1});
}

TEST(EmbeddingTest, RowsEqualStoredValuesExactly) {
  Rng rng(50);
  for (DType dtype : test::kAllDTypes) {
    for (int64_t vocab : {1, 17, 100}) {
      const int64_t hidden = 37;
      const StoredMatrix table = test::random_matrix(rng, dtype, vocab, hidden);
      const PackedMatrix packed = pack_one(table);
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < vocab; ++id) ids.push_back(id);
      ids.push_back(static_cast<int32_t>(vocab - 1));
      ids.push_back(0);
      std::vector<float> out(ids.size() * hidden);
      embedding(packed, ids.data(), static_cast<int64_t>(ids.size()), out.data());
      for (size_t t = 0; t < ids.size(); ++t)
        for (int64_t c = 0; c < hidden; ++c)
          ASSERT_EQ(static_cast<double>(out[t * hidden + c]), table.at(ids[t], c))
              << test::dtype_label(dtype) << " id " << ids[t] << " column " << c;
    }
  }
}

TEST(EmbeddingTest, RowAloneEqualsRowInsideRandomBatches) {
  Rng rng(51);
  const int64_t vocab = 1000;
  const int64_t hidden = 64;
  for (DType dtype : test::kAllDTypes) {
    const PackedMatrix packed = pack_one(test::random_matrix(rng, dtype, vocab, hidden));
    for (int trial = 0; trial < 20; ++trial) {
      const int32_t id0 = static_cast<int32_t>(rng.uniform_int(0, vocab - 1));
      std::vector<float> out0(static_cast<size_t>(hidden));
      embedding(packed, &id0, 1, out0.data());
      const int64_t num_tokens = rng.uniform_int(1, 70);
      const int64_t index = rng.uniform_int(0, num_tokens - 1);
      std::vector<int32_t> ids(static_cast<size_t>(num_tokens));
      for (int32_t& id : ids) id = static_cast<int32_t>(rng.uniform_int(0, vocab - 1));
      ids[index] = id0;
      std::vector<float> out(static_cast<size_t>(num_tokens * hidden));
      embedding(packed, ids.data(), num_tokens, out.data());
      ASSERT_TRUE(BitsEqual(out0.data(), out.data() + index * hidden, hidden))
          << test::dtype_label(dtype) << " batch " << num_tokens << " index " << index;
    }
  }
}

TEST(EmbeddingTest, RejectsOutOfRangeIdsNamingTheId) {
  Rng rng(52);
  const int64_t vocab = 50;
  const PackedMatrix packed = pack_one(test::random_matrix(rng, DType::kBF16, vocab, 8));
  for (int32_t bad : {-1, 50, 51, 123456, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()}) {
    // The bad id sits in the middle of otherwise valid ids.
    const int32_t ids[] = {0, 7, bad, 49};
    std::vector<float> out(4 * 8);
    try {
      embedding(packed, ids, 4, out.data());
      ADD_FAILURE() << "embedding accepted token id " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find(std::to_string(bad)), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(vocab)), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace ditto
