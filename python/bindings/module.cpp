// surogate._engine: the native half of the Python package (python/surogate wraps it). Engine
// errors a user can fix (surogate::UserError) arrive as surogate.UserError, a ValueError, with
// the engine's message (the file / key / line and what to do); anything else as RuntimeError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "core/error.h"

namespace nb = nanobind;

namespace surogate::python {

nb::object to_python(const nlohmann::json& value) {
  return nb::module_::import_("json").attr("loads")(value.dump());
}

nlohmann::json from_python(nb::handle value) {
  const std::string text = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(value));
  return nlohmann::json::parse(text);
}

}  // namespace surogate::python

NB_MODULE(_engine, module) {
  module.doc() = "Surogate's engine (C++): training, loaded models, the op registry. Use the surogate package.";
  nb::exception<surogate::UserError>(module, "UserError", PyExc_ValueError);
  module.attr("__version__") = SUROGATE_VERSION_STRING;
#if SUROGATE_WITH_CUDA
  module.attr("has_cuda") = true;
#else
  module.attr("has_cuda") = false;
#endif
  surogate::python::bind_training(module);
  surogate::python::bind_models(module);
  surogate::python::bind_graph(module);
}
