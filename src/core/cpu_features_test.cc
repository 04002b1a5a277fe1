#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace ditto {
namespace {

// A fake CPU: AVX2 machine without AVX-512 (e.g. Intel client cores since Alder Lake, AMD Zen 3).
bool avx2_only(std::string_view f) { return f == "avx2" || f == "fma" || f == "f16c"; }
bool nothing(std::string_view) { return false; }
bool everything(std::string_view) { return true; }

TEST(CpuFeaturesTest, MissingFeatureIsNamedForAFakeCpu) {
  EXPECT_EQ(detail::missing_feature(Isa::kScalar, nothing), nullptr);
  EXPECT_STREQ(detail::missing_feature(Isa::kAvx2, nothing), "avx2");
  EXPECT_EQ(detail::missing_feature(Isa::kAvx2, avx2_only), nullptr);
  EXPECT_STREQ(detail::missing_feature(Isa::kAvx512, avx2_only), "avx512f");
  EXPECT_EQ(detail::missing_feature(Isa::kAvx512, everything), nullptr);
}

TEST(CpuFeaturesTest, Avx512OnACpuWithoutItIsAClearErrorNotSigill) {
  EXPECT_EQ(detail::unsupported_message(Isa::kAvx512, "DITTO_ISA", avx2_only),
            "DITTO_ISA=avx512: this CPU cannot run that path (it lacks avx512f); use one of: scalar, avx2");
  EXPECT_EQ(detail::unsupported_message(Isa::kAvx2, "DITTO_ISA", nothing),
            "DITTO_ISA=avx2: this CPU cannot run that path (it lacks avx2); use one of: scalar");
  EXPECT_EQ(detail::unsupported_message(Isa::kAvx2, "DITTO_ISA", avx2_only), "");
}

TEST(CpuFeaturesTest, ParseIsaNamesTheBadValue) {
  EXPECT_EQ(parse_isa("scalar", "x"), Isa::kScalar);
  EXPECT_EQ(parse_isa("avx2", "x"), Isa::kAvx2);
  EXPECT_EQ(parse_isa("avx512", "x"), Isa::kAvx512);
  try {
    parse_isa("AVX512", "DITTO_ISA");
    FAIL() << "accepted AVX512";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("DITTO_ISA='AVX512'"), std::string::npos) << e.what();
  }
}

TEST(CpuFeaturesTest, DetectedPathIsSupportedAndScopedIsaRestores) {
  const Isa detected = detect_isa();
  EXPECT_TRUE(cpu_supports(detected));
  EXPECT_TRUE(cpu_supports(Isa::kScalar));
  const Isa before = active_isa();
  {
    ScopedIsa s(Isa::kScalar);
    EXPECT_EQ(active_isa(), Isa::kScalar);
  }
  EXPECT_EQ(active_isa(), before);
  if (!cpu_supports(Isa::kAvx512)) {
    EXPECT_THROW(set_active_isa(Isa::kAvx512), Error);
    EXPECT_EQ(active_isa(), before);
  }
}

}  // namespace
}  // namespace ditto
