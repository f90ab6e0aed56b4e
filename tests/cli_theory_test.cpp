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
  CHECK(t.out.find("TP bubble, rank 0             2m T_AR") != std::string::npos);
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
