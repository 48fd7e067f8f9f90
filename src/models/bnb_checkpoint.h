// Weights saved by bitsandbytes in 4 bits (config.json's quantization_config quant_method
// "bitsandbytes" with load_in_4bit; io/model_config_quantization.h), as transformers writes a
// Linear4bit's state dict. For a weight `<name>` of shape [out, in] (n values, in blocks of b):
//   <name>                                   U8  [ceil(n/2), 1]  the 4-bit codes, two per byte, the earlier
//                                                                value in the high nibble (as quant/nf4.h)
//   <name>.absmax                            F32 [blocks], or U8 [blocks] with double quantization
//   <name>.quant_map                         F32 [16]   the codes' values (NF4's levels, or bitsandbytes' FP4)
//   <name>.nested_absmax                     F32 [ceil(blocks / nested_blocksize)]   double quantization
//   <name>.nested_quant_map                  F32 [256]  the 8-bit dynamic map         double quantization
//   <name>.quant_state.bitsandbytes__<type>  U8  [k]    UTF-8 JSON: quant_type, blocksize, dtype, shape;
//                                                       nested_blocksize, nested_dtype, nested_offset
// The value of element i is quant_map[code_i] · absmax(block of i) in fp32, where with double
// quantization absmax(block) = nested_quant_map[absmax code] · nested_absmax[block / nested_blocksize]
// + nested_offset (fp32, multiply then add): what bitsandbytes' dequantize_4bit computes before its
// cast to the state's dtype. Stored this way, NF4 with blocks of qlora_bnb_block_size is exactly
// qlora_bnb's pieces (train/quantized_weights.h takes them as stored); anything else is dequantized
// on load.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/model_spec.h"

namespace surogate::models {

struct Bnb4bitTensor {
  const io::SafetensorsTensor& codes;          // U8, ceil(numel / 2) bytes
  const io::SafetensorsTensor& absmax;         // F32, or U8 codes with double quantization
  const io::SafetensorsTensor* nested_absmax;  // F32, with double quantization; nullptr otherwise
  std::string quant_type;                      // "nf4" or "fp4"
  int64_t numel = 0;
  int64_t block_size = 64;
  int64_t nested_block_size = 256;
  float nested_offset = 0.0f;
  std::array<float, 16> quant_map{};
  std::array<float, 256> nested_quant_map{};

  bool double_quant() const { return nested_absmax != nullptr; }
  int64_t blocks() const { return (numel + block_size - 1) / block_size; }
};

// The names of the tensors that hold `hf_name`'s quant state, those of them the checkpoint has
// (so the loader does not take them for stray tensors).
std::vector<std::string> bnb_4bit_state_names(const io::SafetensorsCheckpoint& checkpoint, const std::string& hf_name);

// Reads and checks the quant state of the U8 tensor of `spec`: every piece present with its dtype and
// size, the JSON complete and describing spec's shape. Each problem is one UserError naming the file
// and the tensor.
Bnb4bitTensor read_bnb_4bit_tensor(const io::SafetensorsCheckpoint& checkpoint, const ParameterSpec& spec);

// The fp32 absmax of every block (the nested dequantization done with double quantization).
std::vector<float> bnb_4bit_block_absmax(const Bnb4bitTensor& tensor);

// The fp32 values of the weight (numel of them), computed as the file comment says.
void dequantize_bnb_4bit(const Bnb4bitTensor& tensor, std::span<float> out);

// Takes a bitsandbytes 4-bit weight as stored and returns true, or returns false to have it
// dequantized and passed to the WeightSink (models/weight_io.h).
using Bnb4bitSink = std::function<bool(const ParameterSpec& spec, const Bnb4bitTensor& tensor)>;

}  // namespace surogate::models
