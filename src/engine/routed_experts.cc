#include "engine/routed_experts.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

namespace ditto {

void check_routed_experts_supported(const ModelConfig& config) {
  if (config.num_moe_layers() == 0)
    throw_invalid_field("enable_return_routed_experts", "enable_return_routed_experts: the model (" +
                                                            config.architecture +
                                                            ") has no MoE layers, so no router chooses experts");
  if (config.num_experts > std::numeric_limits<uint16_t>::max() + int64_t{1})
    throw_invalid_field("enable_return_routed_experts", "enable_return_routed_experts: num_experts " +
                                                            std::to_string(config.num_experts) +
                                                            " is more than the 65536 ids uint16 holds");
}

RoutedExpertsStore::RoutedExpertsStore(const ModelConfig& config, int64_t num_slots)
    : num_moe_layers_(config.num_moe_layers()),
      num_experts_per_tok_(config.num_experts_per_tok),
      num_experts_(config.num_experts) {
  check_routed_experts_supported(config);
  by_slot_.assign(static_cast<size_t>(num_slots * row_width()), 0);
}

void RoutedExpertsStore::record(std::span<const int64_t> slot_mapping, std::span<const int32_t> rows) {
  const auto width = static_cast<size_t>(row_width());
  DITTO_CHECK(rows.size() == slot_mapping.size() * width)
      << "routed experts of " << rows.size() / width << " tokens for " << slot_mapping.size() << " slots";
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const auto slot = static_cast<size_t>(slot_mapping[t]);
    DITTO_CHECK((slot + 1) * width <= by_slot_.size()) << "slot " << slot << " outside the store";
    std::transform(rows.begin() + static_cast<std::ptrdiff_t>(t * width),
                   rows.begin() + static_cast<std::ptrdiff_t>((t + 1) * width),
                   by_slot_.begin() + static_cast<std::ptrdiff_t>(slot * width),
                   [](int32_t e) { return static_cast<uint16_t>(e); });
  }
}

RoutedExperts RoutedExpertsStore::read(std::span<const int32_t> block_table, int64_t block_size,
                                       int64_t num_tokens) const {
  RoutedExperts r;
  r.num_tokens = std::clamp<int64_t>(num_tokens, 0, static_cast<int64_t>(block_table.size()) * block_size);
  r.num_moe_layers = num_moe_layers_;
  r.num_experts_per_tok = num_experts_per_tok_;
  r.num_experts = num_experts_;
  const auto width = static_cast<size_t>(row_width());
  r.expert_ids.resize(static_cast<size_t>(r.num_tokens) * width);
  for (int64_t p = 0; p < r.num_tokens; ++p) {
    const auto slot =
        static_cast<size_t>(block_table[static_cast<size_t>(p / block_size)] * block_size + p % block_size);
    std::copy_n(by_slot_.begin() + static_cast<std::ptrdiff_t>(slot * width), width,
                r.expert_ids.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(p) * width));
  }
  return r;
}

std::string routed_experts_npy(const RoutedExperts& r) {
  const bool narrow = r.num_experts <= 256;
  std::string header = std::string("{'descr': '") + (narrow ? "|u1" : "<u2") + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(r.num_tokens) + ", " + std::to_string(r.num_moe_layers) + ", " +
                       std::to_string(r.num_experts_per_tok) + "), }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64
  // bytes and ended by a newline
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (uint16_t e : r.expert_ids) {
    out += static_cast<char>(e & 0xff);
    if (!narrow) out += static_cast<char>(e >> 8);
  }
  return out;
}

}  // namespace ditto
