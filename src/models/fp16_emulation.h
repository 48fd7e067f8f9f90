// fp16 on the CPU backend: a graph rewrite that makes the fp32 reference compute what an fp16 GPU
// run keeps (torch_dtype: float16). The GPU's fp16 recipe holds the weights it computes with, the
// activations and their gradients in fp16, and the statistics (norms' rstd, attention's
// logsumexp, the loss), master weights and gradient accumulators in fp32. The CPU graph stays F32,
// but every tensor the GPU keeps in 16 bits is rounded to fp16 right where it is produced:
//   - each such parameter P is read through round_fp16(P) (`P.fp16`, the compute copy, emitted
//     before its first reader; the F32 P stays the master the optimizer updates);
//   - each such activation X is followed by round_fp16(X) (`X.fp16`, in X's recompute group), and
//     every later reader reads the rounded copy.
// Autodiff then differentiates through round_fp16, whose gradient is the output gradient rounded
// to fp16: the activation gradients, and each parameter's per-micro-batch gradient before it is
// added into the fp32 accumulator, are fp16 values as on the GPU. Overflow past 65504 becomes inf,
// which is what dynamic loss scaling (train/fp16_loss_scaler.h) watches for.
//
// Which tensors are 16-bit is read off the graph's bf16 twin — the same model built for the CUDA
// backend's recipe (same names; bf16 there, fp32 statistics) — so the rule is the GPU graph's own.
#pragma once

#include <set>
#include <string>

#include "graph/graph.h"

namespace surogate::models {

// The names of `twin`'s 16-bit (BF16 or F16) tensors (parameters and activations): the GPU's graph.
std::set<std::string> sixteen_bit_tensors(const graph::Graph& twin);

// `forward` with round_fp16 after every parameter and computed tensor named in `sixteen_bit`.
graph::Graph apply_fp16_emulation(const graph::Graph& forward, const std::set<std::string>& sixteen_bit);

}  // namespace surogate::models
