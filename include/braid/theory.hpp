// Theory: the closed forms of DESIGN §6 (Table 1 of the STP paper, and the classic 1F1B / ZB-H1
// forms) next to what braid's own lowering and engine find when every chunk costs exactly the
// symbols of those forms (uniform-cost mode, DESIGN §4). It is not a formula evaluator standing in
// for the simulator: every simulated number comes from lower() + simulate() + attribute_idle() on
// uniform_cost_model(), the path `braid simulate --unit-costs` takes. Plus scans of the TP bubble
// over m or p with their least-squares slopes, and their renderings (table, JSON, SVG chart).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

namespace braid {

// One closed form: its formula in the paper's symbols and its value at (p, m, costs).
struct ClosedForm {
  bool known = false;   // false: no published form for this schedule and quantity
  std::string formula;  // e.g. "(p-1)(T_F+T_AR+T_B-T_W)", "2m T_AR", "(3p-2) M_a"
  double value = 0;     // seconds (symbolic units) or, for memory, units of M_a
};

// The three quantities of Table 1 for one schedule. PP and TP bubbles are per rank (rank 0's, as
// the paper counts them); peak activation is rank 0's, in units of M_a.
struct ClosedForms {
  ClosedForm pp_bubble;
  ClosedForm tp_bubble;
  ClosedForm peak_activation;
};

// Forms for gpipe, 1f1b, zb-h1 (classic, no T_AR term in the PP bubble), 1f1b-i, zb-v, stp
// (Table 1; 1f1b-i generalised to v chunks per rank as v m T_AR and ((v+1)p-2) M_a). Other
// schedules get forms with known = false. Throws InputError for an unknown schedule name.
ClosedForms closed_forms(std::string_view schedule, int pp, int vpp, int microbatches,
                         const UniformCosts& costs);

// What the engine finds, per rank and summarised. Definitions (docs/theory.md):
//   TP bubble of rank r = the report's tp_exposed_s: time r's compute stream is idle while what
//     it waits for on r is held by a TP collective;
//   PP bubble of rank r = iteration time - busy - TP bubble of r (pp_idle + offload_stall).
struct TheoryMeasured {
  double iteration_time_s = 0;
  std::vector<RankReport> ranks;  // busy / tp_exposed / pp_idle / offload_stall, activation peak
  double pp_bubble_s = 0;         // rank 0
  double tp_bubble_s = 0;         // rank 0
  double peak_activation_ma = 0;  // rank 0
  int worst_tp_rank = 0;          // rank with the largest TP bubble (lowest index on ties)
  double worst_tp_bubble_s = 0;
  int worst_pp_rank = 0;
  double worst_pp_bubble_s = 0;
  int worst_peak_rank = 0;
  double worst_peak_activation_ma = 0;
};

struct TheoryRow {
  std::string schedule;
  int pp = 1, vpp = 1, microbatches = 1;
  UniformCosts costs;
  ClosedForms forms;
  TheoryMeasured simulated;
};

// Builds the schedule (make_schedule with `options`), lowers it onto uniform_cost_model(costs),
// simulates it without contention and attributes the idle time. Throws InputError on bad sizes.
TheoryMeasured simulate_uniform(const Schedule& schedule, const UniformCosts& costs);
TheoryRow run_theory(std::string_view schedule, const ScheduleOptions& options,
                     const UniformCosts& costs);

// Least-squares slope of y over x (0 for fewer than two distinct x). Computed from deviations
// against the first y so that a constant series gives exactly 0.
double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y);

// A scan of the TP bubble over m (p fixed) or over p (m fixed).
enum class ScanAxis { Microbatches, Pipeline };
struct ScanSpec {
  ScanAxis axis = ScanAxis::Microbatches;
  int from = 8, to = 256, step = 0;  // step 0: the default (pp for an m scan, 1 for a p scan)
};
// Parses "m=A..B" or "p=A..B"; throws InputError naming --scan.
ScanSpec parse_scan(std::string_view text);

