// `report_to: [wandb, aim]`: the experiment trackers are fed by a helper process running the
// official Python SDKs (train/observe/tracker_helper.py, compiled into the binary as a string and run with
// `python3 -u -c`; SUROGATE_PYTHON picks another interpreter). The engine writes JSON lines to
// the helper's stdin: one "start" message (tracker settings, the resolved configuration, whether
// the run resumed), then every record of the JSONL log exactly as it is logged (so step numbers
// and values are the log's), then "finish". The training loop never waits on it: send() only
// queues; a writer thread owns the socket. A helper that cannot start, or dies, costs one
// warning and no training; the helper itself warns once per tracker that fails and carries on
// with the others. The helper's (and the SDKs') own output goes to a log file in output_dir.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace surogate::train {

struct TrackerSetup {
  nlohmann::json start;                // the "start" message (see tracker_helper.py)
  std::filesystem::path helper_log;    // where the helper's stdout / stderr go
};

// The helper's settings for a run: trackers, wandb_project / wandb_name, aim_experiment /
// aim_repo / aim_name (names default to the run name), the resolved configuration, the ids file
// trackers.json in the checkpoint folder (read back when `resumed`), the helper log
// output_dir/trackers-<run>.log and wandb's folder output_dir (unless WANDB_DIR is set).
TrackerSetup tracker_setup(const Config& config, const std::string& run_name, bool resumed);

class TrackerFeed {
 public:
  using Warn = std::function<void(const std::string&)>;
  // Starts the helper. When it cannot be started, calls `warn` once and returns null.
  static std::unique_ptr<TrackerFeed> start(const TrackerSetup& setup, const Warn& warn);
  // Without finish() (the run failed): closes the stream, so the helper marks the runs failed,
  // and waits for it a short while.
  ~TrackerFeed();
  TrackerFeed(const TrackerFeed&) = delete;
  TrackerFeed& operator=(const TrackerFeed&) = delete;

  // Queues one record; never blocks on the helper.
  void send(const nlohmann::json& record);
  // Sends "finish", closes the stream and waits up to `timeout` for the helper to flush its
  // trackers and exit (then stops it). Calls `warn` if the helper failed or had to be stopped.
  void finish(std::chrono::seconds timeout, const Warn& warn);

 private:
  TrackerFeed(int socket, int pid, std::filesystem::path helper_log);
  void write_loop();
  void close_stream();
  // Waits for the helper's exit up to `timeout` (then SIGTERM, then SIGKILL); returns a problem
  // to report, or "".
  std::string wait_for_helper(std::chrono::seconds timeout);

  int socket_ = -1;
  int pid_ = -1;
  std::filesystem::path helper_log_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;
  bool closing_ = false;
  bool broken_ = false;     // the helper stopped reading
  size_t dropped_ = 0;      // records not queued because the queue was full
  std::chrono::steady_clock::time_point give_up_at_;  // closing: a helper not reading by then is left
  std::thread writer_;
};

}  // namespace surogate::train
