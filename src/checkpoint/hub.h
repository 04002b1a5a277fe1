// Finding a model on local disk from a directory or a Hugging Face hub id. Never uses the network.
#pragma once

#include <string>
#include <vector>

namespace ditto {

// The hub cache folder, chosen as huggingface_hub does: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. One element, or none when no
// variable is set.
std::vector<std::string> hub_cache_dirs();

// `model` is either a directory or a GGUF file (returned as is) or a hub id "org/name", looked up in the hub
// cache as models--org--name/snapshots/<revision>/, where <revision> is the commit in refs/main,
// or, without refs/main, the only snapshot.
// Throws Error(kNotFound) saying where it looked and how to get the model, or when refs/main
// names a snapshot that is not there; Error(kInvalidArgument) when `model` is a file other than a
// GGUF file (checkpoint/gguf_reader.h is_gguf_file), refs/main
// is not a plain revision name, or several snapshots exist without refs/main.
std::string resolve_model_path(const std::string& model);

}  // namespace ditto
