// Theory on a real study: the scan of each rank's exposed TP time over m or p with the study's own
// cost model (what `braid simulate` would find at every point), and the breakdown of the exposed
// time of one simulation by unit kind, phase and collective. The uniform-cost side (run.cpp)
// checks the closed forms; this side shows whether they hold on the user's model.
#include <map>
#include <string>
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

struct Simulated {
  Dag dag;
  Timeline timeline;
};

Simulated simulate_study(const Study& study, const Profile& profile, const Schedule& schedule,
                         const SimOptions& sim) {
  const CostModel cost = build_cost_model(study, profile, schedule.virtual_stages());
  Simulated out;
  out.dag = lower(schedule, cost);
  out.timeline = simulate(out.dag, sim);
  return out;
}

std::string reason_of(const InputError& e) {
  return e.field.find('.') != std::string::npos ? e.field + ": " + e.problem : e.problem;
}

std::vector<std::pair<std::string, double>> sorted(const std::map<std::string, double>& m) {
  return {m.begin(), m.end()};
}

}  // namespace

TheoryRow run_theory(const Schedule& schedule, const UniformCosts& costs) {
  TheoryRow row;
  row.schedule = schedule.name;
  util::copy_pipeline_sizes(row, schedule);
  row.costs = costs;
  row.simulated = simulate_uniform(schedule, costs);
  return row;  // forms: known = false (a file has no published form)
}

StudyScan run_study_scan(const Study& study, const Profile& profile,
                         const std::vector<std::string>& schedules, const ScheduleOptions& base,
                         const ScanSpec& spec, const SimOptions& sim) {
  StudyScan scan;
  scan.spec = spec;
  scan.study = study.name;
  scan.pp = base.pp;
  scan.microbatches = base.microbatches;
  const bool over_m = spec.axis == ScanAxis::Microbatches;
  if (scan.spec.step <= 0) scan.spec.step = over_m ? base.pp : 1;
  for (const std::string& name : schedules) {
    StudyScanSeries series;
    series.schedule = name;
    std::vector<double> xs;
    std::vector<std::vector<double>> per_rank;
    for (int x = spec.from; x <= spec.to; x += scan.spec.step) {
      Study s = study;
      ScheduleOptions o = base;
      (over_m ? s.training.microbatches : s.parallel.pp) = x;
      (over_m ? o.microbatches : o.pp) = x;
      Schedule schedule;
      try {
        validate_study(s);
        schedule = make_schedule(name, o);
      } catch (const InputError& e) {
        series.skipped.emplace_back(x, reason_of(e));
        continue;
      }
      const Simulated run = simulate_study(s, profile, schedule, sim);
      std::vector<RankReport> ranks;
      attribute_idle(run.dag, run.timeline, ranks);
      StudyScanPoint point;
      point.x = x;
      point.iteration_time_s = run.timeline.iteration_time_s;
      for (const RankReport& r : ranks) point.tp_exposed_s.push_back(r.tp_exposed_s);
      if (per_rank.size() < ranks.size()) per_rank.resize(ranks.size());
      for (std::size_t r = 0; r < ranks.size(); ++r) per_rank[r].push_back(ranks[r].tp_exposed_s);
      xs.push_back(x);
      series.points.push_back(std::move(point));
    }
    // A p scan changes the number of ranks: the slope of rank r uses the points that have it.
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      std::vector<double> rx, ry;
      for (std::size_t k = 0; k < series.points.size(); ++k)
        if (r < series.points[k].tp_exposed_s.size()) {
          rx.push_back(xs[k]);
          ry.push_back(series.points[k].tp_exposed_s[r]);
        }
      series.slope_s.push_back(least_squares_slope(rx, ry));
    }
    scan.series.push_back(std::move(series));
  }
  return scan;
}

StudyExplain explain_study(const Study& study, const Profile& profile, const Schedule& schedule,
                           const SimOptions& sim) {
  const Simulated run = simulate_study(study, profile, schedule, sim);
  StudyExplain out;
  out.schedule = schedule.name;
  out.pp = schedule.pp;
  out.microbatches = schedule.microbatches;
  out.iteration_time_s = run.timeline.iteration_time_s;
  std::vector<RankReport> ranks;
  attribute_idle(run.dag, run.timeline, ranks);
  for (int r = 0; r < schedule.pp; ++r) {
    std::map<std::string, double> unit, phase, collective;
    ExposedBreakdown b;
    b.rank = r;
    for (const ExposedPiece& p : ranks[r].exposed_pieces) {
      if (p.stream != StreamKind::Tp) continue;  // the TP bubble
      const DagOp& op = run.dag.ops[p.op];
      const double t = p.end_s - p.start_s;
      b.total_s += t;
      unit[std::string(op.vision ? "vit " : "") + name(op.unit)] += t;
      phase[op.recompute ? "R (recomputed F)" : name(op.phase)] += t;
      collective[name(op.collective)] += t;
    }
    b.by_unit = sorted(unit);
    b.by_phase = sorted(phase);
    b.by_collective = sorted(collective);
    out.ranks.push_back(std::move(b));
  }
  return out;
}

}  // namespace braid
