// What the cached-attention kernel tests share (test_cached_attention_cuda.cpp: the split kernels,
// the folded launches and the binder; test_cached_attention_rows_cuda.cpp: the many-rows kernel):
// cases, their values, the reference, the GPU runs and the checks. The error measure and the
// tolerances are the ones test_cached_attention_cuda.cpp's top states.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bfloat16.h"
#include "cuda/kernels/cached_attention.h"
#include "cuda/test_helpers.h"
#include "ops/cached_attention.h"

namespace surogate::cuda::cached_attention_cases {

using namespace cuda::testing;

struct Row {
  int32_t slot, held, fresh;
};
struct Case {
  int64_t sequence = 1, slots = 1, capacity = 1;
  int q_heads = 1, kv_heads = 1, head_dim = 8, window = 0;
  std::vector<Row> rows;
  int64_t batch() const { return static_cast<int64_t>(rows.size()); }
};

// Host storage of a kernel element type E and its rounding from fp32.
template <typename E>
struct Host {
  using Storage = uint16_t;
  static Storage encode(float x) {
    if constexpr (std::is_same_v<E, __half>) {
      return float_to_f16(x);
    } else {
      return float_to_bf16(x);
    }
  }
  static float decode(Storage bits) {
    if constexpr (std::is_same_v<E, __half>) {
      return f16_to_float(bits);
    } else {
      return bf16_to_float(bits);
    }
  }
};
template <>
struct Host<float> {
  using Storage = float;
  static float encode(float x) { return x; }
  static float decode(float x) { return x; }
};

struct Values {
  std::vector<float> q, k, v, k_cache, v_cache, out;
};

// Uniform values rounded to E (exact in E, so the reference sees the GPU's inputs). q is larger
// than the keys so the softmax is far from flat.
template <typename E>
Values random_values(const Case& c) {
  const int64_t tokens = c.batch() * c.sequence;
  const int64_t cache = c.slots * c.capacity * c.kv_heads * c.head_dim;
  auto draw = [](int64_t count, float scale) {
    std::vector<float> values = random_fp32(static_cast<size_t>(count), -scale, scale);
    for (float& value : values) value = Host<E>::decode(Host<E>::encode(value));
    return values;
  };
  Values values;
  values.q = draw(tokens * c.q_heads * c.head_dim, 3.0f);
  values.k = draw(tokens * c.kv_heads * c.head_dim, 1.0f);
  values.v = draw(tokens * c.kv_heads * c.head_dim, 1.0f);
  values.k_cache = draw(cache, 1.0f);
  values.v_cache = draw(cache, 1.0f);
  return values;
}

inline std::vector<int32_t> column(const Case& c, int32_t Row::* field) {
  std::vector<int32_t> result;
  for (const Row& row : c.rows) result.push_back(row.*field);
  return result;
}

// The reference on copies of the inputs: out and the caches after the append.
inline Values reference(const Case& c, Values values) {
  const ops::CachedAttentionShape shape{.batch = c.batch(), .sequence = c.sequence, .slots = c.slots,
                                        .capacity = c.capacity, .query_heads = c.q_heads, .kv_heads = c.kv_heads,
                                        .head_dim = c.head_dim, .window = c.window};
  values.out.assign(values.q.size(), 0.0f);
  ops::cached_attention_forward<float>(shape, values.q.data(), values.k.data(), values.v.data(), values.k_cache.data(),
                                       values.v_cache.data(), column(c, &Row::slot).data(),
                                       column(c, &Row::held).data(), column(c, &Row::fresh).data(), values.out.data());
  return values;
}

inline CachedAttentionShape kernel_shape(const Case& c) {
  return CachedAttentionShape{.batch = c.batch(), .sequence = c.sequence, .slots = c.slots, .capacity = c.capacity,
                              .q_heads = c.q_heads, .kv_heads = c.kv_heads, .head_dim = c.head_dim, .window = c.window};
}

template <typename E>
DeviceBuffer<typename Host<E>::Storage> upload(const std::vector<float>& values) {
  std::vector<typename Host<E>::Storage> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) stored[i] = Host<E>::encode(values[i]);
  return to_device(stored);
}
template <typename E>
std::vector<float> download(const DeviceBuffer<typename Host<E>::Storage>& buffer) {
  const auto stored = buffer.download();
  std::vector<float> values(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) values[i] = Host<E>::decode(stored[i]);
  return values;
}
template <typename E, typename Storage>
E* device(DeviceBuffer<Storage>& buffer) {
  return reinterpret_cast<E*>(buffer.data());
}

