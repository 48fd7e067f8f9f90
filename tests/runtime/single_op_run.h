// Runs one single-op case (single_op_cases.h) on a backend: one node, its floating inputs frozen
// parameters and its integer inputs graph inputs, every output a graph output. `cpu_form` gives
// the CPU backend's graph (16-bit floating tensors as F32); the values are the same either way
// (drawn from `seed`, rounded to bf16 where the case's type is BF16; attrs naming BF16 name F32 in
// the CPU form), so the two runs of a case
// compute the same op on the same numbers. Outputs come back as doubles with their types.
#pragma once

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "graph/builder.h"
#include "graph/op_registry.h"
#include "ops/defs/register_ops.h"
#include "quant/fp8.h"
#include "runtime/backend.h"
#include "runtime/single_op_cases.h"

namespace surogate::testing {

struct SingleOpOutputs {
  std::vector<graph::TensorType> types;  // as the backend ran them
  std::vector<std::vector<double>> values;
};

// The registry the cases are written against: the core ops and the model ops.
inline const graph::OpRegistry& single_op_registry() {
  static const graph::OpRegistry registry = ops::make_model_registry();
  return registry;
}

// A case's test name: its op and its index.
inline std::string single_op_case_name(size_t index) {
  return single_op_cases()[index].op + "_" + std::to_string(index);
}

inline bool is_16bit_float(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }
inline bool is_byte_code(DType dtype) {
  return dtype == DType::U8 || dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2;
}

// The case's input values, rounded as the CUDA form stores them (codes and integers as built).
inline std::vector<std::vector<double>> single_op_values(const SingleOpCase& c, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const auto count = static_cast<size_t>(c.inputs[i].numel());
    const InputValues& build = i < c.values.size() ? c.values[i] : InputValues{};
    std::vector<double> v;
    if (build) {
      v = build(count, random);
    } else {
      std::uniform_real_distribution<double> distribution(-1.0, 1.0);
      v.resize(count);
      for (double& value : v) value = distribution(random);
    }
    const DType dtype = c.inputs[i].dtype;
    if (is_byte_code(dtype) || dtype == DType::I32) {
      values.push_back(std::move(v));  // codes and integers as given
      continue;
    }
    for (double& value : v) {
      value = dtype == DType::BF16 ? bf16_to_float(float_to_bf16(static_cast<float>(value)))
                                               : static_cast<double>(static_cast<float>(value));
    }
    values.push_back(std::move(v));
  }
  return values;
}

inline std::vector<std::byte> single_op_bytes(DType dtype, const std::vector<double>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size_bytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    std::byte* at = bytes.data() + i * dtype_size_bytes(dtype);
    if (dtype == DType::F32) {
      const auto value = static_cast<float>(values[i]);
      std::memcpy(at, &value, sizeof value);
    } else if (dtype == DType::BF16) {
      const uint16_t bits = float_to_bf16(static_cast<float>(values[i]));
      std::memcpy(at, &bits, sizeof bits);
    } else if (dtype == DType::I32) {
      const auto value = static_cast<int32_t>(values[i]);
      std::memcpy(at, &value, sizeof value);
    } else if (is_byte_code(dtype)) {
      *at = static_cast<std::byte>(static_cast<uint8_t>(values[i]));  // the byte code itself
    } else {
      SUROGATE_CHECK(false, "single-op cases hold F32, BF16, I32, U8 and FP8 tensors, not {}",
                     dtype_safetensors_name(dtype));
    }
  }
  return bytes;
}

inline std::vector<double> single_op_doubles(DType dtype, std::span<const std::byte> bytes) {
  std::vector<double> values(bytes.size() / dtype_size_bytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const std::byte* at = bytes.data() + i * dtype_size_bytes(dtype);
    if (dtype == DType::F32) {
      float value;
      std::memcpy(&value, at, sizeof value);
      values[i] = value;
    } else if (dtype == DType::BF16) {
      uint16_t bits;
      std::memcpy(&bits, at, sizeof bits);
      values[i] = bf16_to_float(bits);
    } else if (dtype == DType::I32) {
      int32_t value;
      std::memcpy(&value, at, sizeof value);
      values[i] = value;
    } else if (dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2) {  // FP8 codes as the values they stand for
      const auto format = dtype == DType::F8_E4M3 ? quant::Fp8Format::E4M3 : quant::Fp8Format::E5M2;
      values[i] = quant::fp8_decode(static_cast<uint8_t>(*at), format);
    } else {
      SUROGATE_CHECK(false, "single-op outputs are read as F32, BF16, I32 or FP8, not {}", dtype_safetensors_name(dtype));
    }
  }
  return values;
}

inline SingleOpOutputs run_single_op(const SingleOpCase& c, const graph::OpRegistry& registry,
                                     runtime::Backend& backend, bool cpu_form, uint32_t seed) {
  const std::vector<std::vector<double>> values = single_op_values(c, seed);
  graph::GraphBuilder builder(registry);
  std::vector<graph::TensorId> inputs;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    DType dtype = c.inputs[i].dtype;
    if (cpu_form && is_16bit_float(dtype)) dtype = DType::F32;
    const std::string name = "in" + std::to_string(i);
    // Integer operands (ids, positions, routing tables, seeds) are graph inputs; the rest, byte codes
    // of quantized weights included, frozen parameters.
    const bool parameter = dtype != DType::I32;
    inputs.push_back(parameter ? builder.parameter(name, dtype, c.inputs[i].shape, false)
                               : builder.input(name, dtype, c.inputs[i].shape));
    dtypes.push_back(dtype);
  }
  nlohmann::json attrs = c.attrs.is_null() ? nlohmann::json::object() : c.attrs;
  // Attrs naming a 16-bit dtype (fill's dtype, router_topk_backward's logits_dtype) name F32 in
  // the CPU form, as they would in an F32 graph.
  for (auto& value : attrs) {
    if (cpu_form && value.is_string() && (value == "BF16" || value == "F16")) value = "F32";
  }
  const graph::OpOutputs outputs = builder.op(c.op, inputs, attrs);
  for (graph::TensorId id : outputs.ids) builder.mark_output(id);
  const compiler::ExecutionPlan plan = compiler::compile_forward(builder.finish(), registry);
  backend.load(plan, registry);
  std::vector<std::vector<std::byte>> bytes;
  std::vector<runtime::InputBinding> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) bytes.push_back(single_op_bytes(dtypes[i], values[i]));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (dtypes[i] != DType::I32) {
      backend.write(inputs[i], bytes[i]);
    } else {
      bindings.push_back({inputs[i], bytes[i]});
    }
  }
  backend.execute(bindings);
  SingleOpOutputs result;
  for (graph::TensorId id : outputs.ids) {
    const graph::TensorType& type = plan.graph.tensor(id).type;
    std::vector<std::byte> out(type.size_bytes());
    backend.read(id, out);
    result.types.push_back(type);
    result.values.push_back(single_op_doubles(type.dtype, out));
  }
  return result;
}

}  // namespace surogate::testing
