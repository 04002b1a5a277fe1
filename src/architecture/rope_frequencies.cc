#include "architecture/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace ditto {
namespace {

// θ_i = base^(−2i / head_dim).
double base_inv_freq(double base, int64_t head_dim, int64_t i) {
  return 1.0 / std::pow(base, static_cast<double>(2 * i) / head_dim);
}

double base_inv_freq(const ModelConfig& config, int64_t i) {
  return base_inv_freq(config.rope_theta, config.head_dim, i);
}

// Where llama3 scaling puts a frequency: its wavelength against the old context's bands, and for
// the medium band how far it is from the low-frequency end (0) to the high (1).
struct Llama3Band {
  enum Kind { kHighFrequency, kLowFrequency, kMedium } kind;
  double smooth = 0;  // kMedium only
};

Llama3Band llama3_band(double inv_freq, const RopeScaling& s) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / inv_freq;
  if (wavelen > low_freq_wavelen) return {.kind = Llama3Band::kLowFrequency};
  if (wavelen < high_freq_wavelen) return {.kind = Llama3Band::kHighFrequency};
  return {.kind = Llama3Band::kMedium,
          .smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)};
}

}  // namespace

std::vector<double> rope_inv_freq(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = base_inv_freq(config, i);
  if (!config.rope_freq_divisors.empty()) {
    DITTO_CHECK(config.rope_freq_divisors.size() == inv_freq.size());
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] /= config.rope_freq_divisors[i];
    return inv_freq;
  }
  if (!config.rope_scaling || config.rope_scaling->rope_type != "llama3") return inv_freq;

  const RopeScaling& s = *config.rope_scaling;
  for (double& f : inv_freq) {
    const Llama3Band band = llama3_band(f, s);
    if (band.kind == Llama3Band::kLowFrequency) {
      f = f / s.factor;
    } else if (band.kind == Llama3Band::kMedium) {  // interpolate
      f = (1.0 - band.smooth) * f / s.factor + band.smooth * f;
    }
  }
  return inv_freq;
}

std::vector<double> rope_local_inv_freq(const ModelConfig& config) {
  DITTO_CHECK(config.rope_local_base_freq > 0);
  std::vector<double> inv_freq(static_cast<size_t>(config.head_dim / 2));
  for (int64_t i = 0; i < config.head_dim / 2; ++i)
    inv_freq[static_cast<size_t>(i)] = base_inv_freq(config.rope_local_base_freq, config.head_dim, i);
  return inv_freq;
}

std::vector<float> llama3_rope_freq_divisors(const ModelConfig& config) {
  DITTO_CHECK(config.rope_scaling.has_value());
  const RopeScaling& s = *config.rope_scaling;
  std::vector<float> divisors;
  for (int64_t i = 0; i < config.head_dim / 2; ++i) {
    const Llama3Band band = llama3_band(base_inv_freq(config, i), s);
    switch (band.kind) {
      case Llama3Band::kHighFrequency: divisors.push_back(1.0f); break;
      case Llama3Band::kLowFrequency: divisors.push_back(static_cast<float>(s.factor)); break;
      case Llama3Band::kMedium:
        divisors.push_back(static_cast<float>(1.0 / ((1 - band.smooth) / s.factor + band.smooth)));
        break;
    }
  }
  return divisors;
}

}  // namespace ditto