// A case's tensors on the GPU, with `splits` (0: the launcher's choice for this GPU); out and the
// workspace start as NaN poison.
template <typename E>
struct OnDevice {
  CachedAttentionShape shape;
  int splits;
  DeviceBuffer<typename Host<E>::Storage> q, k, v, k_cache, v_cache, out;
  DeviceBuffer<float> workspace;
  DeviceBuffer<int32_t> slots, held, fresh;

  OnDevice(const Case& c, const Values& inputs, int split_count)
      : shape(kernel_shape(c)), splits(split_count == 0 ? cached_attention_splits(shape) : split_count),
        q(upload<E>(inputs.q)), k(upload<E>(inputs.k)), v(upload<E>(inputs.v)), k_cache(upload<E>(inputs.k_cache)),
        v_cache(upload<E>(inputs.v_cache)), out(inputs.q.size()),
        workspace(static_cast<size_t>(cached_attention_workspace_floats(shape, splits))),
        slots(to_device(column(c, &Row::slot))), held(to_device(column(c, &Row::held))),
        fresh(to_device(column(c, &Row::fresh))) {
    out.poison();
    workspace.poison();
  }

  // out and the caches once the launches are done.
  Values result() {
    synchronize();
    Values values;
    values.out = download<E>(out);
    values.k_cache = download<E>(k_cache);
    values.v_cache = download<E>(v_cache);
    return values;
  }
};

// The append and the attention on the GPU. `folded`: through cached_attention_append_forward (the
// append folded into the split launch for steps of at most two tokens on the tensor-core kernel).
template <typename E>
Values run_gpu(const Case& c, const Values& inputs, int split_count, bool folded = false) {
  OnDevice<E> d(c, inputs, split_count);
  auto& [shape, splits, q, k, v, k_cache, v_cache, out, workspace, slots, held, fresh] = d;
  if (folded) {
    cached_attention_append_forward<E>(device<E>(out), workspace.data(), device<E>(q), device<E>(k), device<E>(v),
                                       device<E>(k_cache), device<E>(v_cache), slots.data(), held.data(), fresh.data(),
                                       shape, splits, nullptr);
  } else {
    cached_attention_append<E>(device<E>(k_cache), device<E>(v_cache), device<E>(k), device<E>(v), slots.data(),
                               held.data(), fresh.data(), shape, nullptr);
    cached_attention_forward<E>(device<E>(out), workspace.data(), device<E>(q), device<E>(k_cache), device<E>(v_cache),
                                slots.data(), held.data(), fresh.data(), shape, splits, nullptr);
  }
  return d.result();
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every output element of the padding queries (t ≥ n) is exactly zero.
inline void expect_padding_zero(const Case& c, const std::vector<float>& out) {
  const int64_t per_token = int64_t{c.q_heads} * c.head_dim;
  for (int64_t row = 0; row < c.batch(); ++row) {
    for (int64_t t = c.rows[static_cast<size_t>(row)].fresh; t < c.sequence; ++t) {
      const int64_t first = (row * c.sequence + t) * per_token;
      for (int64_t i = first; i < first + per_token; ++i) {
        ASSERT_EQ(out[static_cast<size_t>(i)], 0.0f) << "row " << row << " padding position " << t;
      }
    }
  }
}

inline constexpr double kF32Tolerance = 1e-5, kBf16Tolerance = 5e-3, kF16Tolerance = 1e-3;

// Qwen3-8B's heads (32 query, 8 kv, head_dim 128), one new token per row, rows of cache lengths
// 0, 1, 31, 33, 1000 and 2999 in shuffled slots: lengths around and away from the 32-key pieces
// and the lane groups' chunks, split 1, 7 (uneven pieces) and 64 ways and as the launcher picks.
inline Case qwen3_decode() {
  return Case{.sequence = 1, .slots = 7, .capacity = 3000, .q_heads = 32, .kv_heads = 8, .head_dim = 128,
              .rows = {{3, 0, 1}, {0, 1, 1}, {6, 31, 1}, {1, 33, 1}, {5, 1000, 1}, {2, 2999, 1}}};
}

// A case and split count, for failure messages.
inline std::string describe(const Case& c, int splits) {
  return std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " heads of " + std::to_string(c.head_dim) +
         ", " + std::to_string(c.batch()) + " rows of " + std::to_string(c.sequence) + ", splits " +
         std::to_string(splits);
}

// out and both caches the same bits in `got` as in `expected`.
inline void expect_same_bits(const Values& got, const Values& expected, const std::string& where) {
  EXPECT_TRUE(same_bits(got.out, expected.out)) << where << ": out";
  EXPECT_TRUE(same_bits(got.k_cache, expected.k_cache)) << where << ": k cache";
  EXPECT_TRUE(same_bits(got.v_cache, expected.v_cache)) << where << ": v cache";
}

}  // namespace surogate::cuda::cached_attention_cases
