// Finite by construction (issue 41, finding 3): every number of a study or profile is checked
// against its physical bounds (src/util/physical_bounds.hpp, docs/configuration.md, Bounds), so
// the absurd-but-finite values that overflowed inside (1e308 bytes per parameter, 1e-300
// TFLOP/s, 1e308 GB of HBM) are refused in one line; and a report figure that is not finite
// anyway is an internal error naming it, never a printed inf or a sweep row ranked ok.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

namespace fs = std::filesystem;
using namespace braid::test;  // CliRun, run_braid, slurp, count_lines

namespace {

const fs::path kRoot = BRAID_SOURCE_DIR;

// `file` (under the source root) with the value of `key` (a line "key: value") replaced; written
// to a file of the scratch folder (removed when the process exits) whose path is returned.
fs::path with_value(const std::string& file, const std::string& key, const std::string& value) {
  const std::string text = slurp(kRoot / file);
  const std::regex line("\\n *" + key + ": [^\\n#]*");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, line));
  const std::string head = m.str(0).substr(0, m.str(0).find(": ") + 2);
  const std::string changed = m.prefix().str() + head + value + " " + m.suffix().str();
  REQUIRE(changed != text);
  fs::path out = scratch_dir() / (key + "." + fs::path(file).filename().string());
  std::ofstream(out) << changed;
  return out;
}

// `args` is refused with exit 2 and one line that ends with `tail`.
void check_refused(const std::string& args, const std::string& tail) {
  INFO("braid " << args);
  const CliRun r = run_braid(args);
  CHECK(r.exit_code == 2);
  CHECK(count_lines(r.err) == 1);
  INFO(r.err);
  CHECK(r.err.find(tail + "\n") != std::string::npos);
}

}  // namespace

TEST_CASE("profile numbers past their physical bounds are refused in one line", "[bounds]") {
  const std::string sim = "simulate --study default --schedule 1f1b --profile ";
  check_refused(sim + with_value("profiles/a800.yaml", "peak_tflops", "1e-300").string(),
                "peak_tflops: must be from 0.001 to 100000 TFLOP/s (docs/configuration.md, "
                "Bounds), got 1e-300");
  check_refused(
      sim + with_value("profiles/a800.yaml", "hbm_gb", "1e308").string(),
      "hbm_gb: must be from 0.001 to 100000 GB (docs/configuration.md, Bounds), got 1e+308");
  check_refused(sim + with_value("profiles/a800.yaml", "fixed_overhead_gib", "1e308").string(),
                "fixed_overhead_gib: must be from 0 to 100000 GiB (docs/configuration.md, "
                "Bounds), got 1e+308");
  check_refused(
      sim + with_value("profiles/a800.yaml", "hbm_bandwidth_gbps", "1e300").string(),
      "hbm_bandwidth_gbps: must be from 1e-06 to 1e+07 GB/s (docs/configuration.md, Bounds), "
      "got 1e+300");
}

TEST_CASE("study numbers past their physical bounds are refused, also by a sweep", "[bounds]") {
  const fs::path study =
      with_value("configs/studies/default.yaml", "weight_bytes_per_param", "1e308");
  const std::string tail =
      "training.weight_bytes_per_param: must be from 0 to 64 bytes (docs/configuration.md, "
      "Bounds), got 1e+308";
  check_refused("simulate --schedule 1f1b --study " + study.string(), tail);
  check_refused("sweep --schedules 1f1b --study " + study.string(), tail);
}

TEST_CASE("a report figure that is not finite is an internal error naming it", "[bounds]") {
  const braid::test::StudyFixture& f = braid::test::short_default_study();
  braid::ScheduleOptions o;
  o.pp = 2;
  o.microbatches = 4;
  const braid::Schedule s = braid::make_schedule("1f1b", o);
  const braid::CostModel cost = build_cost_model(f.study, f.profile, s.virtual_stages());
  const braid::Dag dag = braid::lower(s, cost);
  braid::Timeline t = braid::simulate(dag);
  CHECK_NOTHROW(braid::make_report("finite", s, cost, dag, t));
  t.iteration_time_s = INFINITY;
  CHECK_THROWS_WITH(braid::make_report("overflowed", s, cost, dag, t),
                    Catch::Contains("report figure iteration_time_s = inf is not finite for "
                                    "schedule 1f1b on overflowed"));
}
