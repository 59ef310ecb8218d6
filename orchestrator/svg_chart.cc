#include "orchestrator/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::orchestrator {
namespace {

// Plot area inside the frame: room for the title, tick labels and the legend.
struct Plot {
  double left = 64, right, top = 34, bottom;
  double x_lo, x_hi, y_lo, y_hi;

  double X(double x) const {
    return x_hi > x_lo ? left + (x - x_lo) / (x_hi - x_lo) * (right - left) : (left + right) / 2;
  }
  double Y(double y) const {
    return y_hi > y_lo ? bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top) : (top + bottom) / 2;
  }
};

std::string Num(double value) { return absl::StrFormat("%.1f", value); }

std::string TickLabel(double value) {
  if (value == 0) return "0";
  double magnitude = std::fabs(value);
  if (magnitude >= 1e6 || magnitude < 1e-3) return absl::StrFormat("%.0e", value);
  if (magnitude >= 1e3) return absl::StrFormat("%.0f", value);
  return absl::StrFormat("%g", value);
}

// Widens a degenerate range so that a constant series sits mid-plot.
void Pad(double* lo, double* hi) {
  if (*hi > *lo) return;
  if (*lo == 0) {  // all zero: show [0, 1]
    *hi = 1;
    return;
  }
  double delta = std::fabs(*lo) * 0.1;
  *lo -= delta;
  *hi += delta;
}

std::string Open(const ChartFrame& frame) {
  return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", frame.width,
                      "\" height=\"", frame.height, "\" viewBox=\"0 0 ", frame.width, " ",
                      frame.height, "\" role=\"img\"><title>", EscapeXml(frame.title),
                      "</title><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
                      "<text x=\"",
                      frame.width / 2, "\" y=\"18\" text-anchor=\"middle\" class=\"t\">",
                      EscapeXml(frame.title), "</text>");
}

// Axes, grid lines, tick labels and axis labels. Returns the y ticks used (the range is
// extended to them).
std::string Axes(const ChartFrame& frame, Plot* plot, bool x_ticks = true) {
  std::string svg;
  std::vector<double> y_ticks = NiceTicks(plot->y_lo, plot->y_hi);
  plot->y_lo = std::min(plot->y_lo, y_ticks.front());
  plot->y_hi = std::max(plot->y_hi, y_ticks.back());
  for (double tick : y_ticks) {
    double y = plot->Y(tick);
    absl::StrAppend(&svg, "<line x1=\"", Num(plot->left), "\" y1=\"", Num(y), "\" x2=\"",
                    Num(plot->right), "\" y2=\"", Num(y), "\" class=\"g\"/><text x=\"",
                    Num(plot->left - 6), "\" y=\"", Num(y + 4),
                    "\" text-anchor=\"end\" class=\"k\">", TickLabel(tick), "</text>");
  }
  if (x_ticks) {
    for (double tick : NiceTicks(plot->x_lo, plot->x_hi, 6)) {
      if (tick < plot->x_lo || tick > plot->x_hi) continue;
      absl::StrAppend(&svg, "<text x=\"", Num(plot->X(tick)), "\" y=\"", Num(plot->bottom + 16),
                      "\" text-anchor=\"middle\" class=\"k\">", TickLabel(tick), "</text>");
    }
  }
  absl::StrAppend(&svg, "<line x1=\"", Num(plot->left), "\" y1=\"", Num(plot->bottom), "\" x2=\"",
                  Num(plot->right), "\" y2=\"", Num(plot->bottom), "\" class=\"a\"/>");
  absl::StrAppend(&svg, "<line x1=\"", Num(plot->left), "\" y1=\"", Num(plot->top), "\" x2=\"",
                  Num(plot->left), "\" y2=\"", Num(plot->bottom), "\" class=\"a\"/>");
  if (!frame.x_label.empty()) {
    absl::StrAppend(&svg, "<text x=\"", Num((plot->left + plot->right) / 2), "\" y=\"",
                    Num(plot->bottom + 32), "\" text-anchor=\"middle\" class=\"k\">",
                    EscapeXml(frame.x_label), "</text>");
  }
  if (!frame.y_label.empty()) {
    double middle = (plot->top + plot->bottom) / 2;
    absl::StrAppend(&svg, "<text x=\"14\" y=\"", Num(middle),
                    "\" text-anchor=\"middle\" class=\"k\" transform=\"rotate(-90 14 ", Num(middle),
                    ")\">", EscapeXml(frame.y_label), "</text>");
  }
  return svg;
}

