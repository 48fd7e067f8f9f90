// The pieces of the surogate._engine module, one file each: configuration and training
// (train_bindings.cpp), loaded models and their tensors (model_bindings.cpp), the op registry
// and model facts the DSL reads (graph_bindings.cpp). module.cpp puts them together.
#pragma once

#include <string>

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

namespace surogate::python {

void bind_training(nanobind::module_& module);
void bind_models(nanobind::module_& module);
void bind_graph(nanobind::module_& module);

// JSON ↔ Python through the json module: exact for every value the engine writes.
nanobind::object to_python(const nlohmann::json& value);
nlohmann::json from_python(nanobind::handle value);

}  // namespace surogate::python
