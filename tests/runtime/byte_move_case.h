// One case for Backend::copy_within on every backend: a plan whose one parameter is 600 rows of
// 4,096 bytes, filled with distinct bytes, and moves that exercise the copy's paths — 140
// row-sized moves at offsets and sizes that are not multiples of 16 (more than one launch of
// range copies on CUDA), and one 400 KB move from source rows the others also read (a range
// shared by several blocks). `expected_after_moves` applies them to the bytes on the host.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/execution_plan.h"
#include "graph/builder.h"
#include "graph/op_registry.h"
#include "runtime/backend.h"

namespace surogate::testing {

inline constexpr size_t kMoveRowBytes = 4096;
inline constexpr int64_t kMoveRows = 600;

inline std::vector<std::byte> byte_move_table() {
  std::vector<std::byte> bytes(static_cast<size_t>(kMoveRows) * kMoveRowBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 131 + i / 4096) % 251);
  return bytes;
}

inline std::vector<runtime::ByteMove> byte_moves(graph::TensorId table) {
  std::vector<runtime::ByteMove> moves;
  for (size_t k = 0; k < 140; ++k) {  // rows 0..139 → 150..289, shifted by 0, 1 or 2 bytes
    moves.push_back({table, k * kMoveRowBytes + k % 3, (150 + k) * kMoveRowBytes + k % 3, kMoveRowBytes - 3});
  }
  moves.push_back({table, 0, 400 * kMoveRowBytes, 100 * kMoveRowBytes});  // rows 0..99 → 400..499
  return moves;
}

inline std::vector<std::byte> expected_after_moves(std::vector<std::byte> bytes, const std::vector<runtime::ByteMove>& moves) {
  const std::vector<std::byte> before = bytes;  // no destination is a source: order does not matter
  for (const runtime::ByteMove& move : moves) std::memcpy(bytes.data() + move.to, before.data() + move.from, move.bytes);
  return bytes;
}

// The plan: "table" F32 [600, 1024], reduced to a loss so that it compiles, with its registry.
struct ByteMoveCase {
  graph::OpRegistry registry;
  compiler::ExecutionPlan plan;

  ByteMoveCase() {
    graph::register_core_ops(registry);
    graph::GraphBuilder b(registry);
    const graph::TensorId table = b.parameter("table", DType::F32, {kMoveRows, 1024});
    const graph::TensorId loss = b.op("sum", {table}, {}, "loss");
    b.mark_output(loss);
    plan = compiler::compile_training(b.finish(), loss, registry);
  }

  // `backend` loaded with the plan, the table written, the moves made: the table read back equals
  // the host's result.
  void expect_moves_made(runtime::Backend& backend) const {
    backend.load(plan, registry);
    const graph::TensorId table = plan.tensor("table");
    const std::vector<std::byte> bytes = byte_move_table();
    backend.write(table, bytes);
    const std::vector<runtime::ByteMove> moves = byte_moves(table);
    backend.copy_within(moves);
    std::vector<std::byte> got(bytes.size());
    backend.read(table, got);
    EXPECT_EQ(got, expected_after_moves(bytes, moves));
  }
};

}  // namespace surogate::testing
