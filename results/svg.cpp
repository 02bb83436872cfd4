#include "results/svg.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "results/text_table.h"

namespace sink::results::svg {
namespace {

constexpr const char* kFont = "font-family=\"system-ui, 'DejaVu Sans', sans-serif\"";
constexpr double kLeft = 66, kRight = 18, kTop = 36, kBottom = 48;
constexpr const char* kDashes[] = {"", "6 3", "2 3", "8 3 2 3", "4 4"};

std::string esc(const std::string& s) { return html_escape(s); }

double nice_step(double range, int target) {
  double raw = range / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag;
  double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return nice * mag;
}

// As many decimals as x needs to be exact: 0.0025 needs four, 0.5 one, 3 none.
int decimals_of(double x) {
  int decimals = 0;
  while (decimals < 6 && std::fabs(x * std::pow(10.0, decimals) - std::round(x * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  return decimals;
}

// Tick labels with just the decimals their step needs; thousands as "k"; millions and billions (tokens seen) as
// "M" and "B", with the decimals the value needs (2.5M, 5M).
std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;
  if (step >= 1e5) {
    const double unit = step >= 1e8 ? 1e9 : 1e6;
    return fmt::format("{:.{}f}{}", v / unit, decimals_of(v / unit), unit == 1e9 ? "B" : "M");
  }
  if (step >= 1000 && std::fmod(std::fabs(v), 1000) < 1e-9) return fmt::format("{}k", v / 1000);
  return fmt::format("{:.{}f}", v, decimals_of(step));
}

// A hovered point's x: a whole number as it is, millions (tokens seen) to six digits.
std::string exact_label(double x) { return std::fabs(x) >= 1e6 ? fmt::format("{:.6g}M", x / 1e6) : tick_label(x, 1); }

struct Range {
  double lo, hi, step;
  std::vector<double> ticks;
};

// Extends [lo, hi] outward to whole steps so that the axis ends on a label.
Range axis_range(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    double pad = std::fabs(hi) > 0 ? std::fabs(hi) * 0.1 : 1;
    lo -= pad, hi += pad;
  }
  Range r{lo, hi, nice_step(hi - lo, target), {}};
  r.lo = std::floor(lo / r.step + 1e-9) * r.step;
  r.hi = std::ceil(hi / r.step - 1e-9) * r.step;
  for (double t = r.lo; t <= r.hi + r.step * 1e-6; t += r.step) r.ticks.push_back(t);
  return r;
}

std::string open_svg(int width, int height, const std::string& title) {
  return fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\" {3}>\n<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{4}\" y=\"20\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">{2}</text>\n",
      width, height, esc(title), kFont, kLeft);
}

// Axes with grid lines and labels around the plot rectangle [x0,x1] x [y0,y1].
std::string axes(double x0, double x1, double y0, double y1, const Range& yr, const std::string& x_label,
                 const std::string& y_label) {
  std::string out = "<g font-size=\"11\" fill=\"#444\">\n";
  for (double t : yr.ticks) {
    double y = y1 - (t - yr.lo) / (yr.hi - yr.lo) * (y1 - y0);
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n", x0, y,
                       x1, y);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", x0 - 6, y + 4,
                       tick_label(t, yr.step));
  }
  out +=
      fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>\n", x0, y0, y1);
  out +=
      fmt::format("<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>\n", x0, x1, y1);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
                     (x0 + x1) / 2, y1 + 36, esc(x_label));
  out += fmt::format(
      "<text transform=\"translate(16 {:.1f}) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
      (y0 + y1) / 2, esc(y_label));
  return out + "</g>\n";
}

// Marks where the data is drawn: the browser test looks for colored marks
// inside it, so that a legend alone does not pass for a chart.
std::string plot_area(double x0, double y0, double x1, double y1) {
  return fmt::format(
      "<rect class=\"plot-area\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\"/>\n", x0,
      y0, x1 - x0, y1 - y0);
}

struct LegendItem {
  std::string name;
  size_t color;
  int dash;
  bool box;  // a filled box (bars) rather than a line sample
};

// Legend below the plot, in as many columns as fit; returns its height.
double legend_height(const std::vector<LegendItem>& items, int width, size_t* columns, double* item_w) {
  size_t longest = 0;
  for (const auto& i : items) longest = std::max(longest, i.name.size());
  *item_w = 34 + 6.4 * static_cast<double>(longest);
  *columns = std::max<size_t>(1, static_cast<size_t>((width - kLeft - kRight) / *item_w));
  size_t rows = (items.size() + *columns - 1) / *columns;
  return items.empty() ? 0 : 10 + 17.0 * static_cast<double>(rows);
}

