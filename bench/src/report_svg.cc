// The suite's rows as an SVG plot: GB/s against n on a log2 axis, one panel per operation x
// dtype (a row of panels per operation), one line per algorithm, the copy dashed in black.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gpuscan/bench/report.h"

namespace gpuscan::bench {
namespace {

constexpr double kPanelW = 470, kPanelH = 300;
constexpr double kLeft = 58, kRight = 130, kTop = 30, kBottom = 42;  // margins inside a panel
constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string Fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

struct Series {
  std::string name;
  bool is_copy = false;
  std::vector<std::pair<double, double>> points;  // (log2 n, GB/s)
};

struct Panel {
  std::string operation, dtype;
  std::vector<Series> series;
  Series& Get(const std::string& name, bool is_copy) {
    for (Series& s : series) {
      if (s.name == name) return s;
    }
    series.push_back(Series{name, is_copy, {}});
    return series.back();
  }
};

// A round step near range / 5 (1, 2 or 5 times a power of ten).
double NiceStep(double range) {
  const double raw = range / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

std::string ToSvg(const std::vector<Row>& rows, const std::string& title) {
  // Panels in order of first appearance; a copy row belongs to the operation it stands for.
  std::vector<std::string> ops, dtypes, algorithms;
  std::vector<Panel> panels;
  double xmin = 1e9, xmax = -1e9;
  auto index_of = [](std::vector<std::string>& v, const std::string& s) {
    auto it = std::find(v.begin(), v.end(), s);
    if (it != v.end()) return static_cast<std::size_t>(it - v.begin());
    v.push_back(s);
    return v.size() - 1;
  };
  for (const Row& r : rows) {
    if (r.elements == 0 || !(r.gbps > 0)) continue;
    const bool is_copy = r.operation == "copy";
    const std::string op = is_copy ? r.algorithm : r.operation;
    const std::string dtype(types::Name(r.dtype));
    index_of(ops, op);
    index_of(dtypes, dtype);
    if (!is_copy) index_of(algorithms, r.algorithm);
    Panel* panel = nullptr;
    for (Panel& p : panels) {
      if (p.operation == op && p.dtype == dtype) panel = &p;
    }
    if (!panel) {
      panels.push_back(Panel{op, dtype, {}});
      panel = &panels.back();
    }
    const double x = std::log2(double(r.elements));
    xmin = std::min(xmin, x);
    xmax = std::max(xmax, x);
    panel->Get(is_copy ? "copy (same bytes)" : r.algorithm, is_copy).points.push_back({x, r.gbps});
  }
  if (xmax <= xmin) {
    xmin -= 1;
    xmax += 1;
  }
  const double header = title.empty() ? 10 : 34;
  const double width = kPanelW * std::max<std::size_t>(1, dtypes.size());
  const double height = header + kPanelH * std::max<std::size_t>(1, ops.size());
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fmt("%.0f", width) +
                    "\" height=\"" + Fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!title.empty()) {
    svg += "<text x=\"" + Fmt("%.0f", width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
           Escape(title) + "</text>\n";
  }
  for (const Panel& p : panels) {
    const double ox = kPanelW * double(index_of(dtypes, p.dtype));
    const double oy = header + kPanelH * double(index_of(ops, p.operation));
    const double pw = kPanelW - kLeft - kRight, ph = kPanelH - kTop - kBottom;
    double ymax = 0;
    for (const Series& s : p.series) {
      for (auto& pt : s.points) ymax = std::max(ymax, pt.second);
    }
    const double step = NiceStep(ymax > 0 ? ymax : 1);
    ymax = step * std::ceil((ymax > 0 ? ymax : 1) / step);
    auto X = [&](double x) { return ox + kLeft + (x - xmin) / (xmax - xmin) * pw; };
    auto Y = [&](double y) { return oy + kTop + ph - y / ymax * ph; };
    svg += "<g>\n<text x=\"" + Fmt("%.1f", ox + kLeft + pw / 2) + "\" y=\"" + Fmt("%.1f", oy + kTop - 10) +
           "\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">" + Escape(p.operation + " " + p.dtype) +
           "</text>\n";
    // Grid, ticks and axis labels.
    for (double y = 0; y <= ymax + step / 2; y += step) {
      svg += "<line x1=\"" + Fmt("%.1f", X(xmin)) + "\" x2=\"" + Fmt("%.1f", X(xmax)) + "\" y1=\"" +
             Fmt("%.1f", Y(y)) + "\" y2=\"" + Fmt("%.1f", Y(y)) + "\" stroke=\"#ddd\"/>\n";
      svg += "<text x=\"" + Fmt("%.1f", X(xmin) - 4) + "\" y=\"" + Fmt("%.1f", Y(y) + 4) +
             "\" text-anchor=\"end\">" + Fmt("%.0f", y) + "</text>\n";
    }
    const int xstep = (xmax - xmin) > 12 ? 4 : 2;
    for (int k = int(std::ceil(xmin)); k <= int(std::floor(xmax)); ++k) {
      if ((k - int(std::ceil(xmin))) % xstep) continue;
      svg += "<line x1=\"" + Fmt("%.1f", X(k)) + "\" x2=\"" + Fmt("%.1f", X(k)) + "\" y1=\"" + Fmt("%.1f", Y(0)) +
             "\" y2=\"" + Fmt("%.1f", Y(ymax)) + "\" stroke=\"#eee\"/>\n";
      svg += "<text x=\"" + Fmt("%.1f", X(k)) + "\" y=\"" + Fmt("%.1f", Y(0) + 15) +
             "\" text-anchor=\"middle\">2^" + std::to_string(k) + "</text>\n";
    }
    svg += "<rect x=\"" + Fmt("%.1f", X(xmin)) + "\" y=\"" + Fmt("%.1f", Y(ymax)) + "\" width=\"" + Fmt("%.1f", pw) +
           "\" height=\"" + Fmt("%.1f", ph) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    svg += "<text x=\"" + Fmt("%.1f", X(xmin) + pw / 2) + "\" y=\"" + Fmt("%.1f", Y(0) + 32) +
           "\" text-anchor=\"middle\">elements (log2)</text>\n";
    svg += "<text transform=\"translate(" + Fmt("%.1f", ox + 14) + "," + Fmt("%.1f", oy + kTop + ph / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">GB/s (bytes that must move)</text>\n";
    // One polyline per series, legend on the right.
    int legend = 0;
    for (const Series& s : p.series) {
      std::vector<std::pair<double, double>> pts = s.points;
      std::sort(pts.begin(), pts.end());
      const std::string color =
          s.is_copy ? "#000" : kPalette[index_of(algorithms, s.name) % (sizeof kPalette / sizeof *kPalette)];
      std::string path;
      for (auto& pt : pts) path += Fmt("%.1f,", X(pt.first)) + Fmt("%.1f ", Y(pt.second));
      svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + (s.is_copy ? "1.5" : "1.8") +
             "\"" + (s.is_copy ? " stroke-dasharray=\"5,3\"" : "") + " points=\"" + path + "\"/>\n";
      for (auto& pt : pts) {
        svg += "<circle cx=\"" + Fmt("%.1f", X(pt.first)) + "\" cy=\"" + Fmt("%.1f", Y(pt.second)) +
               "\" r=\"2.2\" fill=\"" + color + "\"/>\n";
      }
      const double ly = oy + kTop + 8 + 15 * legend++;
      const double lx = ox + kPanelW - kRight + 8;
      svg += "<line x1=\"" + Fmt("%.1f", lx) + "\" x2=\"" + Fmt("%.1f", lx + 16) + "\" y1=\"" + Fmt("%.1f", ly) +
             "\" y2=\"" + Fmt("%.1f", ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" +
             (s.is_copy ? " stroke-dasharray=\"5,3\"" : "") + "/>\n";
      svg += "<text x=\"" + Fmt("%.1f", lx + 20) + "\" y=\"" + Fmt("%.1f", ly + 4) + "\">" + Escape(s.name) +
             "</text>\n";
    }
    svg += "</g>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace gpuscan::bench
