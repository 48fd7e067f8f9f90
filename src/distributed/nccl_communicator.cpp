// The NCCL communicator; see nccl_communicator.h. Sums, reduce-scatter, all-gather and broadcast
// map to NCCL's collectives, in place. NCCL's reduce-scatter and all-gather take equal pieces:
// uneven pieces (whole-tensor shards) become one grouped call per owner (ncclReduce to the
// owner, ncclBroadcast from it), which is how NCCL expresses the "v" variants. All-to-all and the
// pipeline's point-to-point transfers are ncclSend / ncclRecv (grouped for the all-to-all), enqueued
// on the stream like the collectives: receive() returns once enqueued, and the stream's later work
// sees the data; wait_sends() has nothing to wait for on the host.
#include "distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "distributed/rank_failure.h"

namespace surogate::distributed {
namespace {

void check_nccl(ncclResult_t result, const char* what, int rank, int world) {
  if (result == ncclSuccess) return;
  throw std::runtime_error(fmt::format("rank {} of {}: NCCL {} failed: {}", rank, world, what, ncclGetErrorString(result)));
}

ncclDataType_t nccl_type(DType dtype) {
  collective_element_bytes(dtype);  // F32 or BF16
  return dtype == DType::F32 ? ncclFloat32 : ncclBfloat16;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, int device, cudaStream_t stream,
                   std::chrono::milliseconds timeout, std::shared_ptr<std::atomic<bool>> process_failed)
      : comm_(comm), rank_(rank), world_(world), device_(device), stream_(stream), timeout_(timeout),
        process_failed_(std::move(process_failed)) {
    CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr && failed_in_process()) {
      ncclCommAbort(comm_);  // its pending collectives may wait for a rank that is gone
      comm_ = nullptr;
    }
    if (comm_ != nullptr) cudaStreamSynchronize(stream_);
    cudaFree(scratch_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    if (count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclAllReduce(data, data, count, nccl_type(dtype), ncclSum, comm_, stream_), "all-reduce");
  }

  // Non-negative floats order as their bit patterns: NCCL's unsigned max is amax_max.
  void all_reduce_amax(float* data, size_t count) override {
    if (count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclAllReduce(data, data, count, ncclUint32, ncclMax, comm_, stream_), "all-reduce (max)");
  }

  void reduce_scatter_sum(void* data, std::span<const size_t> piece_counts, DType dtype) override {
    check_pieces(piece_counts);
    CUDA_CHECK(cudaSetDevice(device_));
    const size_t element = collective_element_bytes(dtype);
    if (equal(piece_counts)) {
      const size_t count = piece_counts[0];
      if (count == 0) return;
      std::byte* own = static_cast<std::byte*>(data) + static_cast<size_t>(rank_) * count * element;
      check(ncclReduceScatter(data, own, count, nccl_type(dtype), ncclSum, comm_, stream_), "reduce-scatter");
      return;
    }
    check(ncclGroupStart(), "group start");
    size_t offset = 0;
    for (int owner = 0; owner < world_; ++owner) {
      const size_t count = piece_counts[static_cast<size_t>(owner)];
      std::byte* piece = static_cast<std::byte*>(data) + offset * element;
      if (count > 0) check(ncclReduce(piece, piece, count, nccl_type(dtype), ncclSum, owner, comm_, stream_), "reduce-scatter");
      offset += count;
    }
    check(ncclGroupEnd(), "reduce-scatter");
  }

  void all_gather(void* data, std::span<const size_t> piece_counts, DType dtype) override {
    check_pieces(piece_counts);
    CUDA_CHECK(cudaSetDevice(device_));
    const size_t element = collective_element_bytes(dtype);
    if (equal(piece_counts)) {
      const size_t count = piece_counts[0];
      if (count == 0) return;
      const std::byte* own = static_cast<const std::byte*>(data) + static_cast<size_t>(rank_) * count * element;
      check(ncclAllGather(own, data, count, nccl_type(dtype), comm_, stream_), "all-gather");
      return;
    }
    check(ncclGroupStart(), "group start");
    size_t offset = 0;
    for (int owner = 0; owner < world_; ++owner) {
      const size_t count = piece_counts[static_cast<size_t>(owner)];
      std::byte* piece = static_cast<std::byte*>(data) + offset * element;
      if (count > 0) check(ncclBroadcast(piece, piece, count, nccl_type(dtype), owner, comm_, stream_), "all-gather");
      offset += count;
    }
    check(ncclGroupEnd(), "all-gather");
  }

