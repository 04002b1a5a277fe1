// The MPI world of a tensor-parallel run (`mpirun -np N ditto … --tensor-parallel-size N`): one
// process per rank, on any number of hosts. Rank 0 drives (it owns the server or the caller, the
// tokenizer, the scheduler and the sampler) and sends the other ranks commands; every rank holds
// 1/N of the weights (model/causal_lm.h) and joins the collectives of each forward pass.
//
// Only bits move between ranks. The data path uses MPI_Allgather(v) and point-to-point messages
// (MPI_Send/MPI_Recv), never MPI_Allreduce or MPI_Reduce, whose algorithm and summation order vary
// with message size, rank count and implementation: no value is ever computed from parts that
// live on different ranks (docs/INVARIANCE.md, "Tensor parallelism").
//
// Faults: a rank that dies ends the job (mpirun stops every rank); an MPI call that fails prints
// which call and rank and calls MPI_Abort, so no rank waits forever for a peer that is gone. At
// start-up every rank's build version is compared (TensorParallelGroup::initialize).
//
// Thread-safety: one group per process. Rank 0 may call from any thread, one at a time: callers
// hold lock() across a command and the collectives that carry it out (MPI_THREAD_SERIALIZED).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace ditto {

// What rank 0 asks the other ranks to do (model/tensor_parallel_worker.h carries them out).
enum class TensorParallelCommand : int32_t {
  kLoadModel = 1,     // payload: model id, threads, model path
  kUnloadModel = 2,   // payload: model id
  kCreateCache = 3,   // payload: cache id, model id, num_blocks, block_size
  kFreeCache = 4,     // payload: cache id
  kForward = 5,       // payload: model id, cache id, the ForwardBatch's arrays
  kShutdown = 6,      // no payload: finalize and return
  kUpdateTensor = 7,  // payload: model id, a weight update's tensor (name, dtype, shape, bytes; model/weight_update.h)
};

// A command's payload: int64 values and byte strings appended in order and read back in that order.
class WireBuffer {
 public:
  WireBuffer() = default;
  explicit WireBuffer(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

  void put_i64(int64_t v);
  void put_bytes(const void* data, size_t size);  // a length, then the bytes
  template <typename T>
  void put_array(std::span<const T> v) {
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }

  // Throws Error(kInternal) when the buffer ends early: a message from a different build.
  int64_t get_i64();
  std::vector<uint8_t> get_bytes();
  template <typename T>
  std::vector<T> get_array() {
    const std::vector<uint8_t> b = get_bytes();
    std::vector<T> v(b.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
    return v;
  }
  std::string get_string();

  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  size_t read_ = 0;
};

class TensorParallelGroup {
 public:
  ~TensorParallelGroup();  // frees the shared buffers (collective: every rank, at shutdown)

  // Joins the MPI world as one of `size` ranks and checks that every rank runs the same ditto
  // build (version and wire protocol). size 1 returns nullptr and starts nothing. Idempotent for
  // the same size.
  // Throws Error(kInvalidArgument) when the process was not started by an MPI launcher (no
  // OMPI_COMM_WORLD_SIZE / PMI_SIZE in the environment: "launch with mpirun -np N"), when the
  // launcher started a different number of processes than `size`, when called again with another
  // size, or (on every rank) when the ranks' builds differ, naming each rank's version.
  static TensorParallelGroup* initialize(int size);
  // The group initialize() made, or nullptr (none, size 1, or after shutdown()).
  static TensorParallelGroup* current();
  // Rank 0: tells every other rank to stop; then every rank finalizes MPI. Idempotent; a no-op
  // without a group. Call after every model and KV cache is destroyed.
  static void shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Held by rank 0 across a command and its collectives.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  // Rank 0: sends `command` and its payload to every other rank, in rank order.
  void send_command(TensorParallelCommand command, const WireBuffer& payload);
  // Other ranks: waits for rank 0's next command (polling with short sleeps, so an idle rank does
  // not hold a core) and returns it with its payload.
  TensorParallelCommand receive_command(WireBuffer& payload);

  // recv [size · bytes] = every rank's send [bytes], in rank order (MPI_Allgather).
  void all_gather(const void* send, size_t bytes, void* recv);
  // recv = every rank's send, concatenated in rank order; bytes_per_rank[r] is what rank r sends
  // and must be the same on every rank (MPI_Allgatherv).
  void all_gather_v(const void* send, std::span<const size_t> bytes_per_rank, void* recv);
  // recv [rows, size · block_bytes] = every rank's send [rows, block_bytes] side by side, rank r's
  // in bytes [r · block_bytes, (r + 1) · block_bytes) of each row. When every rank runs on one host,
  // each rank writes its block into a shared buffer and, after every rank has, copies the whole out
  // (one copy in, one out); otherwise MPI_Allgather into a strided datatype puts the blocks in place.
  void all_gather_columns(const void* send, size_t rows, size_t block_bytes, void* recv);
  // Every rank's string, in rank order (two all-gathers: lengths, then the padded strings).
  std::vector<std::string> all_gather_strings(const std::string& mine);
  // Point to point, for the logits that only rank 0 needs.
  void send_to(int rank, const void* data, size_t bytes);
  void receive_from(int rank, void* data, size_t bytes);

  // Payload bytes this rank has received from other ranks in collectives and point-to-point
  // messages (commands excluded): the traffic docs/SCALING.md estimates.
  int64_t bytes_received() const { return bytes_received_; }
  // Prints "ditto: rank R: <why>; stopping every rank" to stderr and calls MPI_Abort.
  [[noreturn]] void abort(const std::string& why) const;

 private:
  TensorParallelGroup(int rank, int size) : rank_(rank), size_(size) {}

  // When every rank runs on this host: a shared-memory buffer (MPI-3 shared window) the column
  // gathers go through, unless DITTO_TP_SHARED_MEMORY=0. Collective.
  void open_shared_memory();
  // Grows the two shared buffers to at least `bytes` each (collective; every rank asks for the
  // same sizes in the same order, because every rank runs the same gathers).
  void reserve_shared(size_t bytes);
  // Every rank waits for every other (a one-byte all-gather: no reduction).
  void sync_ranks();

  int rank_;
  int size_;
  std::mutex mutex_;
  int64_t bytes_received_ = 0;
  bool shared_ = false;           // every rank on this host: gathers through shared memory
  void* shared_windows_[2] = {};  // MPI_Win, alternating between gathers
  uint8_t* shared_base_[2] = {};  // their memory, the same bytes on every rank
  size_t shared_capacity_ = 0;    // bytes of each
  int next_shared_ = 0;
};

// "ditto <version> (tensor-parallel protocol <n>)": what initialize() compares across ranks.
std::string tensor_parallel_build_id();

}  // namespace ditto
