// The STP paper's study grid (configs/studies/paper/, tools/run-study-grid): `braid compare` runs
// on every study of it (with few microbatches, to stay fast), `--offload` adds the offloaded rows
// beside the plain ones, `info` and `simulate` print per-virtual-stage times, and the script
// writes one CSV and one SVG per group in --quick mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "fixtures.hpp"

namespace {

namespace fs = std::filesystem;

using Run = braid::test::CliRun;
using braid::test::slurp;

fs::path scratch() {
  static int counter = 0;
  fs::path dir = braid::test::scratch_dir() / std::to_string(counter++);
  fs::create_directories(dir);
  return dir;
}

// A shell command from the source root (the grid script), like run_braid for the binary.
Run shell(const std::string& command) {
  const fs::path dir = scratch();
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  const std::string cmd = std::string("cd '") + BRAID_SOURCE_DIR + "' && " + command + " >'" +
                          out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  Run r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

Run cli(const std::string& args) { return braid::test::run_braid(args); }

std::vector<fs::path> grid_studies() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(BRAID_SOURCE_DIR) / "configs/studies/paper"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("braid compare works on every study of the paper grid", "[grid][cli]") {
  const std::vector<fs::path> studies = grid_studies();
  REQUIRE(studies.size() == 12);
  for (const fs::path& study : studies) {
    INFO(study.filename().string());
    const Run r = cli("compare --study '" + study.string() + "' --microbatches 16");
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK_THAT(r.out, Catch::Contains("stp") && Catch::Contains("peak GiB"));
  }
}

TEST_CASE("compare --offload shows every schedule with and without offloading",
          "[grid][cli][offload]") {
  const Run r =
      cli("compare --study configs/studies/paper/offload-qwen2-26.3b-h20x16.yaml --microbatches 16 "
          "--schedules 1f1b,stp --offload 1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("1f1b+offload") && Catch::Contains("stp+offload") &&
                        Catch::Contains("offload stall"));
  const Run sched = cli("schedule --schedule 1f1b --pp 2 --microbatches 4 --offload 1");
  REQUIRE(sched.exit_code == 0);
  CHECK_THAT(sched.out, Catch::Contains("schedule 1f1b+offload") &&
                            Catch::Contains("rank 0: F0.0 OFF0.0 REL0.0 F0.1 OFF0.1 B0.0"));
  const Run bad =
      cli("compare --study configs/studies/paper/offload-qwen2-26.3b-h20x16.yaml "
          "--offload 2");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--offload") && Catch::Contains("between 0 (off) and 1"));
}

TEST_CASE("info and simulate print per-virtual-stage times and the ViT parameters apart",
          "[grid][cli][multimodal]") {
  const std::string study = "configs/studies/paper/mllm-qwen2-vl-14.9b-imbalanced.yaml";
  const Run info = cli("info --study " + study);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("vision 0.699 B") && Catch::Contains("vit_layers") &&
                           Catch::Contains("ViT on virtual stage(s) of its own"));
  const Run sim = cli("simulate --study " + study + " --schedule stp --microbatches 8");
  REQUIRE(sim.exit_code == 0);
  CHECK_THAT(sim.out,
             Catch::Contains("virtual stages (forward + backward") && Catch::Contains("imbalance"));
  const Run balanced =
      cli("info --study " + study + " --balance cost --vision-placement " + "first-stage --json");
  REQUIRE(balanced.exit_code == 0);
  CHECK_THAT(balanced.out, Catch::Contains("\"stage_times\""));
  const Run hand = cli("info --study " + study + " --layers-per-stage 32,16,0,0");
  CHECK(hand.exit_code == 2);
  CHECK_THAT(hand.err, Catch::Contains("layers_per_stage") && Catch::Contains("1 or more"));
  const Run typo = cli("info --study " + study + " --layers-per-stage 32,x");
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("--layers-per-stage"));
}

TEST_CASE("tools/run-study-grid --quick writes one CSV and one SVG per group", "[grid][script]") {
  const fs::path out = scratch() / "grid";
  const Run r = shell("BRAID='" + std::string(BRAID_EXE) + "' tools/run-study-grid --quick '" +
                      out.string() + "'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* group : {"llm", "mllm", "offload"}) {
    INFO(group);
    const std::string csv = slurp(out / (std::string(group) + ".csv"));
    const std::string svg = slurp(out / (std::string(group) + ".svg"));
    CHECK(csv.rfind("study,rank,status", 0) == 0);
    CHECK(std::count(csv.begin(), csv.end(), '\n') > 4);
    CHECK_THAT(svg, Catch::StartsWith("<svg") && Catch::Contains("peak memory per pipeline"));
  }
  CHECK_THAT(slurp(out / "offload.csv"), Catch::Contains("stp-offload"));
}
