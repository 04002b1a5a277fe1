// DITTO_PORTABLE_HOT: the portable path's innermost loops, compiled twice on x86-64 (GCC, clang).
//
// The portable path (DITTO_ISA=scalar, and every CPU without AVX2) is the definition of ditto's
// numerics: plain C++ whose every multiply-add is an explicit std::fma. Compiled for the x86-64
// baseline, which has no FMA instruction, each std::fma is a call into libm (about 7 ns on an AMD
// Zen 3): the portable path ran 37x (decode) to 141x (prefill) slower than the AVX2 path there,
// and every test that compares it with the vector paths paid for it. A function marked with this
// attribute is compiled once more for x86-64-v3 (AVX2, FMA, F16C) and the dynamic loader picks the
// clone the CPU can run (GCC and clang function multiversioning, an ifunc resolved once per process).
//
// Same source, same bits: the clone runs the same IEEE operations in the same order — std::fma
// rounds once on either side, -ffp-contract=off forbids any other fusion, and the compiler may only
// vectorise across independent lanes (docs/NUMERICS.md, "The portable path").
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)  // GCC, and clang (which defines __GNUC__ too)
#define DITTO_PORTABLE_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DITTO_PORTABLE_HOT
#endif
