// What the Python DSL (python/surogate/dsl) asks the engine instead of repeating it: the op
// registry (names, inputs, outputs) and each op's shape rule, the facts the engine reads from a
// model's config.json (io::ModelConfig, resolved: head_dim, per-layer sliding windows, RoPE), the
// RoPE frequencies the rope ops take as attributes, the built-in parameter table with HF names,
// and the JSON IR import (the same verification `surogate eval --ir` and model_definition apply).
// Two ways in, one implementation: the extension module surogate._engine
// (python/bindings/graph_bindings.cpp), and `surogate ir --dsl-queries`, which answers the same
// questions as JSON lines on stdin / stdout, so the DSL runs from the source tree with the CLI
// alone (docs/python.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/op_registry.h"

namespace surogate::models {

// ops::make_model_registry(), built once.
const graph::OpRegistry& dsl_registry();

// Every registered op: name, inputs, outputs, variadic_inputs, differentiable.
nlohmann::json op_list();
// [[dtype, shape], ...] of the op's outputs for inputs [[dtype, shape], ...]; `where` names the
// node in a UserError.
nlohmann::json infer_op(const std::string& op, const std::string& where, const nlohmann::json& inputs,
                        const nlohmann::json& attrs);
nlohmann::json model_facts(const std::string& model_dir);
// The attrs the rope ops take: inverse frequencies (float, widened) and the attention scaling.
nlohmann::json rope_attributes(const std::string& model_dir, int64_t sequence);
nlohmann::json parameter_table(const std::string& model_dir);
// JSON IR text imported as the engine does (structure, then verify_graph), re-exported as text.
std::string verify_ir(const std::string& text);

// One request {"query": "ops" | "infer" | "model_facts" | "rope_attributes" | "parameter_table" |
// "verify_ir", "args": [...]} (the arguments of the function above) -> {"result": ...}, or
// {"error": message} for a UserError.
nlohmann::json answer_dsl_query(const nlohmann::json& request);
// Answers one request per line of `in` on one line of `out` until `in` ends.
void serve_dsl_queries(std::istream& in, std::ostream& out);

}  // namespace surogate::models