std::string legend(const std::vector<LegendItem>& items, double top, size_t columns, double item_w) {
  std::string out = "<g font-size=\"11\" fill=\"#333\">\n";
  for (size_t k = 0; k < items.size(); ++k) {
    double x = kLeft + static_cast<double>(k % columns) * item_w;
    double y = top + 10 + 17.0 * static_cast<double>(k / columns);
    const auto& it = items[k];
    if (it.box)
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"10\" fill=\"{}\"/>\n", x, y + 1,
                         palette(it.color));
    else
      out += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2.5\" "
          "stroke-dasharray=\"{}\"/>\n",
          x, y + 6, x + 22, y + 6, palette(it.color), kDashes[it.dash % 5]);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x + 28, y + 10, esc(it.name));
  }
  return out + "</g>\n";
}

}  // namespace

const std::string& palette(size_t k) {
  static const std::vector<std::string> colors = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return colors[k % colors.size()];
}

std::vector<double> nice_ticks(double lo, double hi, int target) { return axis_range(lo, hi, target).ticks; }

std::string viridis(double t) {
  static const double stops[][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) * 4 : 0;
  int i = std::min(3, static_cast<int>(t));
  double f = t - i;
  auto mix = [&](int c) { return static_cast<int>(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c]))); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2));
}

std::string line_chart(const LineChart& c) {
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xlo = std::min(xlo, x), xhi = std::max(xhi, x), ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  if (std::isfinite(c.y_min)) ylo = c.y_min;
  if (std::isfinite(c.y_max)) yhi = std::max(yhi, c.y_max);
  Range xr = axis_range(xlo, xhi, 6), yr = axis_range(ylo, yhi, 5);
  std::vector<LegendItem> items;
  for (const auto& s : c.series) items.push_back({s.name, s.color, s.dash, false});
  size_t columns = 1;
  double item_w = 0;
  double lh = legend_height(items, c.width, &columns, &item_w);
  const double x0 = kLeft, x1 = c.width - kRight, y0 = kTop, y1 = c.height - kBottom;
  auto px = [&](double x) { return x0 + (x - xr.lo) / (xr.hi - xr.lo) * (x1 - x0); };
  auto py = [&](double y) { return y1 - (y - yr.lo) / (yr.hi - yr.lo) * (y1 - y0); };

  std::string out = open_svg(c.width, static_cast<int>(c.height + lh), c.title);
  out += axes(x0, x1, y0, y1, yr, c.x_label, c.y_label) + plot_area(x0, y0, x1, y1);
  out += "<g font-size=\"11\" fill=\"#444\">\n";
  for (double t : xr.ticks)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(t), y1 + 16,
                       tick_label(t, xr.step));
  out += "</g>\n";
  for (const auto& s : c.series) {
    std::string d;
    bool pen_down = false, any_line = false;
    size_t finite = 0;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        pen_down = false;
        continue;
      }
      d += fmt::format("{}{:.1f} {:.1f} ", pen_down ? "L" : "M", px(x), py(y));
      any_line = any_line || pen_down;
      pen_down = true;
      ++finite;
    }
    out += fmt::format("<g class=\"series\"><title>{}</title>\n", esc(s.name));
    if (any_line)
      out += fmt::format(
          "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"{}\" "
          "stroke-linejoin=\"round\"/>\n",
          d, palette(s.color), kDashes[s.dash % 5]);
    // Markers show single points and carry the exact value on hover.
    if (finite <= 60)
      for (const auto& [x, y] : s.points)
        if (std::isfinite(x) && std::isfinite(y))
          out += fmt::format(
              "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {} = {}, {} = "
              "{:.4g}</title></circle>\n",
              px(x), py(y), palette(s.color), esc(s.name), esc(c.x_label), exact_label(x), esc(c.y_label), y);
    out += "</g>\n";
  }
  out += legend(items, c.height, columns, item_w);
  return out + "</svg>\n";
}

