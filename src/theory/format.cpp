// Renderings of theory results: the terminal table of `braid theory` (closed form, simulated,
// difference for PP bubble, TP bubble and peak activation), the scan table, and their JSON.
// Fixed number formats (%.6g in tables, shortest round-trip in JSON): byte-stable output.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/text_table.hpp"
#include "braid/theory.hpp"

namespace braid {

namespace {

// The tables' number: six significant digits, and no "-0".
std::string num(double v) { return util::format("%.6g", v == 0 ? 0.0 : v); }

std::string costs_line(const UniformCosts& c) {
  return "unit costs: T_F " + num(c.tf) + ", T_B " + num(c.tb) + ", T_W " + num(c.tw) + ", T_AR " +
         num(c.tar) + ", M_a " + num(c.ma);
}

// Left-aligned columns two spaces apart, so that a long quantity never runs into its formula.
std::string aligned(const std::vector<std::vector<std::string>>& rows) {
  return util::text_table(rows, util::Align::Left);
}

std::vector<std::string> table_row(const std::string& quantity, const ClosedForm& form,
                                   double simulated) {
  return {quantity, form.known ? form.formula : "-", form.known ? num(form.value) : "-",
          num(simulated), form.known ? num(simulated - form.value) : "-"};
}

// Seconds as milliseconds with three decimals, and no "-0".
std::string ms(double s) { return util::format("%.3f", s == 0 ? 0.0 : s * 1e3); }

nlohmann::ordered_json costs_json(const UniformCosts& c) {
  nlohmann::ordered_json j;
  j["tf"] = c.tf;
  j["tb"] = c.tb;
  j["tw"] = c.tw;
  j["tar"] = c.tar;
  j["ma"] = c.ma;
  return j;
}

nlohmann::ordered_json quantity_json(const ClosedForm& form, double simulated, int worst_rank,
                                     double worst, const char* unit) {
  nlohmann::ordered_json j;
  const std::string u(unit);
  j["formula"] = form.known ? nlohmann::ordered_json(form.formula) : nullptr;
  j["closed" + u] = form.known ? nlohmann::ordered_json(form.value) : nullptr;
  j["simulated" + u] = simulated;
  j["difference" + u] = form.known ? nlohmann::ordered_json(simulated - form.value) : nullptr;
  j["worst_rank"] = worst_rank;
  j["worst_simulated" + u] = worst;
  return j;
}

}  // namespace

std::string theory_table(const std::vector<TheoryRow>& rows) {
  std::string out;
  if (rows.empty()) return out;
  out += costs_line(rows.front().costs) + " (per chunk; uniform-cost mode)\n";
  for (const TheoryRow& row : rows) {
    const TheoryMeasured& s = row.simulated;
    out += "\n" + row.schedule + ": pp " + std::to_string(row.pp) + ", vpp " +
           std::to_string(row.vpp) + ", microbatches " + std::to_string(row.microbatches) +
           ", iteration time " + num(s.iteration_time_s) + "\n";
    std::vector<std::vector<std::string>> t;
    t.push_back({"quantity", "closed form", "closed", "simulated", "difference"});
    t.push_back(table_row("PP bubble, rank 0", row.forms.pp_bubble, s.pp_bubble_s));
    t.push_back(table_row("PP bubble, worst rank " + std::to_string(s.worst_pp_rank),
                          row.forms.pp_bubble, s.worst_pp_bubble_s));
    t.push_back(table_row("TP bubble, rank 0", row.forms.tp_bubble, s.tp_bubble_s));
    t.push_back(table_row("TP bubble, worst rank " + std::to_string(s.worst_tp_rank),
                          row.forms.tp_bubble, s.worst_tp_bubble_s));
    t.push_back(table_row("peak activation (M_a), rank 0", row.forms.peak_activation,
                          s.peak_activation_ma));
    t.push_back(table_row("peak activation, worst rank " + std::to_string(s.worst_peak_rank),
                          row.forms.peak_activation, s.worst_peak_activation_ma));
    out += aligned(t);
  }
  return out;
}

std::string theory_json(const std::vector<TheoryRow>& rows) {
  nlohmann::ordered_json j;
  j["unit_costs"] = rows.empty() ? nlohmann::ordered_json(nullptr) : costs_json(rows.front().costs);
  auto& list = j["rows"] = nlohmann::ordered_json::array();
  for (const TheoryRow& row : rows) {
    const TheoryMeasured& s = row.simulated;
    nlohmann::ordered_json r;
    r["schedule"] = row.schedule;
    r["pp"] = row.pp;
    r["vpp"] = row.vpp;
    r["microbatches"] = row.microbatches;
    r["iteration_time_s"] = s.iteration_time_s;
    r["pp_bubble"] = quantity_json(row.forms.pp_bubble, s.pp_bubble_s, s.worst_pp_rank,
                                   s.worst_pp_bubble_s, "_s");
    r["tp_bubble"] = quantity_json(row.forms.tp_bubble, s.tp_bubble_s, s.worst_tp_rank,
                                   s.worst_tp_bubble_s, "_s");
    r["peak_activation"] = quantity_json(row.forms.peak_activation, s.peak_activation_ma,
                                         s.worst_peak_rank, s.worst_peak_activation_ma, "_ma");
    auto& ranks = r["ranks"] = nlohmann::ordered_json::array();
    for (const RankReport& rr : s.ranks) {
      nlohmann::ordered_json x;
      x["rank"] = rr.rank;
      x["busy_s"] = rr.busy_s;
      x["tp_bubble_s"] = rr.tp_exposed_s;
      x["pp_bubble_s"] = s.iteration_time_s - rr.busy_s - rr.tp_exposed_s;
      x["activation_peak_ma"] = rr.activation_peak_ma;
      ranks.push_back(x);
    }
    list.push_back(r);
  }
  return j.dump() + "\n";
}

std::string scan_table(const ScanResult& scan) {
  const bool over_m = scan.spec.axis == ScanAxis::Microbatches;
  const char* axis = over_m ? "m" : "p";
  std::string out = costs_line(scan.costs) + "\n";
  out += std::string("TP bubble over ") + axis + " = " + std::to_string(scan.spec.from) + ".." +
         std::to_string(scan.spec.to) + " step " + std::to_string(scan.spec.step) + ", " +
         (over_m ? "pp " + std::to_string(scan.pp)
                 : "microbatches " + std::to_string(scan.microbatches)) +
         "\n";
  for (const ScanSeries& s : scan.series) {
    out += "\n" + s.schedule + ": least-squares slope " + num(s.slope) + " per " + axis +
           " (rank 0), " + num(s.worst_slope) + " (worst rank)";
    if (s.form.known) out += "; closed form " + s.form.formula;
    out += "\n";
    std::vector<std::vector<std::string>> t{{axis, "rank 0", "worst rank", "closed form"}};
    for (const ScanPoint& p : s.points)
      t.push_back({std::to_string(p.x), num(p.tp_bubble_s), num(p.worst_tp_bubble_s),
                   s.form.known ? num(p.form_s) : "-"});
    // Fixed widths that include the spacing: the columns line up from one series to the next.
    out += util::fixed_width_table(t, {util::left(8), util::left(14), util::left(14)}, 0);
    if (!s.skipped.empty()) {
      out += "skipped (sizes the schedule rejects):";
      for (int x : s.skipped) out += " " + std::to_string(x);
      out += "\n";
    }
  }
  return out;
}

namespace {

// The scan's axis, range and the size it holds fixed (pp along m, microbatches along p).
void scan_axis_json(nlohmann::ordered_json& j, const ScanSpec& spec, int pp, int microbatches) {
  const bool over_m = spec.axis == ScanAxis::Microbatches;
  j["axis"] = over_m ? "m" : "p";
  j["from"] = spec.from;
  j["to"] = spec.to;
  j["step"] = spec.step;
  if (over_m)
    j["pp"] = pp;
  else
    j["microbatches"] = microbatches;
}

}  // namespace

std::string scan_json(const ScanResult& scan) {
  const bool over_m = scan.spec.axis == ScanAxis::Microbatches;
  nlohmann::ordered_json j;
  scan_axis_json(j, scan.spec, scan.pp, scan.microbatches);
  j["unit_costs"] = costs_json(scan.costs);
  auto& list = j["series"] = nlohmann::ordered_json::array();
  for (const ScanSeries& s : scan.series) {
    nlohmann::ordered_json x;
    x["schedule"] = s.schedule;
    x["formula"] = s.form.known ? nlohmann::ordered_json(s.form.formula) : nullptr;
    x["slope"] = s.slope;
    x["worst_slope"] = s.worst_slope;
    auto& points = x["points"] = nlohmann::ordered_json::array();
    for (const ScanPoint& p : s.points) {
      nlohmann::ordered_json q;
      q[over_m ? "m" : "p"] = p.x;
      q["tp_bubble_s"] = p.tp_bubble_s;
      q["worst_tp_bubble_s"] = p.worst_tp_bubble_s;
      q["closed_s"] = s.form.known ? nlohmann::ordered_json(p.form_s) : nullptr;
      points.push_back(q);
    }
    x["skipped"] = s.skipped;
    list.push_back(x);
  }
  return j.dump() + "\n";
}

std::string study_scan_table(const StudyScan& scan) {
  const bool over_m = scan.spec.axis == ScanAxis::Microbatches;
  const std::string axis = over_m ? "m" : "p";
  std::string out = "exposed TP time per rank (ms) on study " + scan.study +
                    " (its own costs) over " + axis + " = " + std::to_string(scan.spec.from) +
                    ".." + std::to_string(scan.spec.to) + " step " +
                    std::to_string(scan.spec.step) + ", " +
                    (over_m ? "pp " + std::to_string(scan.pp)
                            : "microbatches " + std::to_string(scan.microbatches)) +
                    "\n";
  if (!scan.setting.empty()) out += "setting: " + scan.setting + "\n";
  for (const StudyScanSeries& s : scan.series) {
    out += "\n" + s.schedule + ": least-squares slope per rank (ms per " + axis + "):";
    for (std::size_t r = 0; r < s.slope_s.size(); ++r)
      out += " r" + std::to_string(r) + " " + num(s.slope_s[r] * 1e3);
    out += "\n";
    std::size_t ranks = 0;
    for (const StudyScanPoint& p : s.points) ranks = std::max(ranks, p.tp_exposed_s.size());
    std::vector<std::vector<std::string>> t;
    std::vector<std::string> head{axis, "iteration ms"};
    for (std::size_t r = 0; r < ranks; ++r) head.push_back("rank " + std::to_string(r));
    t.push_back(head);
    for (const StudyScanPoint& p : s.points) {
      std::vector<std::string> row{std::to_string(p.x), ms(p.iteration_time_s)};
      for (std::size_t r = 0; r < ranks; ++r)
        row.push_back(r < p.tp_exposed_s.size() ? ms(p.tp_exposed_s[r]) : "-");
      t.push_back(row);
    }
    out += aligned(t);
    for (const auto& [x, why] : s.skipped)
      out += "skipped " + axis + " = " + std::to_string(x) + ": " + why + "\n";
  }
  return out;
}

std::string study_scan_json(const StudyScan& scan) {
  const bool over_m = scan.spec.axis == ScanAxis::Microbatches;
  nlohmann::ordered_json j;
  j["study"] = scan.study;
  j["setting"] = scan.setting;
  scan_axis_json(j, scan.spec, scan.pp, scan.microbatches);
  auto& list = j["series"] = nlohmann::ordered_json::array();
  for (const StudyScanSeries& s : scan.series) {
    nlohmann::ordered_json x;
    x["schedule"] = s.schedule;
    x["slope_s_per_rank"] = s.slope_s;
    auto& points = x["points"] = nlohmann::ordered_json::array();
    for (const StudyScanPoint& p : s.points) {
      nlohmann::ordered_json q;
      q[over_m ? "m" : "p"] = p.x;
      q["iteration_time_s"] = p.iteration_time_s;
      q["tp_exposed_s"] = p.tp_exposed_s;
      points.push_back(q);
    }
    auto& skipped = x["skipped"] = nlohmann::ordered_json::array();
    for (const auto& [at, why] : s.skipped) skipped.push_back({{"x", at}, {"reason", why}});
    list.push_back(x);
  }
  return j.dump() + "\n";
}

namespace {

void breakdown_rows(std::vector<std::vector<std::string>>& t, const StudyExplain& e,
                    const std::string& title,
                    std::vector<std::pair<std::string, double>> ExposedBreakdown::*list) {
  std::vector<std::string> names;
  for (const ExposedBreakdown& b : e.ranks)
    for (const auto& [n, v] : b.*list)
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    std::vector<std::string> row{title + " " + n};
    for (const ExposedBreakdown& b : e.ranks) {
      double v = 0;
      for (const auto& [m, t_s] : b.*list)
        if (m == n) v = t_s;
      row.push_back(ms(v));
    }
    t.push_back(row);
  }
}

}  // namespace

