// Finding a model on local disk from a directory or a Hugging Face hub id. Never uses the network.
#pragma once

#include <string>
#include <vector>

namespace ditto {

// The hub cache folders consulted for hub ids, in order, each once: $HF_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub (those whose variables are set).
// huggingface_hub itself uses only the first that is set; ditto also looks at the others.
std::vector<std::string> hub_cache_dirs();

// `model` is either a directory (returned as is) or a hub id "org/name", looked up in each of
// hub_cache_dirs() as models--org--name/snapshots/<revision>/, where <revision> is the commit in
// refs/main when that snapshot exists, else the only (or most recently modified) snapshot.
// Throws Error(kNotFound) listing every place it looked and how to get the model.
std::string resolve_model_path(const std::string& model);

}  // namespace ditto
