// Sequence parallelism's GPU pieces, on however many GPUs are visible:
//   - the CUDA binders of sequence_to_heads / heads_to_sequence (strided copies around the group's
//     all-to-all) against the CPU binders, both over a "mirror" group of N ranks in which every peer
//     sends back what this rank sends it (so one GPU exercises every pitch of N = 2 and 4), in F32
//     and BF16 (a permutation: bit for bit), and against the explicit Ulysses layout;
//   - NCCL's all-to-all on every visible GPU (a world of one on one GPU);
//   - with 2 GPUs or more, the two ops over a real NCCL sequence group: every token of a head group
//     lands on its rank, and heads_to_sequence gives each rank its slice back.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "cuda/cuda_check.h"
#include "distributed/nccl_communicator.h"
#include "distributed/sequence_exchange_cuda.h"
#include "distributed/sequence_exchange_ops.h"
#include "graph/builder.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"

namespace surogate::distributed {
namespace {

int visible_gpus() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Every peer of an N-rank group sends this rank back what it sends that peer (all ranks hold the
// same data): output chunk p = input chunk p. On the host or, with `device`, on the GPU.
class MirrorGroup final : public Communicator {
public:
  MirrorGroup(int ranks, bool device) : ranks_(ranks), device_(device) {}
  std::string_view name() const override { return "mirror"; }
  int rank() const override { return 0; }
  int world_size() const override { return ranks_; }
  void all_to_all(const void* input, void* output, size_t chunk_count, DType dtype) override {
    const size_t bytes = chunk_count * collective_element_bytes(dtype) * static_cast<size_t>(ranks_);
    if (device_) CUDA_CHECK(cudaMemcpy(output, input, bytes, cudaMemcpyDeviceToDevice));
    else std::memcpy(output, input, bytes);
  }
  void all_reduce_sum(void*, size_t, DType) override { unused(); }
  void all_reduce_amax(float*, size_t) override { unused(); }
  void reduce_scatter_sum(void*, std::span<const size_t>, DType) override { unused(); }
  void all_gather(void*, std::span<const size_t>, DType) override { unused(); }
  void broadcast(void*, size_t, DType, int) override { unused(); }
  void barrier() override { unused(); }
  void send(const void*, size_t, DType, int, uint32_t) override { unused(); }
  void receive(void*, size_t, DType, int, uint32_t) override { unused(); }
  void wait_sends() override {}

private:
  [[noreturn]] static void unused() { throw std::logic_error("not part of the exchange"); }
  int ranks_;
  bool device_;
};

struct ExchangeGraph {
  graph::OpRegistry registry;
  compiler::ExecutionPlan plan;
  graph::TensorId input = graph::kNoTensor, heads = graph::kNoTensor, back = graph::kNoTensor;
};

// x [B, T/N, H·D] → sequence_to_heads → heads_to_sequence, both outputs kept.
std::unique_ptr<ExchangeGraph> exchange_graph(int ranks, int64_t batch, int64_t local, int64_t heads, int64_t dim,
                                              DType dtype, Communicator* cpu_group) {
  auto result = std::make_unique<ExchangeGraph>();
  graph::register_core_ops(result->registry);
  register_sequence_exchange_ops(result->registry, cpu_group);
  graph::GraphBuilder b(result->registry);
  result->input = b.input("x", dtype, {batch, local, heads * dim});
  const nlohmann::json attrs{{"ranks", ranks}, {"heads", heads}, {"head_dim", dim}};
  result->heads = b.op(kSequenceToHeads, {result->input}, attrs, "heads");
  result->back = b.op(kHeadsToSequence, {result->heads}, attrs, "tokens");
  b.mark_output(result->heads);
  b.mark_output(result->back);
  result->plan = compiler::compile_forward(b.finish(), result->registry);
  return result;
}

TEST(SequenceExchangeCuda, CudaBindersEqualTheCpuOnesAndTheUlyssesLayout) {
  if (visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  CUDA_CHECK(cudaSetDevice(0));
  for (int ranks : {2, 4}) {
    const int64_t batch = 2, local = 5, heads = 2 * ranks, dim = 8, width = heads / ranks * dim;
    std::vector<float> x(static_cast<size_t>(batch * local * heads * dim));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 251) - 125.0f;  // exact in bf16
    // CPU reference.
    MirrorGroup host_group(ranks, false);
    auto cpu_graph = exchange_graph(ranks, batch, local, heads, dim, DType::F32, &host_group);
    runtime::CpuBackend cpu;
    cpu.load(cpu_graph->plan, cpu_graph->registry);
    const runtime::InputBinding cpu_input{cpu_graph->input, std::as_bytes(std::span<const float>(x))};
    cpu.execute(std::span<const runtime::InputBinding>(&cpu_input, 1));
    const std::span<float> expected_heads = cpu.view<float>(cpu_graph->heads);
    // The Ulysses layout: out[b, p·T/N + t, :] = x[b, t, p·w : (p+1)·w].
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t p = 0; p < ranks; ++p)
        for (int64_t t = 0; t < local; ++t)
          for (int64_t c = 0; c < width; ++c) {
            ASSERT_EQ(expected_heads[static_cast<size_t>(((b * ranks * local) + p * local + t) * width + c)],
                      x[static_cast<size_t>((b * local + t) * heads * dim + p * width + c)]);
          }
    EXPECT_EQ(std::vector<float>(cpu.view<float>(cpu_graph->back).begin(), cpu.view<float>(cpu_graph->back).end()), x);
    // The CUDA binders, F32 and BF16.
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(dtype_safetensors_name(dtype));
      MirrorGroup device_group(ranks, true);
      SequenceGroupSlot slot{&device_group};
      runtime::CudaOpTable table = runtime::builtin_cuda_ops();
      add_sequence_exchange_cuda_ops(table, &slot);
      auto cuda_graph = exchange_graph(ranks, batch, local, heads, dim, dtype, nullptr);
      runtime::CudaBackend backend(table);
      backend.load(cuda_graph->plan, cuda_graph->registry);
      std::vector<uint16_t> x16(x.size());
      for (size_t i = 0; i < x.size(); ++i) x16[i] = float_to_bf16(x[i]);
      const runtime::InputBinding input{cuda_graph->input, dtype == DType::F32 ? std::as_bytes(std::span<const float>(x))
                                                                               : std::as_bytes(std::span<const uint16_t>(x16))};
      backend.execute(std::span<const runtime::InputBinding>(&input, 1));
      for (auto [id, reference] : {std::pair{cuda_graph->heads, std::vector<float>(expected_heads.begin(), expected_heads.end())},
                                   std::pair{cuda_graph->back, x}}) {
        std::vector<float> values(reference.size());
        if (dtype == DType::F32) {
          backend.read(id, std::as_writable_bytes(std::span<float>(values)));
        } else {
          std::vector<uint16_t> raw(reference.size());
          backend.read(id, std::as_writable_bytes(std::span<uint16_t>(raw)));
          for (size_t i = 0; i < raw.size(); ++i) values[i] = bf16_to_float(raw[i]);
        }
        EXPECT_EQ(values, reference) << ranks << " ranks";
      }
    }
  }
}

// Every visible GPU joined as one group: sequence_to_heads then heads_to_sequence over NCCL.
TEST(SequenceExchangeCuda, ANcclGroupExchangesTokensForHeadsAndBack) {
  const int ranks = visible_gpus();
  if (ranks == 0) GTEST_SKIP() << "no GPU visible";
  RankThreads threads(ranks);
  std::vector<void*> streams(static_cast<size_t>(ranks));
  threads.run([&](int rank) {
    CUDA_CHECK(cudaSetDevice(rank));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    streams[static_cast<size_t>(rank)] = stream;
  });
  std::vector<std::unique_ptr<runtime::CudaBackend>> backends(static_cast<size_t>(ranks));
  std::vector<std::unique_ptr<ExchangeGraph>> graphs(static_cast<size_t>(ranks));
  std::vector<SequenceGroupSlot> slots(static_cast<size_t>(ranks));
  std::vector<runtime::CudaOpTable> tables(static_cast<size_t>(ranks), runtime::builtin_cuda_ops());
  const int64_t batch = 2, local = 3, heads = 2 * ranks, dim = 4, tokens = local * ranks;
  auto value = [&](int64_t b, int64_t t, int64_t h, int64_t d) { return static_cast<float>(((b * tokens + t) * heads + h) * dim + d); };
  threads.run([&](int rank) {
    CUDA_CHECK(cudaSetDevice(rank));
    add_sequence_exchange_cuda_ops(tables[static_cast<size_t>(rank)], &slots[static_cast<size_t>(rank)]);
    graphs[static_cast<size_t>(rank)] = exchange_graph(ranks, batch, local, heads, dim, DType::F32, nullptr);
    // The backend's stream is its own: the group is joined on it below.
    backends[static_cast<size_t>(rank)] = std::make_unique<runtime::CudaBackend>(tables[static_cast<size_t>(rank)]);
    backends[static_cast<size_t>(rank)]->load(graphs[static_cast<size_t>(rank)]->plan, graphs[static_cast<size_t>(rank)]->registry);
    streams[static_cast<size_t>(rank)] = backends[static_cast<size_t>(rank)]->stream();
  });
  std::unique_ptr<ProcessWorld> alone = ProcessWorld::single();
  auto groups = connect_nccl_groups(threads, *alone, 0, ranks, 0, streams,
                                    [&](int rank) { return RankGroup{"sequence", rank, ranks}; });
  for (int rank = 0; rank < ranks; ++rank) slots[static_cast<size_t>(rank)].communicator = groups[static_cast<size_t>(rank)].get();
  std::vector<std::vector<float>> slices(static_cast<size_t>(ranks)), gathered(static_cast<size_t>(ranks)),
      back(static_cast<size_t>(ranks));
  threads.run([&](int rank) {
    CUDA_CHECK(cudaSetDevice(rank));
    std::vector<float>& slice = slices[static_cast<size_t>(rank)];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < local; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < dim; ++d) slice.push_back(value(b, rank * local + t, h, d));
    const ExchangeGraph& graph = *graphs[static_cast<size_t>(rank)];
    const runtime::InputBinding input{graph.input, std::as_bytes(std::span<const float>(slice))};
    backends[static_cast<size_t>(rank)]->execute(std::span<const runtime::InputBinding>(&input, 1));
    gathered[static_cast<size_t>(rank)].resize(static_cast<size_t>(batch * tokens * (heads / ranks) * dim));
    back[static_cast<size_t>(rank)].resize(slice.size());
    backends[static_cast<size_t>(rank)]->read(graph.heads, std::as_writable_bytes(std::span<float>(gathered[static_cast<size_t>(rank)])));
    backends[static_cast<size_t>(rank)]->read(graph.back, std::as_writable_bytes(std::span<float>(back[static_cast<size_t>(rank)])));
  });
  const int64_t group = heads / ranks;
  for (int rank = 0; rank < ranks; ++rank) {
    size_t at = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < group; ++h)
          for (int64_t d = 0; d < dim; ++d) ASSERT_EQ(gathered[static_cast<size_t>(rank)][at++], value(b, t, rank * group + h, d));
    EXPECT_EQ(back[static_cast<size_t>(rank)], slices[static_cast<size_t>(rank)]) << "rank " << rank;
  }
  threads.run([&](int rank) {
    CUDA_CHECK(cudaSetDevice(rank));
    groups[static_cast<size_t>(rank)].reset();
    backends[static_cast<size_t>(rank)].reset();
  });
}

}  // namespace
}  // namespace surogate::distributed