  void broadcast(void* data, size_t count, DType dtype, int root) override {
    SUROGATE_CHECK(root >= 0 && root < world_, "broadcast root is a rank of the world");
    if (count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclBroadcast(data, data, count, nccl_type(dtype), root, comm_, stream_), "broadcast");
  }

  void barrier() override {
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    synchronize();
  }

  void all_to_all(const void* input, void* output, size_t chunk_count, DType dtype) override {
    if (chunk_count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    const size_t chunk_bytes = chunk_count * collective_element_bytes(dtype);
    check(ncclGroupStart(), "group start");
    for (int peer = 0; peer < world_; ++peer) {
      const std::byte* sent = static_cast<const std::byte*>(input) + static_cast<size_t>(peer) * chunk_bytes;
      std::byte* received = static_cast<std::byte*>(output) + static_cast<size_t>(peer) * chunk_bytes;
      check(ncclSend(sent, chunk_count, nccl_type(dtype), peer, comm_, stream_), "all-to-all");
      check(ncclRecv(received, chunk_count, nccl_type(dtype), peer, comm_, stream_), "all-to-all");
    }
    check(ncclGroupEnd(), "all-to-all");
  }

  // NCCL matches point-to-point calls by order between a pair of ranks, not by tag.
  void send(const void* data, size_t count, DType dtype, int peer, uint32_t /*tag*/) override {
    if (count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclSend(data, count, nccl_type(dtype), peer, comm_, stream_), "send");
  }
  void receive(void* data, size_t count, DType dtype, int peer, uint32_t /*tag*/) override {
    if (count == 0) return;
    CUDA_CHECK(cudaSetDevice(device_));
    check(ncclRecv(data, count, nccl_type(dtype), peer, comm_, stream_), "receive");
  }
  void wait_sends() override {}

  void synchronize() override {
    using Clock = std::chrono::steady_clock;
    CUDA_CHECK(cudaSetDevice(device_));
    SUROGATE_CHECK(comm_ != nullptr, "the communicator was aborted after a failure");
    const Clock::time_point deadline = Clock::now() + timeout_;
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) CUDA_CHECK(status);
      ncclResult_t asynchronous = ncclSuccess;
      ncclCommGetAsyncError(comm_, &asynchronous);
      if (asynchronous != ncclSuccess && asynchronous != ncclInProgress) {
        abort_after_failure(fmt::format("NCCL reported {}", ncclGetErrorString(asynchronous)));
      }
      if (Clock::now() > deadline) {
        abort_after_failure(fmt::format("nothing completed within {} s",
                          std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()));
      }
      if (failed_in_process()) abort_after_failure("another rank thread of this process failed");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

private:
  void check(ncclResult_t result, const char* what) const { check_nccl(result, what, rank_, world_); }
  bool failed_in_process() const { return process_failed_ != nullptr && process_failed_->load(); }
  [[noreturn]] void abort_after_failure(const std::string& reason) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw RankFailure(fmt::format("rank {} of {}: waiting for the GPU's collectives failed ({}); another rank stopped "
                                  "or is stuck (its own output says why)", rank_, world_, reason));
  }
  void check_pieces(std::span<const size_t> piece_counts) const {
    SUROGATE_CHECK(piece_counts.size() == static_cast<size_t>(world_), "one piece per rank");
  }
  static bool equal(std::span<const size_t> piece_counts) {
    for (size_t count : piece_counts) {
      if (count != piece_counts[0]) return false;
    }
    return true;
  }

  ncclComm_t comm_;
  int rank_, world_, device_;
  cudaStream_t stream_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<std::atomic<bool>> process_failed_;  // set by a failing rank thread of this process
  void* scratch_ = nullptr;
};

// The rank threads of one process connected by one call share a flag (connect_nccl's
// process_failed) that each thread's failure hook sets; called from the thread's task.
void share_failures(RankThreads& threads, int local, const std::shared_ptr<std::atomic<bool>>& failed) {
  threads.on_failure(local, [failed](const std::exception_ptr&) { failed->store(true); });
}

}  // namespace

NcclUniqueId make_nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "unique id", 0, 1);
  static_assert(sizeof(id) == sizeof(NcclUniqueId::bytes));
  NcclUniqueId result;
  std::memcpy(result.bytes.data(), &id, sizeof(id));
  return result;
}

