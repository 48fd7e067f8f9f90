// The gloo communicator; see gloo_communicator.h. Sums use gloo's ring all-reduce; reduce-scatter
// is one gloo reduce per piece (to its owner), all-gather gloo's allgatherv (pieces of any size),
// broadcast, barrier and all-to-all gloo's own; point-to-point transfers are gloo's unbound
// buffers, in slots of their own prefix (no gloo collective uses it). BF16 sums go through a reduction function that adds in fp32
// and rounds to nearest even.
#include "distributed/gloo_communicator.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "distributed/rank_failure.h"

namespace surogate::distributed {

namespace {

void sum_f32(void* out, const void* a, const void* b, size_t count) {
  float* o = static_cast<float*>(out);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = x[i] + y[i];
}

void sum_bf16(void* out, const void* a, const void* b, size_t count) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = float_to_bf16(bf16_to_float(x[i]) + bf16_to_float(y[i]));
}

// Non-negative floats by their bit patterns (quant::amax_max's order).
void max_amax(void* out, const void* a, const void* b, size_t count) {
  uint32_t* o = static_cast<uint32_t*>(out);
  const uint32_t* x = static_cast<const uint32_t*>(a);
  const uint32_t* y = static_cast<const uint32_t*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = x[i] >= y[i] ? x[i] : y[i];
}

// The slot of a point-to-point transfer: a prefix no gloo collective uses (theirs are 0x01–0x08),
// and the tag.
uint64_t point_to_point_slot(uint32_t tag) { return (uint64_t{0x50} << 56) | tag; }

gloo::AllreduceOptions::Func sum_function(DType dtype) {
  collective_element_bytes(dtype);
  return dtype == DType::F32 ? &sum_f32 : &sum_bf16;
}

// gloo's options are typed by element; F32 and BF16 both travel as their own bytes.
template <typename Options>
void set_output(Options& options, void* data, size_t count, DType dtype) {
  if (dtype == DType::F32) options.template setOutput<float>(static_cast<float*>(data), count);
  else options.template setOutput<uint16_t>(static_cast<uint16_t*>(data), count);
}

class GlooCommunicator final : public Communicator {
public:
  explicit GlooCommunicator(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}

  std::string_view name() const override { return "gloo"; }
  int rank() const override { return context_->rank; }
  int world_size() const override { return context_->size; }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    if (count == 0 || world_size() == 1) return;
    guarded("all-reduce", [&] {
      gloo::AllreduceOptions options(context_);
      set_output(options, data, count, dtype);
      options.setReduceFunction(sum_function(dtype));
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setTag(next_tag());
      gloo::allreduce(options);
    });
  }

  void all_reduce_amax(float* data, size_t count) override {
    if (count == 0 || world_size() == 1) return;
    guarded("all-reduce (max)", [&] {
      gloo::AllreduceOptions options(context_);
      options.setOutput<uint32_t>(reinterpret_cast<uint32_t*>(data), count);
      options.setReduceFunction(&max_amax);
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setTag(next_tag());
      gloo::allreduce(options);
    });
  }

  void reduce_scatter_sum(void* data, std::span<const size_t> piece_counts, DType dtype) override {
    check_pieces(piece_counts);
    if (world_size() == 1) return;
    const size_t element = collective_element_bytes(dtype);
    size_t offset = 0;
    for (int owner = 0; owner < world_size(); ++owner) {
      const size_t count = piece_counts[static_cast<size_t>(owner)];
      if (count > 0) {
        guarded("reduce-scatter", [&] {
          gloo::ReduceOptions options(context_);
          set_output(options, static_cast<std::byte*>(data) + offset * element, count, dtype);
          options.setRoot(owner);
          options.setReduceFunction(sum_function(dtype));
          options.setTag(next_tag());
          gloo::reduce(options);
        });
      }
      offset += count;
    }
  }

