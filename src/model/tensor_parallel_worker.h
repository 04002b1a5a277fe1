// The ranks other than 0 of a tensor-parallel run: they load the shards rank 0 asks for, keep
// their KV caches, and join every forward pass rank 0 starts (model/causal_lm.h), until rank 0
// shuts the group down (parallel/tensor_parallel.h).
#pragma once

namespace ditto {

class TensorParallelGroup;

// What every command that runs a model does first: with tensor_parallel_size > 1 it joins the MPI
// world (TensorParallelGroup::initialize). On ranks other than 0 it then serves rank 0's commands
// until rank 0 shuts the group down, finalizes MPI and returns true: the command has nothing more
// to do there (it writes no output). On rank 0, and with tensor_parallel_size 1, it returns false.
// Throws as TensorParallelGroup::initialize.
bool serve_as_tensor_parallel_rank(int tensor_parallel_size);

// Serves rank 0's commands on this rank until kShutdown. A forward pass that fails stops every
// rank (TensorParallelGroup::abort); a shard that fails to load is reported to rank 0 (CausalLM::load).
void run_tensor_parallel_worker(TensorParallelGroup& group);

}  // namespace ditto
