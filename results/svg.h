// Charts as inline SVG, generated here so that a report needs no network and
// no script: line charts (curves over steps), grouped bar charts (a value per
// layer and run) and heatmaps (layer x head). Hover text comes from SVG
// <title> elements, which browsers show natively.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace sink::results::svg {

// Ten colors that stay distinct for most readers (Tableau 10).
const std::string& palette(size_t k);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y are gaps
  size_t color = 0;                               // palette index
  int dash = 0;                                   // 0 solid; 1, 2, ... dash patterns (other seeds)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  double y_min = NAN, y_max = NAN;  // NaN: from the data
  int width = 620, height = 340;    // of the plot and its labels; the legend adds height
};
std::string line_chart(const LineChart& c);

struct BarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;  // along x, e.g. "layer 0"
  struct Bars {
    std::string name;
    std::vector<double> values;  // one per category; non-finite: no bar
    size_t color = 0;
  };
  std::vector<Bars> bars;
  int width = 620, height = 340;
};
std::string bar_chart(const BarChart& c);

struct Heatmap {
  std::string title, row_label = "layer", col_label = "head", value_label;
  std::vector<std::vector<double>> cells;  // [row][col]
  double lo = 0, hi = 1;                   // the color scale
};
std::string heatmap(const Heatmap& h);

// Round tick values covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// Viridis, t in [0, 1]: perceptually even, readable in gray.
std::string viridis(double t);

}  // namespace sink::results::svg