std::string bar_chart(const BarChart& c) {
  double lo = 0, hi = -INFINITY;
  for (const auto& b : c.bars)
    for (double v : b.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  Range yr = axis_range(lo, std::isfinite(hi) ? hi : 1, 5);
  std::vector<LegendItem> items;
  for (const auto& b : c.bars) items.push_back({b.name, b.color, 0, true});
  size_t columns = 1;
  double item_w = 0;
  double lh = legend_height(items, c.width, &columns, &item_w);
  const double x0 = kLeft, x1 = c.width - kRight, y0 = kTop, y1 = c.height - kBottom;
  auto py = [&](double y) { return y1 - (y - yr.lo) / (yr.hi - yr.lo) * (y1 - y0); };

  std::string out = open_svg(c.width, static_cast<int>(c.height + lh), c.title);
  out += axes(x0, x1, y0, y1, yr, c.x_label, c.y_label) + plot_area(x0, y0, x1, y1);
  const double group_w = (x1 - x0) / static_cast<double>(std::max<size_t>(1, c.categories.size()));
  // Capped: one run of a one-layer model should not paint a wall.
  const double bar_w = std::min(48.0, group_w * 0.8 / static_cast<double>(std::max<size_t>(1, c.bars.size())));
  const double bars_w = bar_w * static_cast<double>(c.bars.size());
  for (size_t k = 0; k < c.categories.size(); ++k) {
    double gx = x0 + group_w * static_cast<double>(k);
    out +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#444\">{}</text>\n",
                    gx + group_w / 2, y1 + 16, esc(c.categories[k]));
    for (size_t b = 0; b < c.bars.size(); ++b) {
      double v = k < c.bars[b].values.size() ? c.bars[b].values[k] : NAN;
      if (!std::isfinite(v)) continue;
      double top = py(std::max(v, 0.0)), bottom = py(std::min(v, 0.0));
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}, {}: "
          "{:.4g}</title></rect>\n",
          gx + (group_w - bars_w) / 2 + bar_w * static_cast<double>(b), top, std::max(bar_w - 1, 1.0),
          std::max(bottom - top, 0.5), palette(c.bars[b].color), esc(c.bars[b].name), esc(c.categories[k]), v);
    }
  }
  out += legend(items, c.height, columns, item_w);
  return out + "</svg>\n";
}

std::string heatmap(const Heatmap& h) {
  const size_t rows = h.cells.size();
  size_t cols = 0;
  for (const auto& r : h.cells) cols = std::max(cols, r.size());
  const double cw = std::clamp(360.0 / std::max<size_t>(1, cols), 18.0, 56.0);
  const double ch = std::clamp(260.0 / std::max<size_t>(1, rows), 14.0, 36.0);
  const double x0 = kLeft, y0 = kTop + 20;
  const double x1 = x0 + cw * static_cast<double>(cols), y1 = y0 + ch * static_cast<double>(rows);
  // Wide enough for the title (a run name), at about 8.5 px per bold character.
  const int width =
      static_cast<int>(std::max({x1 + 110, 300.0, kLeft + 8.5 * static_cast<double>(h.title.size()) + 12}));
  const int height = static_cast<int>(std::max(y1, y0 + 60) + 30);
  const bool labels = cw >= 34 && ch >= 16;
  auto scaled = [&](double v) { return (v - h.lo) / (h.hi - h.lo); };

  std::string out = open_svg(width, height, h.title);
  out += "<g font-size=\"11\" fill=\"#444\">\n";
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
                     (x0 + x1) / 2, kTop + 2, esc(h.col_label));
  for (size_t c = 0; c < cols; ++c)
    if (cols <= 24 || c % 4 == 0)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x0 + cw * (c + 0.5),
                         y0 - 5, c);
  out += fmt::format(
      "<text transform=\"translate(16 {:.1f}) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
      (y0 + y1) / 2, esc(h.row_label));
  for (size_t r = 0; r < rows; ++r)
    if (rows <= 24 || r % 4 == 0)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", x0 - 6,
                         y0 + ch * (r + 0.5) + 4, r);
  out += "</g>\n" + plot_area(x0, y0, x1, y1) + "<g>\n";
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < h.cells[r].size(); ++c) {
      double v = h.cells[r][c];
      std::string fill = std::isfinite(v) ? viridis(scaled(v)) : "#dddddd";
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#ffffff\" "
          "stroke-width=\"1\">"
          "<title>{} {}, {} {}: {} = {:.3f}</title></rect>\n",
          x0 + cw * c, y0 + ch * r, cw, ch, fill, esc(h.row_label), r, esc(h.col_label), c, esc(h.value_label), v);
      if (labels && std::isfinite(v))
        out += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\" "
            "pointer-events=\"none\">{:.2f}</text>\n",
            x0 + cw * (c + 0.5), y0 + ch * (r + 0.5) + 3.5, scaled(v) > 0.6 ? "#222" : "#fff", v);
    }
  out += "</g>\n";
  // Color scale: stacked boxes rather than a gradient, whose id would have to
  // be unique across every chart of the page.
  const double bx = x1 + 18, bar_h = std::max(y1 - y0, 60.0);
  const int steps = 24;
  out += "<g font-size=\"10\" fill=\"#444\">\n";
  for (int k = 0; k < steps; ++k)
    out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"{:.2f}\" fill=\"{}\"/>\n", bx,
                       y0 + bar_h * k / steps, bar_h / steps + 0.3, viridis(1.0 - (k + 0.5) / steps));
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", bx, y0 - 5, esc(h.value_label));
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:g}</text>\n", bx + 16, y0 + 8, h.hi);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:g}</text>\n", bx + 16, y0 + bar_h, h.lo);
  return out + "</g>\n</svg>\n";
}

}  // namespace sink::results::svg