std::string explain_table(const StudyExplain& e) {
  std::string out = e.schedule + ": pp " + std::to_string(e.pp) + ", microbatches " +
                    std::to_string(e.microbatches) + ", iteration " + ms(e.iteration_time_s) +
                    " ms; exposed TP time (ms) by unit kind, phase and collective\n";
  std::vector<std::vector<std::string>> t;
  std::vector<std::string> head{"exposed in"};
  for (const ExposedBreakdown& b : e.ranks) head.push_back("rank " + std::to_string(b.rank));
  t.push_back(head);
  std::vector<std::string> total{"total"};
  for (const ExposedBreakdown& b : e.ranks) total.push_back(ms(b.total_s));
  t.push_back(total);
  breakdown_rows(t, e, "unit", &ExposedBreakdown::by_unit);
  breakdown_rows(t, e, "phase", &ExposedBreakdown::by_phase);
  breakdown_rows(t, e, "collective", &ExposedBreakdown::by_collective);
  return out + aligned(t);
}

std::string explain_json(const std::vector<StudyExplain>& explains) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const StudyExplain& e : explains) {
    nlohmann::ordered_json x;
    x["schedule"] = e.schedule;
    x["pp"] = e.pp;
    x["microbatches"] = e.microbatches;
    x["iteration_time_s"] = e.iteration_time_s;
    auto& ranks = x["ranks"] = nlohmann::ordered_json::array();
    for (const ExposedBreakdown& b : e.ranks) {
      nlohmann::ordered_json r;
      r["rank"] = b.rank;
      r["tp_exposed_s"] = b.total_s;
      for (const auto& [key, list] :
           {std::pair{"by_unit", &b.by_unit}, std::pair{"by_phase", &b.by_phase},
            std::pair{"by_collective", &b.by_collective}}) {
        nlohmann::ordered_json m;
        for (const auto& [n, v] : *list) m[n] = v;
        r[key] = m;
      }
      ranks.push_back(r);
    }
    j.push_back(x);
  }
  return j.dump() + "\n";
}

}  // namespace braid
