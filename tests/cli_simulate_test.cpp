// `braid simulate` and `braid compare` end to end through the built binary: tables, JSON and CSV
// outputs, uniform-cost mode, and bad input as exit code 2 with one line on stderr.
#include <catch2/catch.hpp>

#include "cli_run.hpp"
#include "fixtures.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

}  // namespace

TEST_CASE("braid simulate prints the summary and one row per rank", "[cli][simulate]") {
  const CliRun r = run_braid("simulate --study default --schedule stp");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("iteration time") && Catch::Contains("TP bubble") &&
                        Catch::Contains("critical path") && Catch::Contains("peak memory"));
}

TEST_CASE("braid simulate --json and --csv", "[cli][simulate]") {
  const CliRun j = run_braid("simulate --study default --schedule 1f1b-i --json");
  REQUIRE(j.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(j.out);
  CHECK(report["schedule"] == "1f1b-i");
  CHECK(report["ranks"].size() == 2);
  for (const char* field :
       {"iteration_time_s", "tp_bubble_rate", "pp_bubble_rate", "mfu", "tokens_per_s",
        "samples_per_s", "tflops_per_gpu", "max_peak_memory_gib", "oom", "critical_path"})
    CHECK(report.contains(field));
  CHECK(run_braid("simulate --study default --schedule 1f1b-i --json").out == j.out);  // stable
  const CliRun c = run_braid("simulate --study default --schedule 1f1b-i --csv");
  REQUIRE(c.exit_code == 0);
  CHECK(count_lines(c.out) == 3);
  CHECK(c.out.rfind("schedule,rank,iteration_time_s,busy_s,tp_exposed_s,pp_idle_s", 0) == 0);
}

TEST_CASE("braid simulate in uniform-cost mode replays the hand-computed 1F1B-I",
          "[cli][simulate]") {
  const CliRun r =
      run_braid("simulate --unit-costs 4,8,8,2,4 --pp 2 --microbatches 2 --schedule 1f1b-i --json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["iteration_time_s"] == 110.0);
  CHECK(j["ranks"][0]["tp_exposed_s"] == 8.0);
  CHECK(j["ranks"][0]["activation_peak_ma"] == 4.0);
}

TEST_CASE("blocking and async P2P differ on a study", "[cli][simulate]") {
  const auto time = [](const std::string& p2p) {
    const CliRun r = run_braid("simulate --study default --schedule stp --json --p2p " + p2p);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["iteration_time_s"].get<double>();
  };
  CHECK(time("async") < time("blocking"));
}

TEST_CASE("braid compare: one row per schedule, speed-up vs 1f1b-i, the best marked",
          "[cli][compare]") {
  const CliRun r = run_braid("compare --study default");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("speed-up vs 1f1b-i") && Catch::Contains("<- best") &&
                        Catch::Contains("stp-offload") && Catch::Contains("dualpipe-v"));
  const CliRun j = run_braid("compare --study default --schedules 1f1b-i,stp --json");
  REQUIRE(j.exit_code == 0);
  CHECK(nlohmann::json::parse(j.out)["reports"].size() == 2);
  const CliRun c = run_braid("compare --study default --schedules 1f1b,zb-v,stp --csv");
  REQUIRE(c.exit_code == 0);
  CHECK(count_lines(c.out) == 4);
}

TEST_CASE("bad input to simulate and compare: exit code 2 and one line on stderr",
          "[cli][simulate][errors]") {
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"simulate --study default --schedule nope", "unknown schedule"},
      {"simulate --study default", "--schedule"},
      {"simulate --unit-costs 4,8,x,2 --pp 2 --microbatches 4 --schedule stp", "--unit-costs"},
      {"simulate --unit-costs 4,8,8 --pp 2 --microbatches 4 --schedule stp", "tf,tb,tw,tar"},
      {"simulate --unit-costs 4,8,8,2 --microbatches 4 --schedule stp", "--pp"},
      {"simulate --unit-costs 4,8,8,2 --pp 2 --microbatches 4 --schedule stp --study default",
       "takes no --study"},
      {"simulate --unit-costs 4,8,8,2 --pp 2 --microbatches 2 --schedule stp", "--microbatches"},
      {"simulate --study default --schedule stp --trace /nonexistent/dir/t.json", "--trace"},
      {"simulate --study default --schedule stp --svg /nonexistent/dir/t.svg", "--svg"},
      {"simulate --study default --schedule stp --p2p sometimes", "--p2p"},
      {"simulate --study default --schedule-csv /nonexistent.csv", "--schedule-csv"},
      {"compare --study default --schedules 1f1b-i,nope", "unknown schedule"},
      {"compare --study nope", "nope"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_braid(c.args);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
  }
}

