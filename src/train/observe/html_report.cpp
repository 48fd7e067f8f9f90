// HTML report with SVG plots; see html_report.h.
#include "train/observe/html_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "train/checkpoint_store.h"

namespace surogate::train {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

Series series_of(const nlohmann::json& records, const std::string& key, const std::string& label,
                 const std::string& color) {
  Series series{label, color, {}};
  for (const auto& record : records) {
    if (record.contains(key) && record[key].is_number() && record.contains("step")) {
      series.points.emplace_back(record["step"].get<double>(), record[key].get<double>());
    }
  }
  return series;
}

}  // namespace

Series history_series(const nlohmann::json& records, const std::string& key, const std::string& label,
                      const std::string& color) {
  return series_of(records, key, label, color);
}

std::string svg_line_plot(const std::string& title, const std::vector<Series>& series, int width, int height) {
  const double left = 64, right = 16, top = 28, bottom = 36;
  double min_x = std::numeric_limits<double>::infinity(), max_x = -min_x, min_y = min_x, max_y = -min_x;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      min_x = std::min(min_x, x), max_x = std::max(max_x, x);
      min_y = std::min(min_y, y), max_y = std::max(max_y, y);
    }
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"18\" font-family=\"sans-serif\" font-size=\"14\">{3}</text>\n",
      width, height, left, escape(title));
  if (!std::isfinite(min_x)) return svg + "<text x=\"70\" y=\"80\" font-family=\"sans-serif\">no data</text></svg>\n";
  if (max_x == min_x) max_x = min_x + 1;
  if (max_y == min_y) max_y = min_y + (min_y == 0 ? 1 : std::abs(min_y) * 0.1);
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  auto px = [&](double x) { return left + (x - min_x) / (max_x - min_x) * plot_w; };
  auto py = [&](double y) { return top + (1 - (y - min_y) / (max_y - min_y)) * plot_h; };
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", left, top,
                     plot_w, plot_h);
  for (int tick = 0; tick <= 4; ++tick) {
    double value = min_y + (max_y - min_y) * tick / 4.0;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-family=\"sans-serif\" font-size=\"10\" text-anchor=\"end\">{:.3g}</text>\n",
                       left - 4, py(value) + 3, value);
    double step = min_x + (max_x - min_x) * tick / 4.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"10\" text-anchor=\"middle\">{:.0f}</text>\n",
                       px(step), height - bottom + 14, step);
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"10\" text-anchor=\"middle\">step</text>\n",
                     left + plot_w / 2, height - 6);
  int legend = 0;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string points, values;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      values += fmt::format("{}{}:{}", values.empty() ? "" : " ", x, y);  // shortest round-trip form
    }
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\" data-series=\"{}\" "
        "data-points=\"{}\"/>\n",
        s.color, points, escape(s.label), values);
    if (s.points.size() == 1) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(s.points[0].first),
                         py(s.points[0].second), s.color);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"11\" fill=\"{}\">{}</text>\n",
                       width - right - 120, top + 14 + 14 * legend++, s.color, escape(s.label));
  }
  return svg + "</svg>\n";
}

void write_html_report(const std::filesystem::path& file, const std::string& title, const nlohmann::json& history,
                       const nlohmann::json& eval_history,
                       const std::vector<std::pair<std::string, std::string>>& summary,
                       const std::vector<std::pair<std::string, std::vector<Series>>>& extra_plots) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:24px}}table{{border-collapse:collapse}}"
      "td{{border:1px solid #ccc;padding:4px 10px}}</style></head><body>\n<h1>{0}</h1>\n<table>\n",
      escape(title));
  for (const auto& [key, value] : summary) {
    html += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", escape(key), escape(value));
  }
  html += "</table>\n";
  html += svg_line_plot("loss", {series_of(history, "loss", "train loss", "#1f77b4"),
                                 series_of(eval_history, "eval_loss", "eval loss", "#d62728")});
  html += svg_line_plot("learning rate", {series_of(history, "lr", "learning rate", "#2ca02c")});
  html += svg_line_plot("gradient norm", {series_of(history, "grad_norm", "grad norm (before clipping)", "#9467bd")});
  for (const auto& [plot_title, series] : extra_plots) html += svg_line_plot(plot_title, series);
  html += "</body></html>\n";
  write_file_atomically(file, html);
}

}  // namespace surogate::train
