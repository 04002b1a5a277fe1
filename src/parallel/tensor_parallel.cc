#include "parallel/tensor_parallel.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/error.h"

namespace ditto {
namespace {

// Bumped whenever a command's payload changes.
constexpr int kProtocolVersion = 1;
constexpr int kCommandTag = 7001;
constexpr int kPayloadTag = 7002;
constexpr int kDataTag = 7003;

std::unique_ptr<TensorParallelGroup>& group_slot() {
  static std::unique_ptr<TensorParallelGroup> group;
  return group;
}
bool finalized = false;

// Stops every rank when an MPI call fails (the group's communicator returns errors instead of
// aborting inside MPI, so the message can name the call and the rank).
void check(int rc, const char* call, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  std::fprintf(stderr, "ditto: rank %d: %s failed: %.*s; stopping every rank\n", rank, call, length, text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

}  // namespace

void WireBuffer::put_i64(int64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  bytes_.insert(bytes_.end(), p, p + sizeof(v));
}

void WireBuffer::put_bytes(const void* data, size_t size) {
  put_i64(static_cast<int64_t>(size));
  const auto* p = static_cast<const uint8_t*>(data);
  if (size > 0) bytes_.insert(bytes_.end(), p, p + size);
}

int64_t WireBuffer::get_i64() {
  int64_t v = 0;
  if (read_ + sizeof(v) > bytes_.size()) throw_error(ErrorCode::kInternal, "tensor-parallel message ends early");
  std::memcpy(&v, bytes_.data() + read_, sizeof(v));
  read_ += sizeof(v);
  return v;
}

std::vector<uint8_t> WireBuffer::get_bytes() {
  const int64_t size = get_i64();
  if (size < 0 || read_ + static_cast<size_t>(size) > bytes_.size())
    throw_error(ErrorCode::kInternal, "tensor-parallel message ends early");
  std::vector<uint8_t> out(bytes_.begin() + static_cast<std::ptrdiff_t>(read_),
                           bytes_.begin() + static_cast<std::ptrdiff_t>(read_ + static_cast<size_t>(size)));
  read_ += static_cast<size_t>(size);
  return out;
}

std::string WireBuffer::get_string() {
  const std::vector<uint8_t> b = get_bytes();
  return std::string(b.begin(), b.end());
}

std::string tensor_parallel_build_id() {
  // A test hook: DITTO_TEST_BUILD_ID stands in for a rank running another build.
  if (const char* id = std::getenv("DITTO_TEST_BUILD_ID"); id != nullptr && *id != '\0') return id;
  return std::string("ditto ") + DITTO_VERSION + " (tensor-parallel protocol " + std::to_string(kProtocolVersion) + ")";
}

TensorParallelGroup* TensorParallelGroup::initialize(int size) {
  if (size < 1)
    throw_invalid_argument("tensor_parallel_size (--tensor-parallel-size) must be at least 1, got " +
                           std::to_string(size));
  std::unique_ptr<TensorParallelGroup>& slot = group_slot();
  if (slot) {
    if (slot->size() != size)
      throw_invalid_argument("tensor_parallel_size " + std::to_string(size) + " asked for, but this process already " +
                             "runs as one of " + std::to_string(slot->size()) + " ranks");
    return slot.get();
  }
  if (size == 1) return nullptr;
  if (finalized) throw_invalid_argument("the tensor-parallel group of this process has already shut down");
  if (!launched_by_mpi())
    throw_invalid_argument(
        "tensor_parallel_size (--tensor-parallel-size) " + std::to_string(size) + " needs " + std::to_string(size) +
        " processes, one per rank: launch the same command under `mpirun -np " + std::to_string(size) +
        "` (Open MPI), e.g. `mpirun -np " + std::to_string(size) + " ditto serve MODEL --tensor-parallel-size " +
        std::to_string(size) + "` or `mpirun -np " + std::to_string(size) + " python script.py`");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      finalized = true;
      throw_invalid_argument("the MPI library does not support MPI_THREAD_SERIALIZED");
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != size) {
    MPI_Finalize();
    finalized = true;
    throw_invalid_argument("--tensor-parallel-size is " + std::to_string(size) + " but mpirun started " +
                           std::to_string(world) + " processes; give both the same number");
  }
  slot.reset(new TensorParallelGroup(rank, size));
  slot->open_shared_memory();
  // Rank 0 releases the other ranks however its program ends normally (main's return, Python's
  // interpreter exit); shutting down earlier makes this a no-op.
  if (rank == 0) std::atexit([] { TensorParallelGroup::shutdown(); });
  const std::vector<std::string> builds = slot->all_gather_strings(tensor_parallel_build_id());
  std::string mismatch;
  for (int r = 0; r < size; ++r)
    if (builds[static_cast<size_t>(r)] != builds[0])
      mismatch += "; rank " + std::to_string(r) + " runs " + builds[static_cast<size_t>(r)];
  if (!mismatch.empty()) {
    slot.reset();
    MPI_Finalize();
    finalized = true;
    throw_invalid_argument("the ranks run different ditto builds: rank 0 runs " + builds[0] + mismatch +
                           "; install the same build on every host");
  }
  return slot.get();
}

TensorParallelGroup* TensorParallelGroup::current() { return group_slot().get(); }

void TensorParallelGroup::shutdown() {
  std::unique_ptr<TensorParallelGroup>& slot = group_slot();
  if (!slot) return;
  if (slot->rank() == 0) {
    auto lock = slot->lock();
    slot->send_command(TensorParallelCommand::kShutdown, WireBuffer());
  }
  slot.reset();
  MPI_Finalize();
  finalized = true;
}

void TensorParallelGroup::send_command(TensorParallelCommand command, const WireBuffer& payload) {
  DITTO_CHECK(rank_ == 0);
  const int64_t header[2] = {static_cast<int64_t>(command), static_cast<int64_t>(payload.bytes().size())};
  for (int r = 1; r < size_; ++r) {
    check(MPI_Send(header, 2, MPI_INT64_T, r, kCommandTag, MPI_COMM_WORLD), "MPI_Send (command)", rank_);
    if (header[1] > 0)
      check(MPI_Send(payload.bytes().data(), static_cast<int>(header[1]), MPI_BYTE, r, kPayloadTag, MPI_COMM_WORLD),
            "MPI_Send (command payload)", rank_);
  }
}

TensorParallelCommand TensorParallelGroup::receive_command(WireBuffer& payload) {
  DITTO_CHECK(rank_ != 0);
  int64_t header[2] = {0, 0};
  MPI_Request request;
  check(MPI_Irecv(header, 2, MPI_INT64_T, 0, kCommandTag, MPI_COMM_WORLD, &request), "MPI_Irecv (command)", rank_);
  // Spin briefly (decode steps follow each other closely), then sleep between polls so that an
  // idle rank leaves its core to others.
  const auto start = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test (command)", rank_);
    if (done) break;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    } else if (waited > std::chrono::microseconds(200)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(header[1]));
  if (header[1] > 0)
    check(MPI_Recv(bytes.data(), static_cast<int>(header[1]), MPI_BYTE, 0, kPayloadTag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv (command payload)", rank_);
  payload = WireBuffer(std::move(bytes));
  return static_cast<TensorParallelCommand>(header[0]);
}

void TensorParallelGroup::all_gather(const void* send, size_t bytes, void* recv) {
  DITTO_CHECK(bytes <= static_cast<size_t>(INT32_MAX)) << "all_gather of " << bytes << " bytes per rank";
  check(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgather", rank_);
  bytes_received_ += static_cast<int64_t>(bytes) * (size_ - 1);
}

TensorParallelGroup::~TensorParallelGroup() {
  for (void*& w : shared_windows_) {
    if (w == nullptr) continue;
    auto* win = static_cast<MPI_Win*>(w);
    MPI_Win_unlock_all(*win);
    MPI_Win_free(win);
    delete win;
    w = nullptr;
  }
}

void TensorParallelGroup::open_shared_memory() {
  const char* env = std::getenv("DITTO_TP_SHARED_MEMORY");
  if (env != nullptr && std::string(env) == "0") return;
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type",
        rank_);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  // Every rank decides alike: node_size is the world's size on every rank or on none.
  shared_ = node_size == size_;
}

void TensorParallelGroup::reserve_shared(size_t bytes) {
  if (bytes <= shared_capacity_) return;
  const size_t capacity = std::max(bytes, 2 * shared_capacity_);
  for (int i = 0; i < 2; ++i) {
    if (shared_windows_[i] != nullptr) {
      auto* old = static_cast<MPI_Win*>(shared_windows_[i]);
      MPI_Win_unlock_all(*old);
      check(MPI_Win_free(old), "MPI_Win_free", rank_);
      delete old;
    }
    auto* win = new MPI_Win;
    void* mine = nullptr;
    // Rank 0 holds the memory; every rank maps it.
    check(MPI_Win_allocate_shared(static_cast<MPI_Aint>(rank_ == 0 ? capacity : 0), 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                                  &mine, win),
          "MPI_Win_allocate_shared", rank_);
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    check(MPI_Win_shared_query(*win, 0, &size, &unit, &base), "MPI_Win_shared_query", rank_);
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, *win), "MPI_Win_lock_all", rank_);
    shared_windows_[i] = win;
    shared_base_[i] = static_cast<uint8_t*>(base);
  }
  shared_capacity_ = capacity;
}

void TensorParallelGroup::sync_ranks() {
  const uint8_t mine = 0;
  std::vector<uint8_t> all(static_cast<size_t>(size_));
  check(MPI_Allgather(&mine, 1, MPI_BYTE, all.data(), 1, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather (sync)", rank_);
}

void TensorParallelGroup::all_gather_columns(const void* send, size_t rows, size_t block_bytes, void* recv) {
  if (shared_) {
    // Two buffers in turn: a rank writes buffer b for gather k + 2 only after every rank has
    // reached gather k + 1, so after every rank has finished reading gather k from it.
    const size_t row_bytes = block_bytes * static_cast<size_t>(size_);
    reserve_shared(rows * row_bytes);
    const int b = next_shared_;
    next_shared_ ^= 1;
    uint8_t* all = shared_base_[b];
    auto* win = static_cast<MPI_Win*>(shared_windows_[b]);
    for (size_t t = 0; t < rows; ++t)
      std::memcpy(all + t * row_bytes + static_cast<size_t>(rank_) * block_bytes,
                  static_cast<const uint8_t*>(send) + t * block_bytes, block_bytes);
    MPI_Win_sync(*win);  // this rank's stores before the others read
    sync_ranks();
    MPI_Win_sync(*win);  // the others' stores visible here
    std::memcpy(recv, all, rows * row_bytes);
    bytes_received_ += static_cast<int64_t>(rows * block_bytes) * (size_ - 1);
    return;
  }
  DITTO_CHECK(rows * block_bytes <= static_cast<size_t>(INT32_MAX) &&
              block_bytes * static_cast<size_t>(size_) <= static_cast<size_t>(INT32_MAX));
  // Rank r's block: rows blocks of block_bytes, one row of the result apart; its extent is one
  // block, so MPI puts rank r's at byte r · block_bytes of the first row.
  MPI_Datatype strided = MPI_DATATYPE_NULL, placed = MPI_DATATYPE_NULL;
  check(MPI_Type_vector(static_cast<int>(rows), static_cast<int>(block_bytes), static_cast<int>(block_bytes) * size_,
                        MPI_BYTE, &strided),
        "MPI_Type_vector", rank_);
  check(MPI_Type_create_resized(strided, 0, static_cast<MPI_Aint>(block_bytes), &placed), "MPI_Type_create_resized",
        rank_);
  check(MPI_Type_commit(&placed), "MPI_Type_commit", rank_);
  check(MPI_Allgather(send, static_cast<int>(rows * block_bytes), MPI_BYTE, recv, 1, placed, MPI_COMM_WORLD),
        "MPI_Allgather", rank_);
  MPI_Type_free(&placed);
  MPI_Type_free(&strided);
  bytes_received_ += static_cast<int64_t>(rows * block_bytes) * (size_ - 1);
}

void TensorParallelGroup::all_gather_v(const void* send, std::span<const size_t> bytes_per_rank, void* recv) {
  DITTO_CHECK(static_cast<int>(bytes_per_rank.size()) == size_);
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  size_t offset = 0;
  for (int r = 0; r < size_; ++r) {
    DITTO_CHECK(offset + bytes_per_rank[static_cast<size_t>(r)] <= static_cast<size_t>(INT32_MAX));
    counts[static_cast<size_t>(r)] = static_cast<int>(bytes_per_rank[static_cast<size_t>(r)]);
    displs[static_cast<size_t>(r)] = static_cast<int>(offset);
    offset += bytes_per_rank[static_cast<size_t>(r)];
    if (r != rank_) bytes_received_ += static_cast<int64_t>(bytes_per_rank[static_cast<size_t>(r)]);
  }
  check(MPI_Allgatherv(send, counts[static_cast<size_t>(rank_)], MPI_BYTE, recv, counts.data(), displs.data(), MPI_BYTE,
                       MPI_COMM_WORLD),
        "MPI_Allgatherv", rank_);
}

std::vector<std::string> TensorParallelGroup::all_gather_strings(const std::string& mine) {
  const auto length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(size_));
  check(MPI_Allgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Allgather", rank_);
  std::vector<size_t> sizes(lengths.begin(), lengths.end());
  size_t total = 0;
  for (size_t s : sizes) total += s;
  std::string all(total, '\0');
  const int64_t before = bytes_received_;
  all_gather_v(mine.data(), sizes, all.data());
  bytes_received_ = before;  // control traffic, not the model's
  std::vector<std::string> out;
  size_t offset = 0;
  for (size_t s : sizes) {
    out.push_back(all.substr(offset, s));
    offset += s;
  }
  return out;
}

void TensorParallelGroup::send_to(int rank, const void* data, size_t bytes) {
  DITTO_CHECK(bytes <= static_cast<size_t>(INT32_MAX));
  check(MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, rank, kDataTag, MPI_COMM_WORLD), "MPI_Send", rank_);
}

void TensorParallelGroup::receive_from(int rank, void* data, size_t bytes) {
  DITTO_CHECK(bytes <= static_cast<size_t>(INT32_MAX));
  check(MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, rank, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv", rank_);
  bytes_received_ += static_cast<int64_t>(bytes);
}

void TensorParallelGroup::abort(const std::string& why) const {
  std::fprintf(stderr, "ditto: rank %d: %s; stopping every rank\n", rank_, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace ditto