TEST_CASE("braid simulate --schedule-csv replays an exported schedule", "[cli][simulate]") {
  const fs::path csv =
      fs::temp_directory_path() / ("braid_cli_simulate_zbv." + std::to_string(::getpid()) + ".csv");
  REQUIRE(
      run_braid("export --format pytorch-csv --schedule zb-v --pp 2 --microbatches 4 --output '" +
                csv.string() + "'")
          .exit_code == 0);
  const CliRun a = run_braid("simulate --study default --microbatches 4 --json --schedule-csv '" +
                             csv.string() + "'");
  const CliRun b = run_braid("simulate --study default --microbatches 4 --json --schedule zb-v");
  fs::remove(csv);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  // ZB-V needs nothing the CSV cannot say (no FF / FW pairs), so the replay is the same iteration.
  CHECK(nlohmann::json::parse(a.out)["iteration_time_s"] ==
        nlohmann::json::parse(b.out)["iteration_time_s"]);
  CHECK(nlohmann::json::parse(a.out)["tp_bubble_rate"] ==
        nlohmann::json::parse(b.out)["tp_bubble_rate"]);
}

TEST_CASE("a hand-written layer split names one entry per virtual stage of the schedule",
          "[cli][simulate]") {
  // The default study is pp 2: stp has 4 virtual stages, 1f1b has 2.
  CHECK(run_braid("simulate --study default --schedule stp --layers-per-stage 3,3,3,2").exit_code ==
        0);
  CHECK(run_braid("simulate --study default --schedule 1f1b --layers-per-stage 6,5").exit_code ==
        0);
  const CliRun wrong = run_braid("simulate --study default --schedule stp --layers-per-stage 6,5");
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("one per virtual stage (4)"));
}

TEST_CASE("a mistyped schedule, model, cluster or profile name gets a did-you-mean",
          "[cli][simulate][errors]") {
  struct Case {
    const char* args;
    const char* guess;  // "" when no known name is close enough
  };
  const Case cases[] = {
      {"simulate --schedule stpp", "; did you mean stp?"},
      {"simulate --schedule stp --model qwen2-7", "; did you mean qwen2-7b?"},
      {"simulate --schedule stp --model 'qwen2-7 '", "; did you mean qwen2-7b?"},
      {"simulate --schedule stp --cluster dgx-h10", "; did you mean dgx-h100?"},
      {"simulate --schedule stp --profile a80", "; did you mean a800?"},
      {"simulate --schedule stp --study defualt", "; did you mean default?"},
      {"compare --schedules 1f1b-i,zb-w", "; did you mean zb-v?"},
      {"sweep --schedules stp,dualpipe", "; did you mean dualpipe-v?"},
      {"compare --study tests/data/study_unknown_schedule.yaml", "; did you mean zb-v?"},
      {"simulate --schedule nope", ""},
      {"simulate --schedule stp --model llama", ""},
  };
  for (const Case& c : cases) {
    const CliRun r = run_braid(c.args);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    if (*c.guess != '\0')
      CHECK_THAT(r.err, Catch::EndsWith(std::string(c.guess) + "\n"));
    else
      CHECK_THAT(r.err, !Catch::Contains("did you mean"));
  }
}

TEST_CASE("a tp x pp that does not divide the GPUs names the options the user gave",
          "[cli][simulate][errors]") {
  // The default study: tp 8, pp 2 on a800x16 (2 x 8 GPUs).
  const std::string product =
      ": parallel: tp x pp = 8 x 4 = 32 does not divide the 16 GPUs of cluster a800x16 (2 x 8)";
  CHECK_THAT(run_braid("simulate --schedule 1f1b --pp 4").err,
             Catch::StartsWith("braid: --pp" + product));
  CHECK_THAT(run_braid("simulate --schedule 1f1b --tp 8 --pp 4").err,
             Catch::StartsWith("braid: --tp and --pp" + product));
  CHECK_THAT(run_braid("simulate --schedule 1f1b --tp 8 --pp 4 --nodes 3").err,
             Catch::StartsWith("braid: --tp, --pp and --nodes: parallel: tp x pp = 8 x 4 = 32 "
                               "does not divide the 24 GPUs"));
  CHECK_THAT(run_braid("simulate --schedule 1f1b --nodes 3").err,
             Catch::StartsWith("braid: --nodes: parallel: tp x pp = 8 x 2 = 16 does not divide"));
  // Neither given: the study file's sizes are at fault.
  const fs::path study =
      fs::temp_directory_path() / ("braid_cli_tp_pp." + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream f(study);
    f << "name: pp4\nmodel: qwen2-12.1b\ncluster: a800x16\nparallel:\n  tp: 8\n  pp: 4\n"
         "training:\n  seq: 6144\n  microbatches: 64\n";
  }
  const CliRun r = run_braid("simulate --schedule 1f1b --study '" + study.string() + "'");
  fs::remove(study);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("braid: " + study.string() + product));
}

