// What the Python DSL (python/surogate/dsl) learns from the engine instead of repeating it
// (models/dsl_queries.h), and the built-in builder's IR.
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "graph/json_ir.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/dsl_queries.h"

namespace nb = nanobind;

namespace surogate::python {

void bind_graph(nb::module_& module) {
  module.def("ops", [] { return to_python(models::op_list()); }, "Every registered op: name, inputs, outputs.");
  module.def(
      "infer",
      [](const std::string& op, const std::string& where, nb::handle inputs, nb::handle attrs) {
        return to_python(models::infer_op(op, where, from_python(inputs), from_python(attrs)));
      },
      "Output [dtype, shape] pairs of an op for input [dtype, shape] pairs and attrs (its shape rule).");
  module.def("model_facts", [](const std::string& model_dir) { return to_python(models::model_facts(model_dir)); });
  module.def("rope_attributes", [](const std::string& model_dir, int64_t sequence) {
    return to_python(models::rope_attributes(model_dir, sequence));
  });
  module.def("parameter_table",
             [](const std::string& model_dir) { return to_python(models::parameter_table(model_dir)); });
  module.def(
      "verify_ir", [](const std::string& text) { return models::verify_ir(text); },
      "Imports JSON IR text as the engine does (structure, then verify_graph) and returns it re-exported.");
  module.def(
      "builtin_ir",
      [](const std::string& model_dir, int64_t batch, int64_t sequence, int64_t lmhead_chunks) {
        const io::ModelConfig config = io::load_model_config(model_dir);
        const graph::OpRegistry& registry = models::dsl_registry();
        return graph::graph_to_json(
                   models::build_decoder_graph(config, registry, {batch, sequence, lmhead_chunks, false}).graph)
            .dump();
      },
      "The built-in builder's graph as JSON IR text (what `surogate ir` prints).");
}

}  // namespace surogate::python
