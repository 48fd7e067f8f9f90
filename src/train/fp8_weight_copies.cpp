// The FP8 copies of trained weights; see fp8_weight_copies.h.
#include "train/fp8_weight_copies.h"

#include "models/fp8_recipe.h"
#include "ops/fp8_tensor.h"

namespace surogate::train {

std::vector<Fp8WeightCopy> fp8_weight_copies(const compiler::ExecutionPlan& plan) {
  std::vector<Fp8WeightCopy> copies;
  for (const models::Fp8TrainedWeight& trained : models::fp8_trained_weights(plan.graph)) {
    Fp8WeightCopy copy{plan.tensor(trained.weight), plan.tensor(trained.codes), plan.tensor(trained.transposed),
                       plan.tensor(trained.scale_inv)};
    const graph::Shape& shape = plan.graph.tensor(copy.weight).type.shape;
    copy.rows = shape[0];
    copy.columns = shape[1];
    copies.push_back(copy);
  }
  return copies;
}

void refresh_fp8_weight_copies(runtime::CpuBackend& backend, std::span<const Fp8WeightCopy> copies) {
  for (const Fp8WeightCopy& copy : copies) {
    backend.view<float>(copy.scale_inv)[0] =
        ops::quantize_fp8_tensor(backend.view<float>(copy.weight).data(), copy.rows, copy.columns,
                                 backend.view<uint8_t>(copy.codes).data(), backend.view<uint8_t>(copy.transposed).data());
  }
}

}  // namespace surogate::train
