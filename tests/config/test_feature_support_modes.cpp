// The feature-support rows of the training modes (`surogate dpo` with its losses and kto,
// `surogate grpo`): one case per row, run by test_feature_support.cpp's table tests.
#include <functional>
#include <vector>

#include "config/feature_support.h"
#include "feature_support_cases.h"

namespace surogate::feature_support_test {
namespace {

// `surogate dpo` with loss.type kto on a dataset of `type`, on the CPU backend.
void kto_run(Config& c, RunShape& s, DatasetType type) {
  c.loss.preference = true;
  c.loss.type = "kto";
  c.data.datasets[0].type = type;
  s = cpu();
}

// A GRPO case of the Backend stage: make_grpo, then `set`, on the CPU.
std::function<void(Config&, RunShape&)> grpo_case(std::function<void(Config&)> set) {
  return [set](Config& c, RunShape& s) {
    make_grpo(c);
    set(c);
    s = cpu();
  };
}

}  // namespace

std::vector<RowCase> training_mode_row_cases() {
  using S = SupportStage;
  return {
      {"kto with one row per micro-batch", S::Backend,
       [](Config& c, RunShape& s) {
         kto_run(c, s, DatasetType::Kto);
         c.schedule.per_device_train_batch_size = 1;
       },
       "option 'per_device_train_batch_size' must be at least 2 for loss.type kto"},
      {"kto on other datasets", S::Backend, [](Config& c, RunShape& s) { kto_run(c, s, DatasetType::Preference); },
       "must all be type: kto for `surogate dpo` with loss.type kto"},
      {"kto reference_free", S::Backend,
       [](Config& c, RunShape& s) {
         kto_run(c, s, DatasetType::Kto);
         c.loss.reference_free = true;
       },
       "option 'loss.reference_free' does not apply to loss.type kto"},
      {"preference datasets outside surogate dpo", S::Backend,
       [](Config& c, RunShape& s) {
         c.data.datasets[0].type = DatasetType::Preference;
         s = cpu();
       },
       "type: preference / kto dataset, which only `surogate dpo` trains on"},
      {"surogate dpo on other datasets", S::Backend,
       [](Config& c, RunShape& s) {
         c.loss.preference = true;
         s = cpu();
       },
       "must all be type: preference for `surogate dpo`"},
      {"surogate dpo with padding_free", S::Backend,
       [](Config& c, RunShape& s) {
         c.loss.preference = true;
         c.data.datasets[0].type = DatasetType::Preference;
         c.data.padding_free = true;
         s = cpu();
       },
       "option 'padding_free' does not apply to `surogate dpo`"},
      {"surogate dpo with a loss_scale strategy", S::Backend,
       [](Config& c, RunShape& s) {
         c.loss.preference = true;
         c.data.datasets[0].type = DatasetType::Preference;
         c.data.loss_scale = "all";
         s = cpu();
       },
       "option 'loss_scale' does not apply to `surogate dpo`"},
      {"surogate dpo with sequence or pipeline parallelism", S::Device,
       [](Config& c, RunShape& s) {
         c.loss.preference = true;
         c.data.datasets[0].type = DatasetType::Preference;
         s = cpu();
         s.world_size = s.sequence_size = 2;
       },
       "sequence_parallel_size: 2 is not run by `surogate dpo` in this version"},
      {"kto on several ranks", S::Device,
       [](Config& c, RunShape& s) {
         kto_run(c, s, DatasetType::Kto);
         s = cuda(2);
         s.data_parallel_device = true;
       },
       "loss.type kto trains on one device in this version"},
      // surogate grpo (grpo.enabled is set by the command: the Backend stage).
      {"grpo options outside surogate grpo", S::Backend,
       [](Config& c, RunShape& s) {
         c.sources["grpo.num_generations"] = "config.yaml:9";
         s = cpu();
       },
       "option 'grpo' is read only by `surogate grpo`"},
      {"prompt datasets outside surogate grpo", S::Backend,
       [](Config& c, RunShape& s) {
         c.data.datasets[0].type = DatasetType::Prompt;
         s = cpu();
       },
       "type: prompt dataset, which only `surogate grpo` trains on"},
      {"surogate grpo on other datasets", S::Backend, grpo_case([](Config& c) { c.data.datasets[0].type = DatasetType::Text; }),
       "must all be type: prompt for `surogate grpo`"},
      {"surogate grpo on other validation datasets", S::Backend, grpo_case([](Config& c) {
         c.eval.validation_datasets.push_back(c.data.datasets[0]);
         c.eval.validation_datasets.back().type = DatasetType::Text;
       }),
       "option 'validation_datasets' must all be type: prompt for `surogate grpo`"},
      {"surogate grpo without reward functions", S::Backend, grpo_case([](Config& c) { c.grpo.reward_functions.clear(); }),
       "option 'grpo.reward_functions' is empty"},
      {"surogate grpo with a partial group per step", S::Backend,
       grpo_case([](Config& c) {
         c.schedule.per_device_train_batch_size = 3;
         c.schedule.gradient_accumulation_steps = 1;
       }),
       "must be a multiple of grpo.num_generations (2)"},
      {"surogate grpo with sequence_len", S::Backend,
       grpo_case([](Config& c) { c.sources["sequence_len"] = "config.yaml:3"; }),
       "option 'sequence_len' does not apply to `surogate grpo`"},
      {"surogate grpo with padding_free", S::Backend, grpo_case([](Config& c) { c.data.padding_free = true; }),
       "option 'padding_free' does not apply to `surogate grpo`"},
      {"surogate grpo with a loss_scale strategy", S::Backend, grpo_case([](Config& c) { c.data.loss_scale = "all"; }),
       "option 'loss_scale' does not apply to `surogate grpo`"},
      {"surogate grpo with the nvfp4 recipe", S::Backend,
       [](Config& c, RunShape& s) {
         make_grpo(c);
         c.precision.recipe = Recipe::Nvfp4;
         s = cuda();
         s.gpu_sm = 100;
       },
       "option 'recipe' is nvfp4: rollouts read the trainer's weights in place"},
      {"surogate grpo with offload_quants", S::Backend,
       [](Config& c, RunShape& s) {
         make_grpo(c);
         c.lora.enabled = c.quant.qlora_bnb = true;
         c.offload.offload_quants = c.offload.persistent_quants = c.parallel.shard_weights = true;
         s = cuda();
       },
       "option 'offload_quants' keeps the quantized base in host memory"},
      {"surogate grpo with sequence or pipeline parallelism", S::Device,
       [](Config& c, RunShape& s) {
         make_grpo(c);
         s = cpu();
         s.world_size = s.pipeline_size = 2;
       },
       "pipeline_parallel_size: 2 is not run by `surogate grpo` in this version"},
      {"surogate grpo with sharded weights", S::Device,
       [](Config& c, RunShape& s) {
         make_grpo(c);
         c.parallel.zero_level = 3;
         s = cuda(2);
         s.data_parallel_device = true;
       },
       "option 'zero_level' shards the weights over the ranks (ZeRO-3), and the rollouts"},
      {"surogate grpo with iterations or a KL term over several processes", S::Device,
       [](Config& c, RunShape& s) {
         make_grpo(c);
         c.grpo.beta = 0.04;
         s = cuda(2);
         s.processes = 2;
         s.data_parallel_device = true;
       },
       "option 'grpo.beta' is not run by `surogate grpo` over several processes in this version"},
  };
}

}  // namespace surogate::feature_support_test