std::unique_ptr<Communicator> connect_nccl(const NcclUniqueId& id, int rank, int world_size, int device, void* stream,
                                           std::chrono::milliseconds timeout,
                                           std::shared_ptr<std::atomic<bool>> process_failed) {
  CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.bytes.data(), sizeof(nccl_id));
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size, nccl_id, rank), "init", rank, world_size);
  return std::make_unique<NcclCommunicator>(comm, rank, world_size, device, static_cast<cudaStream_t>(stream), timeout,
                                            std::move(process_failed));
}

std::vector<std::unique_ptr<Communicator>> connect_in_process_nccl(RankThreads& threads, std::span<void* const> streams) {
  SUROGATE_CHECK(streams.size() == static_cast<size_t>(threads.world_size()), "one stream per rank");
  const NcclUniqueId id = make_nccl_unique_id();
  std::vector<std::unique_ptr<Communicator>> communicators(streams.size());
  const auto failed = std::make_shared<std::atomic<bool>>(false);
  threads.run([&](int rank) {
    communicators[static_cast<size_t>(rank)] = connect_nccl(id, rank, threads.world_size(), rank,
                                                            streams[static_cast<size_t>(rank)], std::chrono::minutes(10), failed);
    share_failures(threads, rank, failed);
  });
  return communicators;
}

std::vector<std::unique_ptr<Communicator>> connect_nccl_world(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                              int world_size, int first_device,
                                                              std::span<void* const> streams) {
  SUROGATE_CHECK(streams.size() == static_cast<size_t>(threads.world_size()), "one stream per rank");
  NcclUniqueId id;
  if (world.alone()) {
    id = make_nccl_unique_id();
  } else {
    const std::string made = world.leads() ? std::string(reinterpret_cast<const char*>(make_nccl_unique_id().bytes.data()),
                                                         sizeof(NcclUniqueId::bytes))
                                           : std::string();
    const std::string shared = world.broadcast(made);
    SUROGATE_CHECK(shared.size() == sizeof(NcclUniqueId::bytes), "rank 0 broadcasts a whole NCCL unique id");
    std::memcpy(id.bytes.data(), shared.data(), shared.size());
  }
  std::vector<std::unique_ptr<Communicator>> communicators(streams.size());
  const auto failed = std::make_shared<std::atomic<bool>>(false);
  threads.run([&](int local) {
    communicators[static_cast<size_t>(local)] =
        connect_nccl(id, first_rank + local, world_size, first_device + local, streams[static_cast<size_t>(local)],
                     world.timeout(), failed);
    share_failures(threads, local, failed);
  });
  return communicators;
}

std::vector<std::unique_ptr<Communicator>> connect_nccl_groups(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                               int world_size, int first_device,
                                                               std::span<void* const> streams,
                                                               const std::function<RankGroup(int)>& group_of) {
  SUROGATE_CHECK(streams.size() == static_cast<size_t>(threads.world_size()), "one stream per rank");
  // Every group of the world in rank order; the leader's ids, one per group, in that order.
  std::map<std::string, size_t> index;
  for (int rank = 0; rank < world_size; ++rank) index.try_emplace(group_of(rank).name, index.size());
  std::string ids(index.size() * sizeof(NcclUniqueId::bytes), '\0');
  if (world.leads()) {
    for (size_t group = 0; group < index.size(); ++group) {
      const NcclUniqueId id = make_nccl_unique_id();
      std::memcpy(ids.data() + group * sizeof(id.bytes), id.bytes.data(), sizeof(id.bytes));
    }
  }
  if (!world.alone()) ids = world.broadcast(ids);
  SUROGATE_CHECK(ids.size() == index.size() * sizeof(NcclUniqueId::bytes), "one NCCL unique id per group");
  std::vector<std::unique_ptr<Communicator>> communicators(streams.size());
  const auto failed = std::make_shared<std::atomic<bool>>(false);
  threads.run([&](int local) {
    const RankGroup group = group_of(first_rank + local);
    NcclUniqueId id;
    std::memcpy(id.bytes.data(), ids.data() + index.at(group.name) * sizeof(id.bytes), sizeof(id.bytes));
    communicators[static_cast<size_t>(local)] = connect_nccl(id, group.rank, group.size, first_device + local,
                                                             streams[static_cast<size_t>(local)], world.timeout(), failed);
    share_failures(threads, local, failed);
  });
  return communicators;
}

}  // namespace surogate::distributed
