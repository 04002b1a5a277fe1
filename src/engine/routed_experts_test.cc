// RoutedExpertsStore: rows kept by KV slot and read back through a block table; the refusal of a
// model without MoE layers; the .npy bytes the server base64-encodes (header, dtype, C order).
#include "engine/routed_experts.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace ditto {
namespace {

ModelConfig moe_config(int64_t num_experts) {
  ModelConfig c;
  c.architecture = "Qwen3MoeForCausalLM";
  c.num_hidden_layers = 3;
  c.num_experts = num_experts;
  c.num_experts_per_tok = 2;
  c.mlp_only_layers = {1};  // layers 0 and 2 are sparse
  return c;
}

TEST(RoutedExpertsStore, RowsFollowTheirSlotsThroughTheBlockTable) {
  RoutedExpertsStore store(moe_config(8), /*num_slots=*/4 * 2);  // 4 blocks of 2
  ASSERT_EQ(store.row_width(), 4);                               // 2 MoE layers x top 2
  // Positions 0..2 of a sequence in blocks {3, 1}: slots 6, 7, 2.
  const std::vector<int64_t> slots = {6, 7, 2};
  const std::vector<int32_t> rows = {0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4};
  store.record(slots, rows);
  const std::vector<int32_t> table = {3, 1};
  const RoutedExperts r = store.read(table, /*block_size=*/2, /*num_tokens=*/3);
  EXPECT_EQ(r.num_tokens, 3);
  EXPECT_EQ(r.num_moe_layers, 2);
  EXPECT_EQ(r.num_experts_per_tok, 2);
  EXPECT_EQ(r.num_experts, 8);
  EXPECT_EQ(r.expert_ids, std::vector<uint16_t>({0, 1, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4}));
  // A later write to a slot (a rejected guess's, overwritten) wins; reads stop at the table's end.
  store.record(std::vector<int64_t>{7}, std::vector<int32_t>{1, 2, 3, 0});
  const RoutedExperts again = store.read(table, 2, /*num_tokens=*/10);
  EXPECT_EQ(again.num_tokens, 4);
  EXPECT_EQ(std::vector<uint16_t>(again.expert_ids.begin() + 4, again.expert_ids.begin() + 8),
            std::vector<uint16_t>({1, 2, 3, 0}));
}

TEST(RoutedExpertsStore, ADenseModelIsRefusedByName) {
  ModelConfig dense = moe_config(0);
  dense.architecture = "Qwen3ForCausalLM";
  try {
    RoutedExpertsStore store(dense, 16);
    FAIL() << "accepted a dense model";
  } catch (const Error& e) {
    EXPECT_EQ(e.param(), "enable_return_routed_experts");
    EXPECT_NE(std::string(e.what()).find("Qwen3ForCausalLM"), std::string::npos) << e.what();
  }
}

TEST(RoutedExpertsNpy, HeaderDtypeAndData) {
  RoutedExperts r;
  r.num_tokens = 2;
  r.num_moe_layers = 1;
  r.num_experts_per_tok = 2;
  r.num_experts = 128;
  r.expert_ids = {5, 1, 127, 0};
  const std::string npy = routed_experts_npy(r);
  ASSERT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(npy[8]) | static_cast<size_t>(static_cast<unsigned char>(npy[9]))
                                                                     << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = npy.substr(10, header_len);
  EXPECT_EQ(header.find("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1, 2), }"), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(npy.substr(10 + header_len), std::string("\x05\x01\x7f\x00", 4));
  r.num_experts = 512;  // more than uint8 holds: little-endian uint16
  r.expert_ids = {511, 1, 256, 0};
  const std::string wide = routed_experts_npy(r);
  EXPECT_NE(wide.find("'descr': '<u2'"), std::string::npos);
  EXPECT_EQ(wide.substr(wide.size() - 8), std::string("\xff\x01\x01\x00\x00\x01\x00\x00", 8));
}

}  // namespace
}  // namespace ditto
