// Loaded models for surogate.load (python/surogate/model.py): models::ModelSession, with its
// weights handed out as DLPack-capable arrays that point into the backend's own parameter memory
// (host memory on the CPU backend, GPU memory on the CUDA backend) and keep the session alive.
// numpy.from_dlpack / torch.from_dlpack turn them into arrays and tensors without a copy.
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#if SUROGATE_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "bindings.h"
#include "core/error.h"
#include "models/model_session.h"

namespace nb = nanobind;

namespace surogate::python {
namespace {
using models::ModelSession;
using models::SessionTensor;

nb::dlpack::dtype dlpack_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return nb::dtype<float>();
    case DType::F64: return nb::dtype<double>();
    case DType::I32: return nb::dtype<int32_t>();
    case DType::I64: return nb::dtype<int64_t>();
    case DType::BF16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case DType::F16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    default: break;
  }
  fail_user("a weight of dtype {} cannot be handed out through DLPack", dtype_safetensors_name(dtype));
}

DType engine_dtype(const nb::dlpack::dtype& dtype) {
  const auto code = static_cast<nb::dlpack::dtype_code>(dtype.code);
  if (dtype.lanes == 1 && code == nb::dlpack::dtype_code::Float) {
    if (dtype.bits == 32) return DType::F32;
    if (dtype.bits == 64) return DType::F64;
    if (dtype.bits == 16) return DType::F16;
  }
  if (dtype.lanes == 1 && code == nb::dlpack::dtype_code::Bfloat && dtype.bits == 16) return DType::BF16;
  fail_user("weights are set from float32, float64, float16 or bfloat16 arrays (got DLPack type code {} with {} bits)",
            static_cast<int>(dtype.code), static_cast<int>(dtype.bits));
}

// The weight itself (no copy), owned by the session object `self`: an object with __dlpack__ and
// __dlpack_device__ (nanobind's array_api framework), which numpy / torch from_dlpack take.
nb::ndarray<nb::array_api> weight_array(nb::handle self, const SessionTensor& tensor, bool on_gpu) {
  std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
  return nb::ndarray<nb::array_api>(tensor.data, shape.size(), shape.data(), self, nullptr, dlpack_dtype(tensor.dtype),
                       on_gpu ? nb::device::cuda::value : nb::device::cpu::value, 0);
}

void set_weight(ModelSession& session, const std::string& name, nb::ndarray<nb::ro, nb::c_contig> values) {
  const SessionTensor& tensor = session.tensor(name);
  const DType source = engine_dtype(values.dtype());
  const size_t bytes = values.nbytes();
  if (values.size() != static_cast<size_t>(graph::shape_numel(tensor.shape))) {
    fail_user("weight '{}' has {} elements ({}), the values {}", name, graph::shape_numel(tensor.shape),
              graph::format_shape(tensor.shape), values.size());
  }
  if (values.device_type() == nb::device::cpu::value) {
    nb::gil_scoped_release release;
    session.write(name, source, {static_cast<const std::byte*>(values.data()), bytes});
    return;
  }
#if SUROGATE_WITH_CUDA
  if (values.device_type() == nb::device::cuda::value && session.on_gpu() && source == tensor.dtype) {
    nb::gil_scoped_release release;
    const cudaError_t status = cudaMemcpy(tensor.data, values.data(), bytes, cudaMemcpyDeviceToDevice);
    if (status != cudaSuccess) fail_user("weight '{}': copy on the GPU failed: {}", name, cudaGetErrorString(status));
    return;
  }
#endif
  fail_user("weight '{}': values on a GPU are taken when the model is on the GPU too and they have its dtype ({}); "
            "otherwise pass host values (.cpu())", name, dtype_safetensors_name(tensor.dtype));
}

using Tokens = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Lengths = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// (loss sum, scored tokens, logits [B, T, vocab] float32 or None) for rows of `ids` / `labels`
// [rows, width] whose first lengths[r] entries are the row's tokens.
nb::tuple run(ModelSession& session, Tokens ids, Tokens labels, Lengths lengths, bool with_logits) {
  std::vector<models::TokenSequence> rows(ids.shape(0));
  const size_t width = ids.shape(1);
  for (size_t row = 0; row < rows.size(); ++row) {
    const size_t length = static_cast<size_t>(lengths(row));
    rows[row].input_ids.assign(ids.data() + row * width, ids.data() + row * width + length);
    rows[row].labels.assign(labels.data() + row * width, labels.data() + row * width + length);
  }
  models::SessionOutput output;
  {
    nb::gil_scoped_release release;
    output = session.run(rows, with_logits);
  }
  nb::object logits = nb::none();
  if (with_logits) {
    auto* values = new std::vector<float>(std::move(output.logits));
    nb::capsule owner(values, [](void* pointer) noexcept { delete static_cast<std::vector<float>*>(pointer); });
    const size_t shape[3] = {static_cast<size_t>(session.batch()), static_cast<size_t>(session.sequence()),
                             static_cast<size_t>(session.vocab_size())};
    logits = nb::cast(nb::ndarray<nb::numpy, float>(values->data(), 3, shape, owner));
  }
  return nb::make_tuple(output.loss_sum, output.tokens, logits);
}

}  // namespace

void bind_models(nb::module_& module) {
  nb::class_<ModelSession>(module, "ModelSession")
      .def(
          "__init__",
          [](ModelSession* self, const std::string& model_dir, const std::string& adapter, const std::string& device,
             int64_t batch, int64_t sequence, const std::string& model_definition) {
            models::SessionOptions options;
            options.batch = batch;
            options.sequence = sequence;
            options.adapter = adapter;
            if (device != "cpu" && device != "cuda") fail_user("device '{}': use 'cpu' or 'cuda'", device);
            options.cuda = device == "cuda";
            if (!model_definition.empty()) {
              options.definition = {model_definition, fmt::format("model_definition '{}'", model_definition),
                                    "batch_size / seq_len"};
            }
            nb::gil_scoped_release release;
            new (self) ModelSession(model_dir, options);
          },
          nb::arg("model_dir"), nb::arg("adapter"), nb::arg("device"), nb::arg("batch"), nb::arg("sequence"),
          nb::arg("model_definition"))
      .def("names",
           [](const ModelSession& session) {
             std::vector<std::tuple<std::string, std::string, bool>> names;
             for (const SessionTensor& tensor : session.tensors()) {
               names.emplace_back(tensor.name, tensor.engine_name, tensor.adapter);
             }
             return names;
           })
      .def("weight",
           [](nb::handle self, const std::string& name) {
             ModelSession& session = nb::cast<ModelSession&>(self);
             return weight_array(self, session.tensor(name), session.on_gpu());
           })
      .def("address", [](const ModelSession& session, const std::string& name) {
        return reinterpret_cast<uintptr_t>(session.tensor(name).data);
      })
      .def("read_float32",
           [](const ModelSession& session, const std::string& name) {
             const SessionTensor& tensor = session.tensor(name);
             auto* values = new std::vector<float>(session.read_float32(name));
             nb::capsule owner(values, [](void* pointer) noexcept { delete static_cast<std::vector<float>*>(pointer); });
             std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
             return nb::ndarray<nb::numpy, float>(values->data(), shape.size(), shape.data(), owner);
           })
      .def("set_weight", &set_weight)
      .def("run", &run)
      .def_prop_ro("on_gpu", &ModelSession::on_gpu)
      .def_prop_ro("batch", &ModelSession::batch)
      .def_prop_ro("sequence", &ModelSession::sequence)
      .def_prop_ro("vocab_size", &ModelSession::vocab_size);
}

}  // namespace surogate::python
