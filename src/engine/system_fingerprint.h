// What identifies the bits an engine gives: OpenAI's `system_fingerprint` ("fp_" + 16 hex
// digits). Two answers to the same request from engines with the same fingerprint are the same
// bits; a different fingerprint means they may differ. It covers the weights (a content hash of
// the model's weight files), the numerics version (core/numerics_version.h) and the instruction-set
// class that gives the same bits — one class for every ISA, since ditto's scalar, AVX2 and AVX-512
// paths give identical bits (docs/INVARIANCE.md, row 7). Thread count, batch, tensor-parallel size
// and the other rows of that table are not part of it: they change no bit.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/weight_update.h"

namespace ditto {

// XXH3-64 over the model's weight files, read once front to back (cost: one pass over the
// weights, ~0.1 s per GB from the page cache; README, "The server", gives a measurement). A GGUF
// file is hashed whole (its metadata holds the tokenizer and chat template, so those count too); a
// directory hashes its *.safetensors files in name order, each preceded by its name and size, so
// re-sharding the same tensors changes the hash. Throws Error(kNotFound) naming the path when a
// directory holds no .safetensors file, and Error(kInternal) naming the file when one cannot be read.
uint64_t hash_weight_files(const std::string& model_path);

// The weights hash after an update in place (model/weight_update.h): XXH3-64 over `weights_hash`
// (the hash before it) and each updated tensor in name order (its name, dtype, shape and bytes), so
// the same weights updated with the same tensors give the same hash, whatever the chunking. It is
// not the hash of files holding the new weights (nothing was written): an updated engine and a
// fresh one loaded with the same weights give the same bits under different fingerprints, which
// the fingerprint's promise allows (a different fingerprint means the bits *may* differ).
uint64_t hash_weight_update(uint64_t weights_hash, const std::map<std::string, WeightTensor>& tensors);

// "fp_" + 16 lower-case hex digits: XXH3-64 of (weights_hash, kNumericsVersion, the ISA class).
std::string system_fingerprint(uint64_t weights_hash);

}  // namespace ditto
