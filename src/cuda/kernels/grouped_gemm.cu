// CUTLASS SM90 grouped GEMMs for the experts; see grouped_gemm.h.
#include "cuda/kernels/grouped_gemm.h"

#include <cute/tensor.hpp>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include <vector>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"

namespace surogate::cuda {
namespace {

using namespace cute;
using Element = cutlass::bfloat16_t;
using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K) per expert
using ProblemSize = ProblemShape::UnderlyingProblemShape;

// Tiles: 128 × 128 × 64 bf16 tiles, one CTA per cluster, the cooperative (two consumer warp
// groups) persistent schedule; stage count from the shared memory the epilogue leaves.
constexpr int kAlignment = 8;  // elements of 16 bytes: TMA rows
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_1, _1, _1>;

// The epilogue (D = alpha·acc + beta·C, row-major bf16 C / D through pointer arrays) is shared by
// the three products. Everything is spelled at namespace scope, without templates of our own:
// nvcc 13's front end mis-emits CUTLASS's builders inside a class template for the host compiler.
using Epilogue = cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, cutlass::layout::RowMajor*, kAlignment,
    Element, cutlass::layout::RowMajor*, kAlignment, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
    cutlass::epilogue::fusion::LinearCombination<Element, float>>::CollectiveOp;
using Stages = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(Epilogue::SharedStorage))>;
using Schedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;

// y = x·Wᵀ: A = x rows (K-major), B = W_e [N, K] (K-major).
using ForwardMainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor*, kAlignment, Element,
    cutlass::layout::ColumnMajor*, kAlignment, float, TileShape, ClusterShape, Stages, Schedule>::CollectiveOp;
// dx = dy·W: B = W_e [K, N] (N-major).
using BackwardInputMainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor*, kAlignment, Element,
    cutlass::layout::RowMajor*, kAlignment, float, TileShape, ClusterShape, Stages, Schedule>::CollectiveOp;
// dW = dyᵀ·x: A = dy_e seen as [out, rows] (M-major), B = x_e [rows, in] (N-major).
using BackwardWeightMainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::ColumnMajor*, kAlignment, Element,
    cutlass::layout::RowMajor*, kAlignment, float, TileShape, ClusterShape, Stages, Schedule>::CollectiveOp;

using ForwardGemm = cutlass::gemm::device::GemmUniversalAdapter<
    cutlass::gemm::kernel::GemmUniversal<ProblemShape, ForwardMainloop, Epilogue>>;
using BackwardInputGemm = cutlass::gemm::device::GemmUniversalAdapter<
    cutlass::gemm::kernel::GemmUniversal<ProblemShape, BackwardInputMainloop, Epilogue>>;
using BackwardWeightGemm = cutlass::gemm::device::GemmUniversalAdapter<
    cutlass::gemm::kernel::GemmUniversal<ProblemShape, BackwardWeightMainloop, Epilogue>>;

// Per expert e with rows [offsets[e], offsets[e + 1]): the problem size and operand pointers.
__global__ void prepare_groups_kernel(GroupedGemmKind kind, const int32_t* offsets, int experts, int64_t out_features,
                                      int64_t in_features, const Element* first, const Element* second, Element* result,
                                      ProblemSize* sizes, const Element** a, const Element** b, const Element** c,
                                      Element** d) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= experts) return;
  const int64_t begin = offsets[e];
  const int rows = offsets[e + 1] - offsets[e];
  const int out = static_cast<int>(out_features), in = static_cast<int>(in_features);
  Element* target = nullptr;
  switch (kind) {
    case GroupedGemmKind::Forward:  // (rows, out, in)
      sizes[e] = rows == 0 ? ProblemSize{0, 0, 0} : ProblemSize{rows, out, in};
      a[e] = first + begin * in_features;
      b[e] = second + static_cast<int64_t>(e) * out_features * in_features;
      target = result + begin * out_features;
      break;
    case GroupedGemmKind::BackwardInput:  // (rows, in, out)
      sizes[e] = rows == 0 ? ProblemSize{0, 0, 0} : ProblemSize{rows, in, out};
      a[e] = first + begin * out_features;
      b[e] = second + static_cast<int64_t>(e) * out_features * in_features;
      target = result + begin * in_features;
      break;
    case GroupedGemmKind::BackwardWeight:  // (out, in, rows)
      sizes[e] = rows == 0 ? ProblemSize{0, 0, 0} : ProblemSize{out, in, rows};
      a[e] = first + begin * out_features;
      b[e] = second + begin * in_features;
      target = result + static_cast<int64_t>(e) * out_features * in_features;
      break;
  }
  c[e] = target;
  d[e] = target;
}

