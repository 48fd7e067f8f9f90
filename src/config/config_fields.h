// The option tables: every option of Config, DatasetConfig and DistributedConfig, with its
// allowed values. The single place that says which options exist.
#pragma once

#include "config/config.h"
#include "config/yaml_fields.h"

namespace surogate::config_detail {

const FieldTable<Config>& config_fields();
const FieldTable<DatasetConfig>& dataset_fields();
const FieldTable<DistributedConfig>& distributed_fields();
const FieldTable<config::Loss>& loss_fields();  // the `loss` mapping (surogate dpo)
const FieldTable<config::Grpo>& grpo_fields();  // the `grpo` mapping (surogate grpo)

}  // namespace surogate::config_detail