  void all_gather(void* data, std::span<const size_t> piece_counts, DType dtype) override {
    check_pieces(piece_counts);
    if (world_size() == 1) return;
    const size_t element = collective_element_bytes(dtype);
    size_t offset = 0, total = 0;
    for (int r = 0; r < world_size(); ++r) {
      if (r < rank()) offset += piece_counts[static_cast<size_t>(r)];
      total += piece_counts[static_cast<size_t>(r)];
    }
    if (total == 0) return;
    // allgatherv reads this rank's input while it writes the output: give it a copy of the piece.
    const size_t own = piece_counts[static_cast<size_t>(rank())];
    staging_.assign(static_cast<std::byte*>(data) + offset * element, static_cast<std::byte*>(data) + (offset + own) * element);
    guarded("all-gather", [&] {
      gloo::AllgathervOptions options(context_);
      std::vector<size_t> counts(piece_counts.begin(), piece_counts.end());
      if (dtype == DType::F32) {
        options.setInput<float>(reinterpret_cast<float*>(staging_.data()), own);
        options.setOutput<float>(static_cast<float*>(data), counts);
      } else {
        options.setInput<uint16_t>(reinterpret_cast<uint16_t*>(staging_.data()), own);
        options.setOutput<uint16_t>(static_cast<uint16_t*>(data), counts);
      }
      options.setTag(next_tag());
      gloo::allgatherv(options);
    });
  }

  void broadcast(void* data, size_t count, DType dtype, int root) override {
    SUROGATE_CHECK(root >= 0 && root < world_size(), "broadcast root is a rank of the world");
    if (count == 0 || world_size() == 1) return;
    guarded("broadcast", [&] {
      gloo::BroadcastOptions options(context_);
      set_output(options, data, count, dtype);
      options.setRoot(root);
      options.setTag(next_tag());
      gloo::broadcast(options);
    });
  }

  void barrier() override {
    if (world_size() == 1) return;
    guarded("barrier", [&] {
      gloo::BarrierOptions options(context_);
      options.setTag(next_tag());
      gloo::barrier(options);
    });
  }

  void all_to_all(const void* input, void* output, size_t chunk_count, DType dtype) override {
    const size_t bytes = chunk_count * collective_element_bytes(dtype) * static_cast<size_t>(world_size());
    if (bytes == 0) return;
    if (world_size() == 1) {
      std::memcpy(output, input, bytes);
      return;
    }
    guarded("all-to-all", [&] {
      gloo::AlltoallOptions options(context_);
      // Bytes travel as bytes: the exchange moves elements, it never adds them.
      options.setInput<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(input)), bytes);
      options.setOutput<uint8_t>(static_cast<uint8_t*>(output), bytes);
      options.setTag(next_tag());
      gloo::alltoall(options);
    });
  }

  void send(const void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    check_peer(peer);
    const size_t bytes = count * collective_element_bytes(dtype);
    if (bytes == 0) return;
    guarded("send", [&] {
      auto buffer = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
      buffer->send(peer, point_to_point_slot(tag));
      sends_.push_back(std::move(buffer));
    });
  }

  void receive(void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    check_peer(peer);
    const size_t bytes = count * collective_element_bytes(dtype);
    if (bytes == 0) return;
    guarded("receive", [&] {
      auto buffer = context_->createUnboundBuffer(data, bytes);
      buffer->recv(peer, point_to_point_slot(tag));
      buffer->waitRecv(context_->getTimeout());
    });
  }

  void wait_sends() override {
    guarded("send", [&] {
      for (auto& buffer : sends_) buffer->waitSend(context_->getTimeout());
    });
    sends_.clear();
  }

