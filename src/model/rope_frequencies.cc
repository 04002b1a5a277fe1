#include "model/rope_frequencies.h"

#include <cmath>
#include <numbers>

namespace ditto {

std::vector<double> rope_inv_freq(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / config.head_dim);
  if (!config.rope_scaling || config.rope_scaling->rope_type != "llama3") return inv_freq;

  const RopeScaling& s = *config.rope_scaling;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      f = f / s.factor;
    } else if (wavelen >= high_freq_wavelen) {  // the medium band: interpolate
      const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv_freq;
}

}  // namespace ditto