// Legend entries in a row under the title.
std::string Legend(const Plot& plot,
                   const std::vector<std::pair<std::string, std::string>>& items) {
  std::string svg;
  double x = plot.left;
  for (const auto& [name, color] : items) {
    absl::StrAppend(&svg, "<rect x=\"", Num(x), "\" y=\"", Num(plot.top - 12),
                    "\" width=\"10\" height=\"10\" fill=\"", EscapeXml(color), "\"/><text x=\"",
                    Num(x + 14), "\" y=\"", Num(plot.top - 3), "\" class=\"k\">", EscapeXml(name),
                    "</text>");
    x += 26 + 6.5 * static_cast<double>(name.size());
  }
  return svg;
}

Plot MakePlot(const ChartFrame& frame) {
  Plot plot;
  plot.top = 44;
  plot.right = frame.width - 16;
  plot.bottom = frame.height - (frame.x_label.empty() ? 26 : 40);
  return plot;
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0};
  if (hi < lo) std::swap(lo, hi);
  Pad(&lo, &hi);
  double raw_step = (hi - lo) / std::max(1, target);
  double power = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = power;
  for (double multiple : {1.0, 2.0, 5.0, 10.0}) {
    step = multiple * power;
    if (step >= raw_step) break;
  }
  std::vector<double> ticks;
  double first = std::floor(lo / step) * step;
  for (double tick = first; tick <= hi + step * 0.5 && ticks.size() < 50; tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string LineChartSvg(const ChartFrame& frame, const std::vector<LineSeries>& series) {
  Plot plot = MakePlot(frame);
  plot.x_lo = plot.y_lo = std::numeric_limits<double>::infinity();
  plot.x_hi = plot.y_hi = -std::numeric_limits<double>::infinity();
  for (const LineSeries& line : series) {
    for (const auto& [x, y] : line.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      plot.x_lo = std::min(plot.x_lo, x);
      plot.x_hi = std::max(plot.x_hi, x);
      plot.y_lo = std::min(plot.y_lo, y);
      plot.y_hi = std::max(plot.y_hi, y);
    }
  }
  if (!std::isfinite(plot.x_lo)) plot.x_lo = 0, plot.x_hi = 1, plot.y_lo = 0, plot.y_hi = 1;
  if (frame.y_from_zero) {
    plot.y_lo = std::min(plot.y_lo, 0.0);
    plot.y_hi = std::max(plot.y_hi, 0.0);
  }
  Pad(&plot.x_lo, &plot.x_hi);
  Pad(&plot.y_lo, &plot.y_hi);

  std::string svg = Open(frame);
  absl::StrAppend(&svg, Axes(frame, &plot));
  std::vector<std::pair<std::string, std::string>> legend;
  for (const LineSeries& line : series) {
    legend.emplace_back(line.name, line.color);
    std::vector<std::pair<double, double>> points;
    for (const auto& point : line.points) {
      if (std::isfinite(point.first) && std::isfinite(point.second)) points.push_back(point);
    }
    std::sort(points.begin(), points.end());
    std::string path;
    for (const auto& [x, y] : points) {
      absl::StrAppend(&path, path.empty() ? "" : " ", Num(plot.X(x)), ",", Num(plot.Y(y)));
    }
    absl::StrAppend(&svg, "<polyline fill=\"none\" stroke=\"", EscapeXml(line.color),
                    "\" stroke-width=\"2\" points=\"", path, "\"/>");
    if (points.size() <= 40) {
      for (const auto& [x, y] : points) {
        absl::StrAppend(&svg, "<circle cx=\"", Num(plot.X(x)), "\" cy=\"", Num(plot.Y(y)),
                        "\" r=\"2.5\" fill=\"", EscapeXml(line.color), "\"/>");
      }
    }
  }
  absl::StrAppend(&svg, Legend(plot, legend), "</svg>");
  return svg;
}

std::string StackedBarChartSvg(const ChartFrame& frame, const std::vector<double>& x,
                               const std::vector<BarLayer>& layers) {
  Plot plot = MakePlot(frame);
  std::vector<double> totals(x.size(), 0.0);
  for (const BarLayer& layer : layers) {
    for (size_t i = 0; i < x.size() && i < layer.values.size(); ++i) {
      double value = layer.values[i];
      if (std::isfinite(value) && value > 0) totals[i] += value;
    }
  }
  plot.x_lo = x.empty() ? 0 : *std::min_element(x.begin(), x.end()) - 0.5;
  plot.x_hi = x.empty() ? 1 : *std::max_element(x.begin(), x.end()) + 0.5;
  plot.y_lo = 0;
  plot.y_hi = totals.empty() ? 1 : *std::max_element(totals.begin(), totals.end());
  Pad(&plot.y_lo, &plot.y_hi);

  std::string svg = Open(frame);
  absl::StrAppend(&svg, Axes(frame, &plot));
  double bar_width = std::max(1.0, (plot.right - plot.left) / std::max<size_t>(1, x.size()) * 0.8);
  for (size_t i = 0; i < x.size(); ++i) {
    double base = 0;
    for (const BarLayer& layer : layers) {
      double value = i < layer.values.size() ? layer.values[i] : 0;
      if (!std::isfinite(value) || value <= 0) continue;
      double y_top = plot.Y(base + value);
      absl::StrAppend(&svg, "<rect x=\"", Num(plot.X(x[i]) - bar_width / 2), "\" y=\"", Num(y_top),
                      "\" width=\"", Num(bar_width), "\" height=\"", Num(plot.Y(base) - y_top),
                      "\" fill=\"", EscapeXml(layer.color), "\"/>");
      base += value;
    }
  }
  std::vector<std::pair<std::string, std::string>> legend;
  for (const BarLayer& layer : layers) legend.emplace_back(layer.name, layer.color);
  absl::StrAppend(&svg, Legend(plot, legend), "</svg>");
  return svg;
}

std::string BarChartSvg(const ChartFrame& frame, const std::vector<std::string>& labels,
                        const std::vector<double>& values, const std::string& color) {
  Plot plot = MakePlot(frame);
  plot.x_lo = -0.5;
  plot.x_hi = static_cast<double>(labels.size()) - 0.5;
  plot.y_lo = 0;
  plot.y_hi = 0;
  for (double value : values) {
    if (std::isfinite(value)) plot.y_hi = std::max(plot.y_hi, value);
  }
  Pad(&plot.x_lo, &plot.x_hi);
  Pad(&plot.y_lo, &plot.y_hi);
  plot.y_lo = 0;

  std::string svg = Open(frame);
  absl::StrAppend(&svg, Axes(frame, &plot, /*x_ticks=*/false));
  double bar_width =
      std::max(1.0, (plot.right - plot.left) / std::max<size_t>(1, labels.size()) * 0.7);
  for (size_t i = 0; i < labels.size(); ++i) {
    double x = plot.X(static_cast<double>(i));
    double value = i < values.size() && std::isfinite(values[i]) ? values[i] : 0;
    double y_top = plot.Y(value);
    absl::StrAppend(&svg, "<rect x=\"", Num(x - bar_width / 2), "\" y=\"", Num(y_top),
                    "\" width=\"", Num(bar_width), "\" height=\"", Num(plot.Y(0) - y_top),
                    "\" fill=\"", EscapeXml(color), "\"/><text x=\"", Num(x), "\" y=\"",
                    Num(plot.bottom + 16), "\" text-anchor=\"middle\" class=\"k\">",
                    EscapeXml(labels[i]), "</text>");
  }
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

}  // namespace lockstep::orchestrator
