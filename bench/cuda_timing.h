// What the CUDA microbenchmarks in bench/ share: timing launches with CUDA events (eager, or captured
// into a CUDA graph and replayed) and parsing a comma-separated list flag and the decode benches' flags.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"

namespace surogate::bench {

// Mean µs of one `launch(i)` over `repeats` launches after 5 warm-ups, i cycling over the buffers.
inline double time_launches(int repeats, int buffers, const std::function<void(int)>& launch) {
  for (int i = 0; i < 5; ++i) launch(i % buffers);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < repeats; ++i) launch(i % buffers);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / repeats;
}

// Mean µs of one launch: `repeats` launches (copy i % copies) captured in one graph, replayed
// once to warm up and then timed over three replays.
inline double time_graph(int repeats, int copies, const std::function<void(int copy, cudaStream_t stream)>& launch) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < std::min(copies, 2); ++i) launch(i, stream);  // plans and first-touch outside the capture
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < repeats; ++i) launch(i % copies, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  constexpr int kReplays = 3;
  CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < kReplays; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 1000.0 * ms / (kReplays * repeats);
}

inline std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// `--rows 1,2,...` and `--repeats N` (the decode benches' flags) into `rows` / `repeats`; false,
// having named it on stderr, for any other flag.
inline bool parse_rows_and_repeats(int argc, char** argv, const char* program, std::vector<int64_t>& rows,
                                   int& repeats) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") rows = parse_list(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "%s: unknown flag %s\n", program, flag.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace surogate::bench