struct ScanPoint {
  int x = 0;                     // m or p
  double tp_bubble_s = 0;        // rank 0
  double worst_tp_bubble_s = 0;  // the worst rank
  double form_s = 0;             // the closed form at this point (0 when unknown)
};
struct ScanSeries {
  std::string schedule;
  ClosedForm form;  // at the last point, for its formula
  std::vector<ScanPoint> points;
  std::vector<int> skipped;  // x values the schedule rejects (sizes it cannot run)
  double slope = 0;          // least-squares slope of rank 0's TP bubble over x
  double worst_slope = 0;    // the same for the worst rank
};
struct ScanResult {
  ScanSpec spec;
  int pp = 1, microbatches = 1, vpp = 2;  // the fixed size (the other is scanned)
  UniformCosts costs;
  std::vector<ScanSeries> series;
};
// Runs the scan for every schedule; `base` gives pp, microbatches, vpp and the generator options.
ScanResult run_scan(const std::vector<std::string>& schedules, const ScheduleOptions& base,
                    const UniformCosts& costs, const ScanSpec& spec);

// A schedule given as a file (--schedule-csv) in uniform-cost mode: simulated, with no closed
// forms (known = false).
TheoryRow run_theory(const Schedule& schedule, const UniformCosts& costs);

// Theory on a real study: the study's own cost model (build_cost_model on its profile) instead of
// uniform costs, the engine as `braid simulate` runs it (contention on unless `sim` says
// otherwise). A scan over m (or p) gives each rank's exposed TP time (the report's tp_exposed_s)
// at every point, and the least-squares slope of each rank over the scanned axis.
struct StudyScanPoint {
  int x = 0;
  double iteration_time_s = 0;
  std::vector<double> tp_exposed_s;  // per rank
};
struct StudyScanSeries {
  std::string schedule;
  std::vector<StudyScanPoint> points;
  std::vector<std::pair<int, std::string>> skipped;  // x and why (study or schedule rule)
  std::vector<double> slope_s;                       // per rank: seconds per unit of x
};
struct StudyScan {
  ScanSpec spec;
  std::string study, setting;  // name, and the sizes the scan does not change
  int pp = 1, microbatches = 1;
  std::vector<StudyScanSeries> series;
};
StudyScan run_study_scan(const Study& study, const Profile& profile,
                         const std::vector<std::string>& schedules, const ScheduleOptions& base,
                         const ScanSpec& spec, const SimOptions& sim = {});

// Where a rank's exposed TP time goes: by unit kind (attn, mlp, ...), by phase (F, B, W, and R
// for the forward run again by full recomputation) and by collective (all-reduce, all-gather,
// reduce-scatter), from the report's tp_exposed_pieces. Each list adds up to the rank's exposed
// time.
struct ExposedBreakdown {
  int rank = 0;
  double total_s = 0;
  std::vector<std::pair<std::string, double>> by_unit, by_phase, by_collective;  // name order
};
struct StudyExplain {
  std::string schedule;
  int pp = 1, microbatches = 1;
  double iteration_time_s = 0;
  std::vector<ExposedBreakdown> ranks;
};
// The schedule on the study at its own sizes (pp, vpp and microbatches in `options`).
StudyExplain explain_study(const Study& study, const Profile& profile, const Schedule& schedule,
                           const SimOptions& sim = {});

std::string study_scan_table(const StudyScan& scan);
std::string study_scan_json(const StudyScan& scan);
std::string explain_table(const StudyExplain& explain);
std::string explain_json(const std::vector<StudyExplain>& explains);

// Renderings (byte-stable: fixed number formats, input order).
std::string theory_table(const std::vector<TheoryRow>& rows);
std::string theory_json(const std::vector<TheoryRow>& rows);
std::string scan_table(const ScanResult& scan);
std::string scan_json(const ScanResult& scan);
// A self-contained SVG line chart: TP bubble of rank 0 over the scanned axis, one line per
// schedule, axes with ticks and labels, legend with each slope.
std::string scan_svg(const ScanResult& scan);

}  // namespace braid
