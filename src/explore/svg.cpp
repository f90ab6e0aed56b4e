// sweep_svg: a scatter chart of throughput (tokens/s) against peak memory per GPU, one colour per
// schedule, rows over the memory cap drawn hollow, the cap as a dashed line and the Pareto front
// (no other row that fits is both faster and smaller) as a step line. Plain SVG text.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/design.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "braid/svg_text.hpp"
#include "format.hpp"

namespace braid {

namespace {

constexpr double kWidth = 960, kHeight = 600;
constexpr double kLeft = 90, kRight = 190, kTop = 56, kBottom = 64;

// The schedules a chart can show, in legend order: the registry's, then `designed`.
std::vector<std::string> chart_schedules() {
  std::vector<std::string> names = schedule_names();
  names.emplace_back(kDesignedName);
  return names;
}

const char* colour(const std::string& schedule) {
  static const char* const palette[] = {"#7f7f7f", "#8c564b", "#1f77b4", "#9467bd", "#ff7f0e",
                                        "#2ca02c", "#d62728", "#e377c2", "#17becf"};
  const std::vector<std::string> names = chart_schedules();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == schedule) return palette[i % 9];
  return "#000000";
}

struct Axis {
  double lo = 0, hi = 1, step = 1;
  // Screen coordinate of v between a (at lo) and b (at hi).
  double map(double v, double a, double b) const { return a + (v - lo) / (hi - lo) * (b - a); }
};

Axis make_axis(double lo, double hi, int target) {
  if (hi <= lo) {
    lo = lo - 1;
    hi = hi + 1;
  }
  Axis a;
  a.step = nice_step(hi - lo, target);
  a.lo = std::floor(lo / a.step) * a.step;
  a.hi = std::ceil(hi / a.step) * a.step;
  if (a.hi <= a.lo) a.hi = a.lo + a.step;
  return a;
}

std::string tokens_label(double v) {
  if (std::fabs(v) >= 1000) return util::format("%gk", std::round(v / 100) / 10);
  return util::format("%g", v);
}

}  // namespace

