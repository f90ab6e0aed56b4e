// The simulated side of theory mode: a schedule lowered onto uniform_cost_model() and replayed by
// the engine (no contention, P2P free and non-blocking: P2pMode::Auto on a uniform cost model),
// its idle time attributed exactly as the report does (attribute_idle), and scans of the TP
// bubble over m or p with their least-squares slopes.
#include <algorithm>
#include <charconv>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../util/pipeline_sizes.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"
#include "braid/theory.hpp"

namespace braid {

namespace {

// Bad input (a schedule the lowering or the engine refuses) stays an InputError; anything else
// failing on a schedule that passed validation is our bug, named with what was being run.
[[noreturn]] void internal_error(const Schedule& s, const UniformCosts& c,
                                 const std::exception& e) {
  throw InternalError(std::string(e.what()) + " (theory: schedule " + s.name + " pp " +
                      std::to_string(s.pp) + " vpp " + std::to_string(s.vpp) + " microbatches " +
                      std::to_string(s.microbatches) + ", unit costs " + std::to_string(c.tf) +
                      "," + std::to_string(c.tb) + "," + std::to_string(c.tw) + "," +
                      std::to_string(c.tar) + "," + std::to_string(c.ma) + ")");
}

}  // namespace

TheoryMeasured simulate_uniform(const Schedule& schedule, const UniformCosts& costs) {
  Dag dag;
  Timeline timeline;
  try {
    const CostModel cost = uniform_cost_model(costs, schedule.virtual_stages());
    dag = lower(schedule, cost);
    SimOptions sim;
    sim.contention = false;
    timeline = simulate(dag, sim);
  } catch (const InputError&) {
    throw;
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& e) {
    internal_error(schedule, costs, e);
  }
  TheoryMeasured out;
  out.iteration_time_s = timeline.iteration_time_s;
  attribute_idle(dag, timeline, out.ranks);
  for (int r = 0; r < schedule.pp; ++r) {
    RankReport& rr = out.ranks[r];
    rr.activation_peak_bytes = timeline.peak_activation_bytes[r];
    rr.activation_peak_ma = rr.activation_peak_bytes / costs.ma;
    const double pp_bubble = timeline.iteration_time_s - rr.busy_s - rr.tp_exposed_s;
    if (r == 0 || rr.tp_exposed_s > out.worst_tp_bubble_s) {
      out.worst_tp_rank = r;
      out.worst_tp_bubble_s = rr.tp_exposed_s;
    }
    if (r == 0 || pp_bubble > out.worst_pp_bubble_s) {
      out.worst_pp_rank = r;
      out.worst_pp_bubble_s = pp_bubble;
    }
    if (r == 0 || rr.activation_peak_ma > out.worst_peak_activation_ma) {
      out.worst_peak_rank = r;
      out.worst_peak_activation_ma = rr.activation_peak_ma;
    }
  }
  const RankReport& r0 = out.ranks.front();
  out.tp_bubble_s = r0.tp_exposed_s;
  out.pp_bubble_s = timeline.iteration_time_s - r0.busy_s - r0.tp_exposed_s;
  out.peak_activation_ma = r0.activation_peak_ma;
  return out;
}

TheoryRow run_theory(std::string_view schedule, const ScheduleOptions& options,
                     const UniformCosts& costs) {
  const Schedule s = make_schedule(schedule, options);
  TheoryRow row = run_theory(s, costs);
  row.forms = closed_forms(schedule, s.pp, s.vpp, s.microbatches, costs);
  return row;
}

double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0;
  double mean_x = 0;
  for (std::size_t i = 0; i < n; ++i) mean_x += x[i];
  mean_x /= static_cast<double>(n);
  // Deviations of y against y[0]: the slope is unchanged (the x deviations sum to zero) and a
  // constant series gives a numerator of exactly 0.
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mean_x;
    sxy += dx * (y[i] - y[0]);
    sxx += dx * dx;
  }
  return sxx > 0 ? sxy / sxx : 0;
}

ScanSpec parse_scan(std::string_view text) {
  const std::string s(text);
  const std::string expected = "expected m=A..B or p=A..B with integers 1 <= A <= B";
  ScanSpec spec;
  if (s.size() < 2 || s[1] != '=' || (s[0] != 'm' && s[0] != 'p'))
    throw InputError("--scan", s, expected);
  spec.axis = s[0] == 'm' ? ScanAxis::Microbatches : ScanAxis::Pipeline;
  const std::string_view range = text.substr(2);
  const std::size_t dots = range.find("..");
  if (dots == std::string_view::npos) throw InputError("--scan", s, expected);
  auto parse_int = [&](std::string_view part, int& out) {
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size())
      throw InputError("--scan", s, expected);
  };
  parse_int(range.substr(0, dots), spec.from);
  parse_int(range.substr(dots + 2), spec.to);
  if (spec.from < 1 || spec.to < spec.from) throw InputError("--scan", s, expected);
  if (spec.axis == ScanAxis::Pipeline && spec.from < 2)
    throw InputError("--scan", s, "p starts at 2 at least (one stage has no pipeline)");
  return spec;
}

ScanResult run_scan(const std::vector<std::string>& schedules, const ScheduleOptions& base,
                    const UniformCosts& costs, const ScanSpec& spec) {
  ScanResult result;
  result.spec = spec;
  util::copy_pipeline_sizes(result, base);
  result.costs = costs;
  const bool over_m = spec.axis == ScanAxis::Microbatches;
  int step = spec.step;
  if (step <= 0) step = over_m ? base.pp : 1;
  result.spec.step = step;
  for (const std::string& name : schedules) {
    ScanSeries series;
    series.schedule = name;
    std::vector<double> xs, ys, worst;
    for (int x = spec.from; x <= spec.to; x += step) {
      ScheduleOptions options = base;
      (over_m ? options.microbatches : options.pp) = x;
      Schedule s;
      try {
        s = make_schedule(name, options);
      } catch (const InputError&) {
        series.skipped.push_back(x);  // a size this schedule cannot run (e.g. m < 2p for stp)
        continue;
      }
      const TheoryMeasured sim = simulate_uniform(s, costs);
      const ClosedForms forms = closed_forms(name, s.pp, s.vpp, s.microbatches, costs);
      ScanPoint point;
      point.x = x;
      point.tp_bubble_s = sim.tp_bubble_s;
      point.worst_tp_bubble_s = sim.worst_tp_bubble_s;
      point.form_s = forms.tp_bubble.known ? forms.tp_bubble.value : 0;
      series.form = forms.tp_bubble;
      series.points.push_back(point);
      xs.push_back(x);
      ys.push_back(sim.tp_bubble_s);
      worst.push_back(sim.worst_tp_bubble_s);
    }
    series.slope = least_squares_slope(xs, ys);
    series.worst_slope = least_squares_slope(xs, worst);
    result.series.push_back(std::move(series));
  }
  return result;
}

}  // namespace braid