template <class Raw>
DeviceBuffer<std::byte> device_array(const std::vector<Raw>& host) {
  DeviceBuffer<std::byte> buffer(sizeof(Raw) * host.size());
  CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  return buffer;
}

}  // namespace

bool grouped_gemm_supported() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

struct GroupedGemm::Impl {
  GroupedGemmKind kind;
  int experts;
  int64_t out_features, in_features;
  bool accumulate;
  DeviceBuffer<std::byte> sizes, a, b, c, d, stride_a, stride_b, stride_c, stride_d, workspace;

  Impl(GroupedGemmKind kind, int experts, int64_t out, int64_t in, bool accumulate)
      : kind(kind), experts(experts), out_features(out), in_features(in), accumulate(accumulate),
        sizes(sizeof(ProblemSize) * experts), a(sizeof(void*) * experts), b(sizeof(void*) * experts),
        c(sizeof(void*) * experts), d(sizeof(void*) * experts) {}
  virtual ~Impl() = default;
  virtual void launch(cudaStream_t stream) = 0;
};

namespace {

template <class Gemm>
struct KernelImpl final : GroupedGemm::Impl {
  using StrideA = typename Gemm::GemmKernel::InternalStrideA;
  using StrideB = typename Gemm::GemmKernel::InternalStrideB;
  using StrideC = typename Gemm::GemmKernel::InternalStrideC;
  using StrideD = typename Gemm::GemmKernel::InternalStrideD;
  Gemm gemm;

