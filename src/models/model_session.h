// A model held in memory for the Python package's surogate.load(): the forward graph of one
// [B, T] batch (built in, or a model_definition IR), with a PEFT adapter's LoRA matrices as
// parameters of their own when one is given, compiled once and loaded on a backend: the CPU
// reference in fp32, or the CUDA backend in bf16 (the bf16 recipe's weights). Beside the loss the
// graph outputs the logits, linear(hidden, head) on the loss node's inputs.
//
// Its weights are addressed in place: tensors() gives each one's address in the backend's own
// parameter memory (host or device), so the bindings hand them out through DLPack without a
// copy, and a write there is what the next run() computes with. Names are the checkpoint's: HF
// names for the base model (model.safetensors), PEFT keys for the adapter
// (adapter_model.safetensors); engine names are accepted too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "models/model_definition.h"
#include "models/token_batches.h"

namespace surogate::models {

struct SessionOptions {
  int64_t batch = 1;               // rows per run()
  int64_t sequence = 128;          // tokens per row
  std::filesystem::path adapter;   // PEFT LoRA adapter folder, or empty
  bool cuda = false;               // the CUDA backend (bf16) instead of the CPU backend (fp32)
  ModelDefinition definition;      // the graph's source (default: the built-in builder)
};

struct SessionTensor {
  std::string name;         // HF name, or the adapter matrix's PEFT key
  std::string engine_name;  // "layers.0.attn.q_proj.weight", "layers.0.attn.q_proj.lora_A.weight"
  DType dtype = DType::F32;
  graph::Shape shape;
  void* data = nullptr;     // in the backend's parameter memory: host, or the GPU's when on_gpu()
  bool adapter = false;
};

struct SessionOutput {
  double loss_sum = 0.0;       // Σ next-token cross-entropy over the scored tokens
  int64_t tokens = 0;          // scored tokens
  std::vector<float> logits;   // [B, T, vocab] when asked for, else empty
};

class ModelSession {
public:
  ModelSession(const std::filesystem::path& model_dir, const SessionOptions& options);
  ~ModelSession();
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  const std::vector<SessionTensor>& tensors() const;
  // By checkpoint or engine name; an unknown name is a UserError that names a close one.
  const SessionTensor& tensor(const std::string& name) const;
  // Overwrites a weight from values stored as `source` (F32, F64, BF16, F16), converted to the
  // tensor's dtype; the element count must match (UserError naming the tensor otherwise).
  void write(const std::string& name, DType source, std::span<const std::byte> values);
  // A copy of a weight as fp32 on the host.
  std::vector<float> read_float32(const std::string& name) const;

  // One batch: `rows` (at most batch(), each at most sequence() tokens, labels -100 = not scored)
  // are laid one per row, labels shifted once (next-token), padding never scored.
  SessionOutput run(const std::vector<TokenSequence>& rows, bool with_logits);

  bool on_gpu() const;
  int64_t batch() const;
  int64_t sequence() const;
  int64_t vocab_size() const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace surogate::models
