// The simulator on the studies in configs/: the sum identity on every rank of every schedule and
// study, the ordering of TP bubbles DESIGN §6 predicts on the default study, and the public Hopper
// validation studies (configs/studies/hopper/, configs/studies/hopper-moe/, tools/validation) load
// and simulate.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"

using namespace braid;

namespace {

struct StudyRun {
  Study study;
  Profile profile;
};

StudyRun load(const std::string& name) {
  StudyRun s;
  s.study = load_study(resolve_config("studies", name));
  s.profile = load_profile(resolve_config("profiles", s.study.cluster.profile));
  return s;
}

Report simulate_study(const StudyRun& s, const std::string& schedule) {
  ScheduleOptions o;
  o.pp = s.study.parallel.pp;
  o.vpp = s.study.parallel.vpp;
  o.microbatches = s.study.training.microbatches;
  const Schedule sched = make_schedule(schedule, o);
  const CostModel cost = build_cost_model(s.study, s.profile, sched.virtual_stages());
  const Dag dag = lower(sched, cost);
  const Timeline t = simulate(dag);
  return make_report(s.study.name, sched, cost, dag, t);
}

}  // namespace

TEST_CASE(
    "every schedule on every study keeps busy + tp + pp + offload + dp + optimizer == iteration "
    "time",
    "[report][study]") {
  for (const char* study : {"default", "qwen2-26.3b-a800x32", "qwen2-7b-h20x16"}) {
    const StudyRun s = load(study);
    for (const std::string& name : schedule_names()) {
      INFO(study << " " << name);
      const Report r = simulate_study(s, name);
      test::check_sum_identity(r);
      CHECK(r.critical_path.wait_s == Approx(0).margin(1e-9 * r.iteration_time_s));
      CHECK(r.mfu > 0);
      CHECK(r.mfu < 1);
    }
  }
}

TEST_CASE("on the default study stp has the lowest TP bubble and zb-v a higher one than 1f1b-i",
          "[report][study]") {
  const StudyRun s = load("default");
  const Report i = simulate_study(s, "1f1b-i");
  const Report z = simulate_study(s, "zb-v");
  const Report t = simulate_study(s, "stp");
  CHECK(t.tp_bubble_rate < i.tp_bubble_rate);
  CHECK(z.tp_bubble_rate > i.tp_bubble_rate);
  CHECK(t.iteration_time_s < i.iteration_time_s);
}

TEST_CASE("a study that does not fit still simulates and is flagged with the rank and amount",
          "[report][study]") {
  StudyRun s = load("default");
  s.profile.hbm_bytes = 20.0 * 1024 * 1024 * 1024;  // a 20 GiB GPU
  const Report r = simulate_study(s, "stp");
  CHECK(r.oom);
  REQUIRE(r.oom_rank >= 0);
  CHECK(r.ranks[r.oom_rank].oom);
  CHECK(r.oom_over_gib == Approx(r.ranks[r.oom_rank].peak_memory_gib - 20.0));
}

TEST_CASE("each public Hopper validation study loads as its published job and simulates 1F1B-I",
          "[validation][study]") {
  // tools/validation's Hopper table runs these (docs/validation.md): a study that stops loading
  // or simulating fails here rather than in the doc's regeneration. The GBS is the published
  // table's; every run is 8192 tokens a sample. Not a test of the error values.
  const std::vector<std::pair<std::string, int>> published = {
      {"llama3-70b-h100x64-gbs256", 256},
      {"llama3.1-405b-h100x1024-gbs1536", 1536},
      {"llama3-70b-h100x64-gbs128", 128},
      {"llama3.1-405b-h100x1024-gbs512", 512},
  };
  const std::filesystem::path dir =
      std::filesystem::path(BRAID_SOURCE_DIR) / "configs/studies/hopper";
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == published.size());  // a study added or dropped is added to or dropped from here
  for (const auto& [name, gbs] : published) {
    INFO(name);
    const StudyRun s = load((dir / (name + ".yaml")).string());
    const ParallelConfig& p = s.study.parallel;
    const TrainingConfig& t = s.study.training;
    CHECK(p.dp * p.tp * p.cp * p.pp == s.study.cluster.gpus());
    CHECK(p.dp * t.microbatches * t.micro_batch_size == gbs);
    CHECK(t.seq == 8192);
    CHECK(t.precision == Precision::Fp8Current);
    CHECK(t.tp_comm_overlap);
    const Report r = simulate_study(s, "1f1b-i");
    test::check_sum_identity(r);
    CHECK(r.iteration_time_s > 0);
  }
}

TEST_CASE("each public MoE validation study loads as its published job and simulates its schedule",
          "[validation][study]") {
  // tools/validation's MoE table runs these (docs/validation.md, "Public MoE runs (DGX H100)"):
  // the row's GPUs, TP, PP, VP, EP, GBS, sequence 4096 and precision, and the recipe's schedule
  // (1F1B-I with a virtual pipeline, else 1F1B). GBS = dp x microbatches x micro-batch size, dp
  // = GPUs / (tp x pp): e.g. Qwen3-235B-A22B, 256 / (2 x 8) = 16 replicas x 512 x 1 = 8192. Not
  // a test of the error values.
  struct Row {
    std::string name;
    int gpus, tp, pp, vpp, ep, gbs;
    Precision precision;
  };
  const std::vector<Row> published = {
      {"qwen3-30b-a3b-h100x16-gbs1024", 16, 1, 1, 0, 16, 1024, Precision::Fp8Current},
      {"qwen3-30b-a3b-h100x16-gbs1024-pp2", 16, 1, 2, 12, 8, 1024, Precision::Fp8Current},
      {"qwen3-235b-a22b-h100x256-gbs8192", 256, 2, 8, 4, 32, 8192, Precision::Fp8Current},
      {"qwen3-235b-a22b-h100x256-gbs2048", 256, 2, 8, 4, 32, 2048, Precision::Fp8Current},
      {"gpt-oss-120b-h100x64-gbs1280", 64, 1, 4, 0, 8, 1280, Precision::Bf16},
      {"gpt-oss-120b-h100x64-gbs512", 64, 1, 4, 0, 8, 512, Precision::Bf16},
  };
  const std::filesystem::path dir =
      std::filesystem::path(BRAID_SOURCE_DIR) / "configs/studies/hopper-moe";
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == published.size());  // a study added or dropped is added to or dropped from here
  for (const Row& row : published) {
    INFO(row.name);
    const StudyRun s = load((dir / (row.name + ".yaml")).string());
    const ParallelConfig& p = s.study.parallel;
    const TrainingConfig& t = s.study.training;
    CHECK(s.study.cluster.gpus() == row.gpus);
    CHECK(p.dp * p.tp * p.cp * p.pp == row.gpus);
    CHECK(p.tp == row.tp);
    CHECK(p.pp == row.pp);
    CHECK(p.cp == 1);
    CHECK(p.ep == row.ep);
    CHECK(p.dp * t.microbatches * t.micro_batch_size == row.gbs);
    CHECK(t.seq == 4096);
    CHECK(t.precision == row.precision);
    CHECK(t.moe_routing.kind == MoeRoutingKind::Balanced);  // the summary's forced balance
    const bool interleaved = row.vpp > 0;
    if (interleaved) CHECK(p.vpp == row.vpp);
    REQUIRE(s.study.schedules.size() == 1);
    CHECK(s.study.schedules[0] == (interleaved ? "1f1b-i" : "1f1b"));
    const Report r = simulate_study(s, s.study.schedules[0]);
    test::check_sum_identity(r);
    CHECK(r.iteration_time_s > 0);
  }
}