std::string sweep_svg(const SweepResult& result, const std::string& title) {
  const double cap_peak = result.mem_cap_gib;  // the peak a rank may reach, as the x axis
  // The x range covers the rows that fit and the cap with room to spare; rows far over the cap
  // (gpipe holds every microbatch) would squeeze the rest into a corner, so they are counted in a
  // note instead of drawn.
  double fit_max = 0, all_min = -1;
  for (int i : result.ranking) {
    const Report& r = result.rows[i].report;
    if (result.rows[i].status == RowStatus::Ok) fit_max = std::max(fit_max, r.max_peak_memory_gib);
    all_min = all_min < 0 ? r.max_peak_memory_gib : std::min(all_min, r.max_peak_memory_gib);
  }
  const double x_limit = std::max(fit_max, cap_peak) * 1.3;
  std::vector<int> shown;
  for (int i : result.ranking)
    if (result.rows[i].report.max_peak_memory_gib <= x_limit) shown.push_back(i);
  const int hidden = static_cast<int>(result.ranking.size() - shown.size());
  double xmin = std::min(cap_peak, all_min < 0 ? cap_peak : all_min), xmax = cap_peak;
  double ymin = -1, ymax = 0;
  for (int i : shown) {
    const Report& r = result.rows[i].report;
    xmax = std::max(xmax, r.max_peak_memory_gib);
    ymax = std::max(ymax, r.tokens_per_s);
    ymin = ymin < 0 ? r.tokens_per_s : std::min(ymin, r.tokens_per_s);
  }
  if (ymin < 0) ymin = 0;
  const double yspan = std::max(ymax - ymin, 0.05 * ymax);
  const Axis xa = make_axis(std::max(0.0, xmin - 0.05 * (xmax - xmin)), xmax, 8);
  const Axis ya = make_axis(std::max(0.0, ymin - 0.08 * yspan), ymax + 0.05 * yspan, 6);
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  auto X = [&](double v) { return xa.map(v, x0, x1); };
  auto Y = [&](double v) { return ya.map(v, y0, y1); };

  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + util::format("%.0f", kWidth) +
       "\" height=\"" + util::format("%.0f", kHeight) + "\" viewBox=\"0 0 " +
       util::format("%.0f", kWidth) + " " + util::format("%.0f", kHeight) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + util::format("%.1f", (x0 + x1) / 2) + "\" y=\"28\" text-anchor=\"middle\" " +
       "font-size=\"16\">" + xml_escape(title) + "</text>\n";
  // Grid and ticks.
  for (double v = xa.lo; v <= xa.hi + xa.step * 1e-9; v += xa.step) {
    const double x = X(v);
    s += "<line x1=\"" + util::format("%.1f", x) + "\" y1=\"" + util::format("%.1f", y0) +
         "\" x2=\"" + util::format("%.1f", x) + "\" y2=\"" + util::format("%.1f", y1) +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<text x=\"" + util::format("%.1f", x) + "\" y=\"" + util::format("%.1f", y0 + 18) +
         "\" text-anchor=\"middle\">" + util::format("%g", v) + "</text>\n";
  }
  for (double v = ya.lo; v <= ya.hi + ya.step * 1e-9; v += ya.step) {
    const double y = Y(v);
    s += "<line x1=\"" + util::format("%.1f", x0) + "\" y1=\"" + util::format("%.1f", y) +
         "\" x2=\"" + util::format("%.1f", x1) + "\" y2=\"" + util::format("%.1f", y) +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<text x=\"" + util::format("%.1f", x0 - 8) + "\" y=\"" + util::format("%.1f", y + 4) +
         "\" text-anchor=\"end\">" + tokens_label(v) + "</text>\n";
  }
  s += "<rect x=\"" + util::format("%.1f", x0) + "\" y=\"" + util::format("%.1f", y1) +
       "\" width=\"" + util::format("%.1f", x1 - x0) + "\" height=\"" +
       util::format("%.1f", y0 - y1) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  s += "<text x=\"" + util::format("%.1f", (x0 + x1) / 2) + "\" y=\"" +
       util::format("%.1f", kHeight - 18) +
       "\" text-anchor=\"middle\">peak memory per GPU (GiB)</text>\n";
  s += "<text transform=\"translate(24 " + util::format("%.1f", (y0 + y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">throughput (tokens/s)</text>\n";

  // The memory cap.
  if (cap_peak >= xa.lo && cap_peak <= xa.hi) {
    s += "<line x1=\"" + util::format("%.1f", X(cap_peak)) + "\" y1=\"" + util::format("%.1f", y0) +
         "\" x2=\"" + util::format("%.1f", X(cap_peak)) + "\" y2=\"" + util::format("%.1f", y1) +
         "\" stroke=\"#444\" stroke-dasharray=\"6 4\"/>\n";
  }

  // Points, slowest first so the best are drawn on top.
  for (auto it = shown.rbegin(); it != shown.rend(); ++it) {
    const Evaluation& e = result.rows[*it];
    const char* c = colour(e.config.schedule);
    const bool oom = e.status == RowStatus::Oom;
    s +=
        "<circle cx=\"" + util::format("%.1f", X(e.report.max_peak_memory_gib)) + "\" cy=\"" +
        util::format("%.1f", Y(e.report.tokens_per_s)) + "\" r=\"4\" fill=\"" + (oom ? "none" : c) +
        "\" stroke=\"" + c + "\" stroke-width=\"1.5\"><title>" +
        xml_escape(explore::describe(e.config)) + ": " +
        util::format("%.0f", e.report.tokens_per_s) + " tokens/s, " +
        util::format("%.2f", e.report.max_peak_memory_gib) + " GiB" + (oom ? " (oom)" : "") +
        (e.report.thin_margin ? util::format(" (thin margin %.2f GiB)", e.report.margin_gib) : "") +
        "</title></circle>\n";
    // A row that fits with a thin margin (apply_memory_cap) wears a ring.
    if (e.report.thin_margin)
      s += "<circle class=\"thin\" cx=\"" + util::format("%.1f", X(e.report.max_peak_memory_gib)) +
           "\" cy=\"" + util::format("%.1f", Y(e.report.tokens_per_s)) +
           "\" r=\"7.5\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n";
  }

  // Pareto front of the rows that fit: by memory ascending, each faster than all before.
  std::vector<int> fit;
  for (int i : result.ranking)
    if (result.rows[i].status == RowStatus::Ok) fit.push_back(i);
  std::stable_sort(fit.begin(), fit.end(), [&](int a, int b) {
    const Report& ra = result.rows[a].report;
    const Report& rb = result.rows[b].report;
    if (ra.max_peak_memory_gib != rb.max_peak_memory_gib)
      return ra.max_peak_memory_gib < rb.max_peak_memory_gib;
    return ra.tokens_per_s > rb.tokens_per_s;
  });
  std::string front;
  double best = -1;
  for (int i : fit) {
    const Report& r = result.rows[i].report;
    if (r.tokens_per_s <= best) continue;
    const double x = X(r.max_peak_memory_gib), y = Y(r.tokens_per_s);
    if (best >= 0)
      front += " " + util::format("%.1f", x) + "," + util::format("%.1f", Y(best));  // step
    front += (front.empty() ? "" : " ") + util::format("%.1f", x) + "," + util::format("%.1f", y);
    best = r.tokens_per_s;
  }
  if (!front.empty())
    s += "<polyline points=\"" + front + "\" fill=\"none\" stroke=\"#000\" stroke-width=\"2\"/>\n";

  // Legend: schedules present, in registry order (then designed), then the marks. A row is a
  // mark at height ly (a circle or a short line, painted as given) and a label beside it.
  double ly = y1 + 8;
  const double lx = x1 + 20;
  const auto at = [](double v) { return util::format("%.1f", v); };
  const auto circle_mark = [&](const std::string& paint) {
    s += "<circle cx=\"" + at(lx + 6) + "\" cy=\"" + at(ly) + "\" r=\"5\" " + paint + "/>\n";
  };
  const auto line_mark = [&](const std::string& paint) {
    s += "<line x1=\"" + at(lx) + "\" y1=\"" + at(ly) + "\" x2=\"" + at(lx + 14) + "\" y2=\"" +
         at(ly) + "\" " + paint + "/>\n";
  };
  const auto label = [&](const std::string& text, double dy = 4, const std::string& paint = "") {
    s += "<text x=\"" + at(lx + 18) + "\" y=\"" + at(ly + dy) + "\"" + paint + ">" + text +
         "</text>\n";
  };
  for (const std::string& name : chart_schedules()) {
    bool present = false;
    for (int i : result.ranking) present = present || result.rows[i].config.schedule == name;
    if (!present) continue;
    circle_mark(std::string("fill=\"") + colour(name) + "\"");
    label(name);
    ly += 20;
  }
  ly += 8;
  circle_mark("fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"");
  label("over the cap");
  ly += 20;
  bool thin = false;
  for (int i : shown) thin = thin || result.rows[i].report.thin_margin;
  if (thin) {
    circle_mark("fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"");
    label("thin margin");
    label("(under " + util::format("%.2f", result.cap.thin_bytes() / kGiB) + " GiB)", 20,
          " fill=\"#555\"");
    ly += 36;
  }
  line_mark("stroke=\"#222\" stroke-width=\"1.5\"");
  label("Pareto front");
  ly += 20;
  line_mark("stroke=\"#444\" stroke-dasharray=\"6 4\"");
  // Worded as every header words it (memory_cap_text): the x axis is the whole peak, the fixed
  // overhead included, as the cap's.
  label("memory cap " + util::format("%.2f", result.mem_cap_gib) + " GiB");
  // Two short lines: the legend column is 200 px wide.
  label("(incl. fixed " + util::format("%.2f", result.fixed_overhead_gib) + " GiB)", 20,
        " fill=\"#555\"");
  if (hidden > 0) {
    s += "<text x=\"" + util::format("%.1f", x1 - 6) + "\" y=\"" + util::format("%.1f", y1 + 16) +
         "\" text-anchor=\"end\" fill=\"#555\">" + std::to_string(hidden) +
         " rows over the cap beyond " + util::format("%.0f", xa.hi) + " GiB not drawn</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace braid
