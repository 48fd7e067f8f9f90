// The end-of-run report: one self-contained HTML file (inline SVG, no scripts, no external
// assets) with the training loss (and eval loss), learning rate and gradient norm plotted
// against the step (and the GPU plots of `log_gpu_util`), plus the summary table. Each plotted
// line carries its exact values in a `data-points` attribute ("step:value step:value ...", as
// the JSONL log has them), so tools can read the numbers back without undoing the pixel scale.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::train {

struct Series {
  std::string label;
  std::string color;  // CSS colour
  std::vector<std::pair<double, double>> points;  // (step, value)
};

// One SVG line plot; empty series are skipped; non-finite values are left out.
// Each line is <polyline data-series="label" data-points="step:value ...">.
// The points (step, record[key]) of the records that have a number under `key`.
Series history_series(const nlohmann::json& records, const std::string& key, const std::string& label,
                      const std::string& color);

std::string svg_line_plot(const std::string& title, const std::vector<Series>& series, int width = 640, int height = 260);

// `history` / `eval_history`: TrainingState's per-step and per-eval records ("step", "loss",
// "lr", "grad_norm"; "step", "eval_loss").
void write_html_report(const std::filesystem::path& file, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& eval_history,
                       const std::vector<std::pair<std::string, std::string>>& summary,
                       const std::vector<std::pair<std::string, std::vector<Series>>>& extra_plots = {});

}  // namespace surogate::train