TEST_CASE("1f1b and gpipe refuse fewer microbatches than stages, as 1f1b-i and stp do",
          "[cli][simulate][errors]") {
  // The default study has pp 2: the minimum is p = 2 (stp's is 2p = 4).
  for (const char* schedule : {"1f1b", "gpipe"}) {
    const CliRun r =
        run_braid(std::string("simulate --schedule ") + schedule + " --microbatches 1");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err == std::string("braid: --microbatches: 1: ") + schedule +
                       " needs at least 2 microbatches (p with p = 2)\n");
  }
  CHECK(run_braid("simulate --schedule stp --microbatches 1").err ==
        "braid: --microbatches: 1: stp needs at least 4 microbatches (2p with p = 2)\n");
  // m = p runs; one stage (pp 1) still takes a single microbatch.
  CHECK(run_braid("simulate --schedule 1f1b --microbatches 2").exit_code == 0);
  CHECK(run_braid("simulate --schedule gpipe --pp 1 --microbatches 1").exit_code == 0);
}

TEST_CASE("a model or cluster without --study starts from the job defaults and says which",
          "[cli][simulate][defaults]") {
  // configs/studies/job-defaults.yaml: tp 8, pp 1, vpp 2, cp 1, seq 8192, mbs 1, m 64, sp on,
  // recompute none, distributed optimizer on, every schedule. Given here: tp, pp and m.
  const std::string trace = (braid::test::scratch_dir() / "job-defaults.json").string();
  const CliRun r = run_braid(
      "simulate --model llama3.1-8b --cluster dgx-h100 --schedule 1f1b --tp 2 --pp 2 "
      "--microbatches 8 --trace " +
      trace);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("\njob defaults (configs/studies/job-defaults.yaml), not given: "
                             "vpp 2, cp 1, seq 8192, mbs 1, sp on, recompute none, "
                             "distributed optimizer on, schedules gpipe,1f1b,1f1b-i,zb-h1,"
                             "zb-v,dualpipe-v,stp,stp-offload\n"));
  CHECK_THAT(r.out, Catch::Contains("sp on, recompute none, offload 0, distributed optimizer on"));
  CHECK_THAT(r.out, Catch::Contains("schedule 1f1b on llama3.1-8b on dgx-h100: pp 2"));
  CHECK_THAT(r.out, !Catch::Contains("default:") && !Catch::Contains("on default"));
  const nlohmann::json t = nlohmann::json::parse(braid::test::slurp(trace));
  CHECK(t["otherData"]["study"] == "llama3.1-8b on dgx-h100");

  SECTION("each setting given is left out of the line; schedules (no simulate option) stays") {
    const CliRun all = run_braid(
        "simulate --model llama3.1-8b --cluster dgx-h100 --schedule 1f1b --tp 2 --pp 2 --vpp 1 "
        "--cp 1 --seq 4096 --mbs 1 --microbatches 8 --sp off --recompute full "
        "--distributed-optimizer off");
    REQUIRE(all.exit_code == 0);
    CHECK_THAT(all.out, Catch::Contains("\njob defaults (configs/studies/job-defaults.yaml), not "
                                        "given: schedules gpipe,"));
    CHECK_THAT(all.out, Catch::Contains("sp off, recompute full, offload 0, distributed optimizer "
                                        "off"));
  }
  SECTION("without a model or cluster the default study runs as before, with no such line") {
    const CliRun d = run_braid("simulate --schedule stp");
    REQUIRE(d.exit_code == 0);
    CHECK_THAT(d.out, !Catch::Contains("job defaults"));
    CHECK_THAT(d.out, Catch::Contains("schedule stp on default: pp 2"));
  }
  SECTION("--study keeps the study file's settings and name, --model only replaces the model") {
    const CliRun s = run_braid("simulate --study default --cluster h100x64 --schedule stp");
    REQUIRE(s.exit_code == 0);
    CHECK_THAT(s.out, !Catch::Contains("job defaults"));
    CHECK_THAT(s.out, Catch::Contains("model qwen2-12.1b on h100x64 (8 x 8 GPUs): tp 8, pp 2") &&
                          Catch::Contains("schedule stp on default: pp 2"));
  }
}

