// Small inline-SVG charts for the run report: line charts, stacked bars and plain bars, with
// "nice" axis ticks, a legend, and no script or external resource (the page must render
// offline and in headless Chromium).
//
// Pure functions of their arguments: thread-safe.
#ifndef LOCKSTEP_ORCHESTRATOR_SVG_CHART_H_
#define LOCKSTEP_ORCHESTRATOR_SVG_CHART_H_

#include <string>
#include <utility>
#include <vector>

namespace lockstep::orchestrator {

struct ChartFrame {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 540;
  int height = 260;
  bool y_from_zero = true;  // include 0 in the y range
};

// One line of a line chart; points need not be sorted (they are drawn in x order).
struct LineSeries {
  std::string name;
  std::string color;  // CSS color
  std::vector<std::pair<double, double>> points;
};

// A line chart (with point markers when a series has few points). Non-finite points are
// skipped.
std::string LineChartSvg(const ChartFrame& frame, const std::vector<LineSeries>& series);

// One layer of a stacked bar chart: values[i] belongs to the bar at x[i].
struct BarLayer {
  std::string name;
  std::string color;
  std::vector<double> values;
};

// Bars at positions `x` (one per step), each the stack of the layers' values (negative and
// non-finite values count as 0).
std::string StackedBarChartSvg(const ChartFrame& frame, const std::vector<double>& x,
                               const std::vector<BarLayer>& layers);

// Labelled bars (a histogram): one bar per label.
std::string BarChartSvg(const ChartFrame& frame, const std::vector<std::string>& labels,
                        const std::vector<double>& values, const std::string& color);

// Up to about `target` round tick values (1, 2 or 5 times a power of ten) covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

// Text safe inside XML/HTML element content and attribute values.
std::string EscapeXml(const std::string& text);

}  // namespace lockstep::orchestrator

#endif  // LOCKSTEP_ORCHESTRATOR_SVG_CHART_H_