  KernelImpl(GroupedGemmKind kind, int experts, int64_t out, int64_t in, bool accumulate)
      : Impl(kind, experts, out, in, accumulate) {
    // (M, N, K) of every non-empty expert but the rows; strides depend only on the fixed extents.
    int m = 1, n = 0, k = 0;
    switch (kind) {
      case GroupedGemmKind::Forward: n = static_cast<int>(out); k = static_cast<int>(in); break;
      case GroupedGemmKind::BackwardInput: n = static_cast<int>(in); k = static_cast<int>(out); break;
      case GroupedGemmKind::BackwardWeight: m = static_cast<int>(out); n = static_cast<int>(in); k = 1; break;
    }
    // The weight gradient's K (rows) varies, but A's and B's leading dimensions are out and in.
    std::vector<StrideA> strides_a(experts, cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}));
    std::vector<StrideB> strides_b(experts, cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1}));
    std::vector<StrideC> strides_c(experts, cutlass::make_cute_packed_stride(StrideC{}, {m, n, 1}));
    std::vector<StrideD> strides_d(experts, cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1}));
    stride_a = device_array(strides_a);
    stride_b = device_array(strides_b);
    stride_c = device_array(strides_c);
    stride_d = device_array(strides_d);

    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cutlass::KernelHardwareInfo hardware =
        cutlass::KernelHardwareInfo::make_kernel_hardware_info<typename Gemm::GemmKernel>(device);
    typename Gemm::Arguments arguments;
    decltype(arguments.epilogue.thread) fusion{};
    fusion.alpha = 1.0f;
    fusion.beta = accumulate ? 1.0f : 0.0f;
    fusion.alpha_ptr = nullptr;
    fusion.beta_ptr = nullptr;
    fusion.alpha_ptr_array = nullptr;
    fusion.beta_ptr_array = nullptr;
    fusion.dAlpha = {_0{}, _0{}, 0};
    fusion.dBeta = {_0{}, _0{}, 0};
    arguments = typename Gemm::Arguments{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {experts, reinterpret_cast<ProblemSize*>(sizes.data()), nullptr},  // sizes only on the device
        {reinterpret_cast<const Element**>(a.data()), reinterpret_cast<StrideA*>(stride_a.data()),
         reinterpret_cast<const Element**>(b.data()), reinterpret_cast<StrideB*>(stride_b.data())},
        {fusion, reinterpret_cast<const Element**>(c.data()), reinterpret_cast<StrideC*>(stride_c.data()),
         reinterpret_cast<Element**>(d.data()), reinterpret_cast<StrideD*>(stride_d.data())},
        hardware};
    workspace = DeviceBuffer<std::byte>(std::max<size_t>(Gemm::get_workspace_size(arguments), 1));
    if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) {
      fail_user("the grouped expert GEMM cannot run {} experts of [{} x {}] on this GPU (needs SM90 and sizes that are "
                "multiples of 8)", experts, out, in);
    }
    SUROGATE_CHECK(gemm.initialize(arguments, workspace.data()) == cutlass::Status::kSuccess,
                   "CUTLASS grouped GEMM initialisation failed");
    CUDA_CHECK(cudaDeviceSynchronize());  // bind time: the workspace is ready before any capture
  }

  void launch(cudaStream_t stream) override {
    SUROGATE_CHECK(gemm.run(stream) == cutlass::Status::kSuccess, "CUTLASS grouped GEMM launch failed");
    CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

GroupedGemm::GroupedGemm(GroupedGemmKind kind, int experts, int64_t out_features, int64_t in_features, bool accumulate) {
  SUROGATE_CHECK(experts > 0 && out_features % kAlignment == 0 && in_features % kAlignment == 0,
                 "grouped GEMM extents must be multiples of {}", kAlignment);
  switch (kind) {
    case GroupedGemmKind::Forward:
      impl_ = std::make_unique<KernelImpl<ForwardGemm>>(kind, experts, out_features, in_features, accumulate);
      break;
    case GroupedGemmKind::BackwardInput:
      impl_ = std::make_unique<KernelImpl<BackwardInputGemm>>(kind, experts, out_features, in_features, accumulate);
      break;
    case GroupedGemmKind::BackwardWeight:
      impl_ = std::make_unique<KernelImpl<BackwardWeightGemm>>(kind, experts, out_features, in_features, accumulate);
      break;
  }
}

GroupedGemm::~GroupedGemm() = default;

void GroupedGemm::run(const int32_t* offsets, const __nv_bfloat16* first, const __nv_bfloat16* second,
                      __nv_bfloat16* out, cudaStream_t stream) {
  Impl& impl = *impl_;
  if (impl.kind == GroupedGemmKind::BackwardWeight && !impl.accumulate) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(__nv_bfloat16) * impl.experts * impl.out_features * impl.in_features,
                               stream));
  }
  constexpr int kThreads = 128;
  prepare_groups_kernel<<<(impl.experts + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      impl.kind, offsets, impl.experts, impl.out_features, impl.in_features, reinterpret_cast<const Element*>(first),
      reinterpret_cast<const Element*>(second), reinterpret_cast<Element*>(out),
      reinterpret_cast<ProblemSize*>(impl.sizes.data()), reinterpret_cast<const Element**>(impl.a.data()),
      reinterpret_cast<const Element**>(impl.b.data()), reinterpret_cast<const Element**>(impl.c.data()),
      reinterpret_cast<Element**>(impl.d.data()));
  CUDA_CHECK_LAUNCH();
  impl.launch(stream);
}

}  // namespace surogate::cuda