TEST_CASE("search and sweep from the job defaults list what they did not vary",
          "[cli][simulate][defaults]") {
  const CliRun s = run_braid(
      "sweep --model llama3.1-8b --cluster dgx-h100 --tp 2,4 --pp 2 --microbatches 8 "
      "--schedules 1f1b --jobs 1");
  REQUIRE(s.exit_code == 0);
  CHECK_THAT(s.out, Catch::StartsWith("job defaults (configs/studies/job-defaults.yaml), not "
                                      "given: vpp 2, cp 1, seq 8192, mbs 1, sp on, recompute none, "
                                      "distributed optimizer on\n"));
  CHECK_THAT(s.out, Catch::Contains("sweep of study llama3.1-8b on dgx-h100: 2 configurations"));
}

TEST_CASE("simulate runs an MoE model with its EP all-to-all, sweep explores ep, design refuses it",
          "[cli][moe][errors]") {
  const CliRun sim = run_braid(
      "simulate --model mixtral-8x7b --ep 8 --etp 1 --schedule 1f1b --seq 1024 --microbatches 2");
  CHECK(sim.err.empty());
  CHECK(sim.exit_code == 0);
  CHECK_THAT(sim.out, Catch::Contains("EP exposed"));
  // sweep: ep and etp are axes, one row per ep here, each naming its sizes.
  const CliRun sweep = run_braid(
      "sweep --model mixtral-8x7b --nodes 2 --tp 1 --pp 2 --ep 4,8 --etp 1 --schedules 1f1b --seq "
      "1024 "
      "--microbatches 2 --json");
  INFO(sweep.err);
  REQUIRE(sweep.exit_code == 0);
  const auto rows = nlohmann::json::parse(sweep.out)["rows"];
  REQUIRE(rows.size() == 2);
  // Ranked: ep 8 (one expert a rank) fits, ep 4 does not.
  CHECK(rows[0]["ep"] == 8);
  CHECK(rows[0]["status"] == "ok");
  CHECK(rows[1]["ep"] == 4);
  CHECK(rows[1]["etp"] == 1);
  const std::string out = (braid::test::scratch_dir() / "moe-design.json").string();
  const CliRun r = run_braid("design --model mixtral-8x7b -o " + out);
  CHECK(r.exit_code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("--model: model: mixtral-8x7b is a Mixture-of-Experts model "
                                    "(8 experts, top-2): this command does not explore --ep yet"));
  CHECK(r.out.empty());
}

TEST_CASE(
    "the options --moe-dispatcher and --moe-fp8-dispatch override the model's on simulate, compare "
    "and sweep, and bad values exit 2 in one line",
    "[cli][moe][allgather][errors]") {
  const std::string job =
      "--model mixtral-8x7b --cluster dgx-h100 --nodes 2 --tp 2 --pp 2 --ep 4 --sp on --seq 4096 "
      "--microbatches 4 ";
  auto time_of = [](const std::string& args) {
    const CliRun r = run_braid(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["iteration_time_s"].get<double>();
  };
  const double a2a = time_of("simulate " + job + "--schedule 1f1b --json");
  const double named =
      time_of("simulate " + job + "--schedule 1f1b --json --moe-dispatcher alltoall");
  const double gather =
      time_of("simulate " + job + "--schedule 1f1b --json --moe-dispatcher allgather");
  CHECK(named == a2a);  // the model's own dispatcher
  CHECK(gather != a2a);
  // compare and sweep take it too, and give simulate's time.
  const CliRun cmp =
      run_braid("compare " + job + "--schedules 1f1b --json --moe-dispatcher allgather");
  REQUIRE(cmp.exit_code == 0);
  CHECK(nlohmann::json::parse(cmp.out)["reports"][0]["iteration_time_s"] == gather);
  const CliRun sweep =
      run_braid("sweep " + job + "--schedules 1f1b --json --moe-dispatcher allgather");
  INFO(sweep.err);
  REQUIRE(sweep.exit_code == 0);
  CHECK(nlohmann::json::parse(sweep.out)["rows"][0]["report"]["iteration_time_s"] == gather);
  // Bad values and combinations: exit 2, one line naming the option.
  const CliRun bad = run_braid("simulate " + job + "--moe-dispatcher flex");
  CHECK(bad.exit_code == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Catch::Contains("--moe-dispatcher") && Catch::Contains("allgather"));
  const CliRun fp8 = run_braid("simulate " + job +
                               "--schedule 1f1b --moe-dispatcher allgather --moe-fp8-dispatch");
  CHECK(fp8.exit_code == 2);
  CHECK(count_lines(fp8.err) == 1);
  CHECK_THAT(fp8.err, Catch::StartsWith("braid: --moe-fp8-dispatch: model.moe.fp8_dispatch: needs "
                                        "the deepep dispatcher"));
  // With DeepEP it runs.
  CHECK(time_of("simulate " + job +
                "--schedule 1f1b --json --moe-dispatcher deepep "
                "--moe-fp8-dispatch") > 0);
}