private:
  void check_peer(int peer) const {
    SUROGATE_CHECK(peer >= 0 && peer < world_size() && peer != rank(), "a point-to-point peer is another rank of the world");
  }
  void check_pieces(std::span<const size_t> piece_counts) const {
    SUROGATE_CHECK(piece_counts.size() == static_cast<size_t>(world_size()), "one piece per rank");
  }
  uint32_t next_tag() { return tag_++; }

  // gloo reports a peer that never arrives (or a broken connection) as an exception; it becomes
  // an error naming the collective and the rank.
  template <typename Body>
  void guarded(const char* what, Body&& body) {
    try {
      body();
    } catch (const std::exception& error) {
      throw RankFailure(fmt::format("rank {} of {}: the {} failed ({}); another rank stopped or is stuck (its own "
                                    "output says why)", rank(), world_size(), what, error.what()));
    }
  }

  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
  std::vector<std::byte> staging_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends_;  // posted, not yet waited for
};

}  // namespace

namespace {

// Joins each of this process's rank threads (global ranks first_rank + local) to its group's gloo
// context through `store`, with transports bound to `address`; a group of one needs no transport.
std::vector<std::unique_ptr<Communicator>> connect_groups(RankThreads& threads, gloo::rendezvous::Store& store,
                                                          const std::string& address, int first_rank,
                                                          const std::function<RankGroup(int)>& group_of,
                                                          std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<Communicator>> communicators(static_cast<size_t>(threads.world_size()));
  gloo::transport::tcp::attr attributes(address.c_str());
  threads.run([&](int local) {
    const RankGroup group = group_of(first_rank + local);
    SUROGATE_CHECK(group.size >= 1 && group.rank >= 0 && group.rank < group.size, "a rank lies in its group");
    if (group.size == 1) {
      communicators[static_cast<size_t>(local)] = std::make_unique<GlooCommunicator>(std::make_shared<gloo::Context>(0, 1));
      return;
    }
    gloo::rendezvous::PrefixStore prefixed(group.name, store);
    auto device = gloo::transport::tcp::CreateDevice(attributes);
    auto context = std::make_shared<gloo::rendezvous::Context>(group.rank, group.size);
    context->setTimeout(timeout);
    try {
      context->connectFullMesh(prefixed, device);
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& error) {
      throw RankFailure(fmt::format("rank {}: connecting to the other ranks of {} failed ({}); another process of the "
                                    "run stopped (its own output says why)", first_rank + local, group.name,
                                    error.what()));
    }
    // A task of this rank that throws closes its connections: its peers' pending and later
    // collectives fail at once (RankFailure) instead of at the timeout. The context may be gone.
    threads.on_failure(local, [weak = std::weak_ptr<gloo::rendezvous::Context>(context)](const std::exception_ptr&) {
      if (const auto alive = weak.lock()) {
        try {
          alive->closeConnections();
        } catch (...) {  // closing is best effort: the run is failing already
        }
      }
    });
    communicators[static_cast<size_t>(local)] = std::make_unique<GlooCommunicator>(std::move(context));
  });
  return communicators;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> connect_in_process_gloo(RankThreads& threads,
                                                                   std::chrono::milliseconds timeout) {
  gloo::rendezvous::HashStore store;
  const int world = threads.world_size();
  return connect_groups(threads, store, "127.0.0.1", 0, [&](int rank) { return RankGroup{"ranks", rank, world}; },
                        timeout);
}

std::vector<std::unique_ptr<Communicator>> connect_gloo(RankThreads& threads, ProcessWorld& world, int first_rank,
                                                        int world_size) {
  return connect_gloo_groups(threads, world, first_rank,
                             [&](int rank) { return RankGroup{"ranks", rank, world_size}; });
}

std::vector<std::unique_ptr<Communicator>> connect_gloo_groups(RankThreads& threads, ProcessWorld& world,
                                                               int first_rank,
                                                               const std::function<RankGroup(int)>& group_of) {
  if (world.alone()) {
    gloo::rendezvous::HashStore store;
    return connect_groups(threads, store, "127.0.0.1", first_rank, group_of, world.timeout());
  }
  return connect_groups(threads, *world.store(), world.transport_address(), first_rank, group_of, world.timeout());
}

}  // namespace surogate::distributed
