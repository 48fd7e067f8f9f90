// What the user sees while training: on a terminal one live line rewritten in place
// (step/total, epoch, loss, lr, grad norm, tokens/s, ETA); otherwise (a pipe, a log file) one
// plain line per step, so logs stay readable. Evaluation results and messages always get their
// own line. At the end, a summary table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::train {

struct StepReport {
  int64_t step = 0;  // 1-based
  int64_t total_steps = 0;
  double epoch = 0.0;
  double loss = 0.0;
  double learning_rate = 0.0;
  double grad_norm = 0.0;
  double tokens_per_second = 0.0;
  double eta_seconds = 0.0;
};

class ProgressDisplay {
public:
  // `live`: rewrite one line (a terminal); otherwise print a line per step. `silent`: print
  // nothing (the processes of a data-parallel world other than rank 0's, whose lines would repeat it).
  explicit ProgressDisplay(bool live, bool silent = false);
  static bool stdout_is_terminal();

  void step(const StepReport& report);
  void message(const std::string& line);  // ends the live line first
  void finish();

private:
  bool live_;
  bool silent_;
  bool line_open_ = false;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

// A two-column table ("key  value") framed with a title, for the end-of-run summary.
std::string format_summary_table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows);

}  // namespace surogate::train
