// `braid theory` end to end through the built binary: the table, JSON with closed form,
// simulated value and difference, scans with their slopes and SVG chart, and bad input as exit
// code 2 with one line on stderr and no output file.
#include <catch2/catch.hpp>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::run_braid;
using braid::test::slurp;

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  static int counter = 0;
  fs::path dir =
      fs::temp_directory_path() /
      ("braid_cli_theory_test." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("braid theory prints closed form, simulated value and difference", "[cli][theory]") {
  const CliRun t =
      run_braid("theory --schedule 1f1b-i,stp --pp 4 --microbatches 16 --unit-costs 1,1,1,0.25");
  REQUIRE(t.exit_code == 0);
  // Columns are as wide as their longest cell plus two spaces (no cell runs into the next).
  CHECK(t.out.find("TP bubble, rank 0              2m T_AR") != std::string::npos);
  CHECK(t.out.find("(2p+1) T_AR") != std::string::npos);
  const CliRun j = run_braid(
      "theory --schedule 1f1b-i,stp --pp 4 --microbatches 16 --unit-costs "
      "1,1,1,0.25 --json");
  REQUIRE(j.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  REQUIRE(doc["rows"].size() == 2);
  const nlohmann::json& i = doc["rows"][0];
  CHECK(i["schedule"] == "1f1b-i");
  CHECK(i["tp_bubble"]["closed_s"] == 8.0);  // 2m T_AR = 2 * 16 * 0.25
  CHECK(i["tp_bubble"]["simulated_s"] == 8.0);
  CHECK(i["tp_bubble"]["difference_s"] == 0.0);
  CHECK(i["pp_bubble"]["simulated_s"] == 9.75);         // (p-1)(T_F+T_AR+T_B+T_W), exact
  CHECK(i["peak_activation"]["simulated_ma"] == 11.0);  // 3p-1 (docs/theory.md)
  const nlohmann::json& s = doc["rows"][1];
  CHECK(s["tp_bubble"]["simulated_s"] == 2.25);  // (2p+1) T_AR
  CHECK(s["ranks"].size() == 4);
  CHECK(run_braid("theory --schedule 1f1b-i,stp --pp 4 --microbatches 16 --unit-costs 1,1,1,0.25 "
                  "--json")
            .out == j.out);  // byte-stable
}

TEST_CASE("braid theory --scan prints slopes and draws the chart", "[cli][theory]") {
  const fs::path dir = scratch();
  const fs::path svg = dir / "scan.svg";
  const CliRun r = run_braid(
      "theory --schedule stp,zb-v --pp 2 --unit-costs 1,1,1,0.25 --scan m=8..32 "
      "--json --svg '" +
      svg.string() + "'");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  CHECK(doc["axis"] == "m");
  CHECK(doc["step"] == 2);                  // default: p
  CHECK(doc["series"][0]["slope"] == 0.0);  // stp: (2p+1) T_AR at every m >= 3p-1 = 5
  CHECK(doc["series"][1]["slope"] == 1.0);  // zb-v: 4 T_AR per microbatch
  CHECK(doc["series"][0]["points"].size() == 13);
  const std::string chart = slurp(svg);
  CHECK(chart.rfind("<?xml", 0) == 0);
  CHECK(chart.find("<polyline") != std::string::npos);
  CHECK(chart.find("stp: 0") != std::string::npos);
  CHECK(chart.find("microbatches m") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("braid theory rejects bad input with one line and exit code 2", "[cli][theory]") {
  const fs::path dir = scratch();
  const fs::path svg = dir / "never.svg";
  for (const std::string& args :
       {std::string("theory --schedule nope --unit-costs 1,1,1,0.25"),
        std::string("theory --schedule stp --unit-costs 1,1,1"),
        std::string("theory --schedule stp --pp 4 --microbatches 7 --unit-costs 1,1,1,0.25"),
        std::string("theory --schedule stp --unit-costs 1,1,1,0.25 --scan x=1..2"),
        std::string("theory --schedule stp --unit-costs 1,1,1,0.25 --svg '") + svg.string() + "'",
        std::string("theory --schedule stp --vpp 3 --unit-costs 1,1,1,0.25")}) {
    INFO(args);
    const CliRun r = run_braid(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK_FALSE(fs::exists(svg));
  fs::remove_all(dir);
}

TEST_CASE("braid theory --study scans the study's own exposed TP time as docs/theory.md states",
          "[cli][theory][study]") {
  // docs/theory.md, "On a real study": on the default study (Qwen2-12.1B, 2 x 8 A800, tp 8, pp 2,
  // SP off) STP's rank-0 exposed TP time grows with m, unlike its uniform-cost form (2p+1) T_AR,
  // because the embedding's all-reduce opens every forward of chunk 0 with nothing to hide it;
  // without the embedding it is flat; 1f1b-i's grows more than ten times as fast.
  const CliRun r =
      run_braid("theory --study default --schedules stp,1f1b-i --scan m=16..64 --step 16 --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json scan = nlohmann::json::parse(r.out);
  REQUIRE(scan["series"].size() == 2);
  const auto& stp = scan["series"][0];
  const auto& interleaved = scan["series"][1];
  REQUIRE(stp["points"].size() == 4);
  const double stp_slope = stp["slope_s_per_rank"][0];
  const double i_slope = interleaved["slope_s_per_rank"][0];
  CHECK(stp_slope > 0);
  CHECK(stp_slope * 10 < i_slope);
  // Along m, point by point: 1f1b-i's exposed time grows on every rank and STP's on rank 0 (the
  // embedding's all-reduce); STP's rank 1, which has no embedding, stays flat, as (2p+1) T_AR says.
  for (const auto& series : scan["series"])
    for (std::size_t k = 1; k < series["points"].size(); ++k)
      for (std::size_t rank = 0; rank < 2; ++rank) {
        const double now = series["points"][k]["tp_exposed_s"][rank].get<double>();
        const double before = series["points"][k - 1]["tp_exposed_s"][rank].get<double>();
        if (&series == &stp && rank == 1)
          CHECK(now == Approx(before).epsilon(1e-9));
        else
          CHECK(now > before);
      }

  // --explain at m = 16 and 64: the embedding's share is what grows.
  double embedding[2], rest[2];
  int k = 0;
  for (int m : {16, 64}) {
    const CliRun e = run_braid(
        "theory --study default --schedules stp --explain --json "
        "--microbatches " +
        std::to_string(m));
    REQUIRE(e.exit_code == 0);
    const nlohmann::json x = nlohmann::json::parse(e.out)[0]["ranks"][0];
    double sum_unit = 0, sum_phase = 0, sum_collective = 0;
    for (const auto& [name, v] : x["by_unit"].items()) sum_unit += v.get<double>();
    for (const auto& [name, v] : x["by_phase"].items()) sum_phase += v.get<double>();
    for (const auto& [name, v] : x["by_collective"].items()) sum_collective += v.get<double>();
    const double total = x["tp_exposed_s"];
    CHECK(sum_unit == Approx(total).epsilon(1e-12));
    CHECK(sum_phase == Approx(total).epsilon(1e-12));
    CHECK(sum_collective == Approx(total).epsilon(1e-12));
    // The breakdown's total is the scan's (the report's) exposed time at that m.
    if (m == 16) CHECK(total == Approx(stp["points"][0]["tp_exposed_s"][0].get<double>()));
    if (m == 64) CHECK(total == Approx(stp["points"][3]["tp_exposed_s"][0].get<double>()));
    embedding[k] = x["by_unit"]["Embedding"];
    rest[k] = total - embedding[k];
    ++k;
  }
  const double embedding_slope = (embedding[1] - embedding[0]) / 48;
  const double rest_slope = (rest[1] - rest[0]) / 48;
  CHECK(embedding_slope > 0.5 * stp_slope);  // most of the growth
  CHECK(rest_slope < 0.25 * stp_slope);
  // Without the embedding, rank 0's exposed time is the same at m = 16 and m = 64: O(p), not O(m).
  CHECK(rest[1] == Approx(rest[0]).epsilon(1e-9));
  // Bad input: one line, exit 2.
  for (const char* bad : {"theory --study default --schedules stp",
                          "theory --study default --schedules stp "
                          "--unit-costs 1,1,1,1 --explain",
                          "theory --schedules stp --unit-costs 1,1,1,1 --explain",
                          "theory --study default --schedules stp --scan m=4..8 --svg x.svg"}) {
    const CliRun b = run_braid(bad);
    INFO(bad << ": " << b.err);
    CHECK(b.exit_code == 2);
    CHECK(std::count(b.err.begin(), b.err.end(), '\n') == 1);
  }
}
