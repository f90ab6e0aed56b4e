// scan_svg: a self-contained SVG line chart of a theory scan — the simulated TP bubble of rank 0
// along m (or p), one line with point markers per schedule, axes with "nice" ticks (1, 2, 5 x
// 10^k) and labels, a title with the fixed size and unit costs, and a legend giving each
// schedule's least-squares slope. No scripts, fonts or external references; fixed number formats.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "braid/svg_text.hpp"
#include "braid/theory.hpp"

namespace braid {

namespace {

std::string fmt(const char* f, double v) { return util::format(f, v == 0 ? 0.0 : v); }  // no "-0"
std::string px(double v) { return fmt("%.2f", v); }
std::string label(double v) { return fmt("%.6g", v); }

// Colour-blind-safe palette (Okabe-Ito).
const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                          "#E69F00", "#56B4E9", "#000000", "#F0E442"};

}  // namespace

std::string scan_svg(const ScanResult& scan) {
  const bool over_m = scan.spec.axis == ScanAxis::Microbatches;
  const double width = 960, height = 560;
  const double left = 90, right = 250, top = 70, bottom = 80;
  const double plot_w = width - left - right, plot_h = height - top - bottom;

  double x_min = scan.spec.from, x_max = scan.spec.to, y_max = 0;
  for (const ScanSeries& s : scan.series)
    for (const ScanPoint& p : s.points) y_max = std::max(y_max, p.tp_bubble_s);
  if (x_max <= x_min) x_max = x_min + 1;
  const double y_step = nice_step(y_max > 0 ? y_max : 1, 6);
  const double y_top = y_max > 0 ? std::ceil(y_max / y_step) * y_step : y_step;
  const double x_step = nice_step(x_max - x_min, 8);
  auto X = [&](double x) { return left + (x - x_min) / (x_max - x_min) * plot_w; };
  auto Y = [&](double y) { return top + plot_h - y / y_top * plot_h; };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" +
       px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
       "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"13\">\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + px(width) + "\" height=\"" + px(height) +
       "\" fill=\"#ffffff\"/>\n";
  const UniformCosts& c = scan.costs;
  const std::string fixed =
      over_m ? "p = " + std::to_string(scan.pp) : "m = " + std::to_string(scan.microbatches);
  o += "<text x=\"" + px(left) + "\" y=\"28\" font-size=\"17\" font-weight=\"bold\">" +
       std::string("TP bubble of rank 0 along ") + (over_m ? "m" : "p") + " (" + fixed +
       ")</text>\n";
  o += "<text x=\"" + px(left) +
       "\" y=\"50\" fill=\"#444444\">braid theory, uniform unit costs T_F " + label(c.tf) +
       ", T_B " + label(c.tb) + ", T_W " + label(c.tw) + ", T_AR " + label(c.tar) +
       " (per chunk)</text>\n";

  // Grid and y ticks.
  for (double y = 0; y <= y_top + y_step * 1e-9; y += y_step) {
    const std::string yy = px(Y(y));
    o += "<line x1=\"" + px(left) + "\" y1=\"" + yy + "\" x2=\"" + px(left + plot_w) + "\" y2=\"" +
         yy + "\" stroke=\"#e3e3e3\"/>\n";
    o += "<text x=\"" + px(left - 8) + "\" y=\"" + px(Y(y) + 4) + "\" text-anchor=\"end\">" +
         label(y) + "</text>\n";
  }
  // X ticks: both ends of the scan, and the multiples of the step at least 40 px from them.
  std::vector<double> xt{x_min};
  for (double x = std::ceil(x_min / x_step) * x_step; x <= x_max + 1e-9; x += x_step)
    if (X(x) - X(x_min) >= 40 && X(x_max) - X(x) >= 40) xt.push_back(x);
  xt.push_back(x_max);
  for (double x : xt) {
    const std::string xx = px(X(x));
    o += "<line x1=\"" + xx + "\" y1=\"" + px(top + plot_h) + "\" x2=\"" + xx + "\" y2=\"" +
         px(top + plot_h + 6) + "\" stroke=\"#333333\"/>\n";
    o += "<text x=\"" + xx + "\" y=\"" + px(top + plot_h + 22) + "\" text-anchor=\"middle\">" +
         label(x) + "</text>\n";
  }
  // Axes and their labels.
  o += "<line x1=\"" + px(left) + "\" y1=\"" + px(top) + "\" x2=\"" + px(left) + "\" y2=\"" +
       px(top + plot_h) + "\" stroke=\"#333333\"/>\n";
  o += "<line x1=\"" + px(left) + "\" y1=\"" + px(top + plot_h) + "\" x2=\"" + px(left + plot_w) +
       "\" y2=\"" + px(top + plot_h) + "\" stroke=\"#333333\"/>\n";
  o += "<text x=\"" + px(left + plot_w / 2) + "\" y=\"" + px(height - 25) +
       "\" text-anchor=\"middle\">" + (over_m ? "microbatches m" : "pipeline stages p") +
       "</text>\n";
  o += "<text transform=\"translate(" + px(28) + " " + px(top + plot_h / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">TP bubble of rank 0 (time units)</text>\n";

  // Series.
  for (std::size_t i = 0; i < scan.series.size(); ++i) {
    const ScanSeries& s = scan.series[i];
    const char* colour = kColours[i % (sizeof kColours / sizeof kColours[0])];
    std::string points;
    for (const ScanPoint& p : s.points)
      points += (points.empty() ? "" : " ") + px(X(p.x)) + "," + px(Y(p.tp_bubble_s));
    o += "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
         "\" stroke-width=\"2.5\" points=\"" + points + "\"/>\n";
    for (const ScanPoint& p : s.points)
      o += "<circle cx=\"" + px(X(p.x)) + "\" cy=\"" + px(Y(p.tp_bubble_s)) + "\" r=\"3\" fill=\"" +
           colour + "\"/>\n";
  }
  // Legend.
  const double lx = left + plot_w + 20;
  double ly = top + 10;
  o += "<text x=\"" + px(lx) + "\" y=\"" + px(ly) + "\" font-weight=\"bold\">schedule, slope per " +
       (over_m ? "m" : "p") + "</text>\n";
  for (std::size_t i = 0; i < scan.series.size(); ++i) {
    const ScanSeries& s = scan.series[i];
    const char* colour = kColours[i % (sizeof kColours / sizeof kColours[0])];
    ly += 24;
    o += "<line x1=\"" + px(lx) + "\" y1=\"" + px(ly - 4) + "\" x2=\"" + px(lx + 26) + "\" y2=\"" +
         px(ly - 4) + "\" stroke=\"" + colour + "\" stroke-width=\"2.5\"/>\n";
    o += "<text x=\"" + px(lx + 34) + "\" y=\"" + px(ly) + "\">" + xml_escape(s.schedule) + ": " +
         label(s.slope) + "</text>\n";
    if (s.form.known) {
      ly += 17;
      o += "<text x=\"" + px(lx + 34) + "\" y=\"" + px(ly) +
           "\" fill=\"#555555\" font-size=\"11\">" + xml_escape("form " + s.form.formula) +
           "</text>\n";
    }
  }
  o += "</svg>\n";
  return o;
}

}  // namespace braid
