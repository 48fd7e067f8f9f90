// libFuzzer target: any byte string is treated as a safetensors file image and run through
// the length / header / offset validation. The only acceptable outcomes are a parsed header
// whose tensors lie inside the image, or a UserError; anything else (crash, sanitizer report,
// other exception, out-of-range tensor) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  try {
    surogate::io::SafetensorsLayout layout = surogate::io::parse_safetensors_layout(bytes, "fuzz-input");
    const uint64_t data_size = size - layout.data_offset;
    for (const auto& entry : layout.header.entries) {
      if (entry.data_begin > entry.data_end || entry.data_end > data_size) std::abort();
    }
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
