// The Megatron studies through the DAG and the simulator: full recomputation lowered as each
// layer's forward rerun before its B units (with its collectives, allocating what B and W free),
// HFU next to MFU in the report, the PP 35 (3 chunks) and PP 64 pipelines simulating with the sum
// identity, and `braid compare` on all eight studies end to end (and fast).
#include <catch2/catch.hpp>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::run_braid;

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::check_sum_identity;

namespace {

const char* const kModels[] = {"megatron-22b", "gpt3-175b", "turing-530b", "megatron-1t"};
const char* const kVariants[] = {"full", "selective-sp"};

std::string study_path(const std::string& model, const std::string& variant) {
  return "configs/studies/megatron/" + model + "-" + variant + ".yaml";
}

struct Sim {
  Study study;
  Schedule schedule;
  CostModel cost;
  Dag dag;
  Timeline timeline;
  Report report;
};

Sim run(const Study& study, const std::string& schedule_name = "1f1b-i", bool contention = true) {
  Sim s;
  s.study = study;
  ScheduleOptions o;
  o.pp = study.parallel.pp;
  o.vpp = study.parallel.vpp;
  o.microbatches = study.training.microbatches;
  s.schedule = make_schedule(schedule_name, o);
  REQUIRE(validate(s.schedule).ok());
  s.cost =
      build_cost_model(study, load_profile(study.cluster.profile), s.schedule.virtual_stages());
  s.dag = lower(s.schedule, s.cost);
  SimOptions so;
  so.record_memory = true;
  so.contention = contention;
  s.timeline = simulate(s.dag, so);
  s.report = make_report(study.name, s.schedule, s.cost, s.dag, s.timeline);
  return s;
}

// GPT-3 175B cut down to 2 ranks x 1 chunk (48 layers each), 3 microbatches, 1F1B.
Study small_gpt3(Recompute r, bool sp) {
  StudyOverrides o;
  o.pp = 2;
  o.vpp = 1;
  o.microbatches = 3;
  o.nodes = 2;
  o.recompute = r;
  o.sequence_parallel = sp;
  return load_study(resolve_config("studies", study_path("gpt3-175b", "full")), o);
}

double busy_total(const Report& r) {
  double sum = 0;
  for (const RankReport& rr : r.ranks) sum += rr.busy_s;
  return sum;
}

}  // namespace

TEST_CASE("full recomputation reruns each layer's forward right before its B units",
          "[megatron][dag]") {
  for (bool sp : {false, true}) {
    INFO("sp " << sp);
    // Without contention: the A100 profile's SM-share slowdown would stretch the compute that
    // overlaps the rerun's extra collectives, which is not the rerun's work.
    const Sim none = run(small_gpt3(Recompute::None, sp), "1f1b", false);
    const Sim full = run(small_gpt3(Recompute::Full, sp), "1f1b", false);
    const Dag& dag = full.dag;
    // Per rank: every layer of every microbatch is rerun once, four units, in forward order, and
    // the rerun sits between the previous layer's B units and this layer's first B unit.
    int rerun_compute = 0, rerun_collectives = 0;
    for (int rank = 0; rank < 2; ++rank) {
      const int stream = dag.stream_id(rank, StreamKind::Compute);
      std::vector<int> order(dag.stream_ops.begin() + dag.stream_begin[stream],
                             dag.stream_ops.begin() + dag.stream_begin[stream + 1]);
      for (std::size_t i = 0; i < order.size(); ++i) {
        const DagOp& op = dag.ops[order[i]];
        if (!op.recompute) continue;
        ++rerun_compute;
        CHECK(op.phase == Phase::F);
        if (op.unit == UnitKind::MLP) {
          // The next compute op is the same layer's MLP backward.
          REQUIRE(i + 1 < order.size());
          const DagOp& next = dag.ops[order[i + 1]];
          CHECK(next.phase == Phase::B);
          CHECK(next.unit == UnitKind::MLP);
          CHECK(next.layer == op.layer);
          CHECK(next.mb == op.mb);
        }
        if (op.unit == UnitKind::PreAttn) {
          // Three more rerun units of the same layer follow.
          REQUIRE(i + 3 < order.size());
          for (int k = 1; k <= 3; ++k) {
            CHECK(dag.ops[order[i + k]].recompute);
            CHECK(dag.ops[order[i + k]].layer == op.layer);
          }
        }
      }
    }
    for (const DagOp& op : dag.ops)
      rerun_collectives += op.recompute && op.kind == OpKind::Collective;
    CHECK(rerun_compute == 96 * 4 * 3);
    // The forward's collectives again: 2 All-Reduces per layer, or with SP 2 All-Gathers and 2
    // Reduce-Scatters.
    CHECK(rerun_collectives == 96 * 3 * (sp ? 4 : 2));
    // The rerun ops take the forward's time: busy time grows by exactly the forward compute of
    // every layer (contention off, above).
    double layer_forward_s = 0;
    for (const ChunkCost& c : full.cost.chunks)
      for (const UnitCost& u : c.layer_units) layer_forward_s += u[Phase::F].time_s;
    CHECK(busy_total(full.report) - busy_total(none.report) ==
          Approx(3 * layer_forward_s).epsilon(1e-9));
    CHECK(full.report.iteration_time_s > none.report.iteration_time_s);
    // Memory: everything allocated is freed by the end; the peak is far below no recomputation.
    for (int rank = 0; rank < 2; ++rank) {
      double last = -1;
      for (const MemorySample& m : full.timeline.memory)
        if (m.rank == rank) last = m.activation_bytes;
      CHECK(last == Approx(0).margin(1));
      CHECK(full.timeline.peak_activation_bytes[rank] <
            0.5 * none.timeline.peak_activation_bytes[rank]);
    }
    check_sum_identity(full.report);
    // Model FLOPs identical, hardware FLOPs (HFU) larger by the rerun.
    CHECK(full.cost.model_flops == none.cost.model_flops);
    CHECK(full.report.hfu > full.report.mfu);
  }
}

TEST_CASE("the report's HFU counts recomputation, MFU does not", "[megatron][report]") {
  const Sim s = run(small_gpt3(Recompute::Full, false), "1f1b");
  const Report& r = s.report;
  const double denom = r.iteration_time_s * s.cost.gpus * s.cost.peak_flops;
  CHECK(r.mfu == Approx(s.cost.model_flops / denom).epsilon(1e-12));
  CHECK(r.hfu == Approx(s.cost.hardware_flops / denom).epsilon(1e-12));
  const std::string json = report_json(r);
  const auto j = nlohmann::json::parse(json);
  CHECK(j.at("hfu").get<double>() == Approx(r.hfu));
  CHECK(reports_csv({r}).find(",mfu,hfu,") != std::string::npos);
}

TEST_CASE("PP 35 with 3 chunks and PP 64 simulate with valid schedules and the sum identity",
          "[megatron][study]") {
  for (const char* model : {"turing-530b", "megatron-1t"}) {
    for (const char* variant : kVariants) {
      INFO(model << " " << variant);
      const Study study = load_study(resolve_config("studies", study_path(model, variant)));
      const Sim s = run(study);
      CHECK(s.schedule.pp == study.parallel.pp);
      CHECK(s.schedule.vpp == study.parallel.vpp);
      check_sum_identity(s.report);
      CHECK(s.report.mfu > 0.2);
      CHECK(s.report.mfu < s.report.hfu);
      CHECK(s.report.hfu < 1);
    }
  }
}

// How fast is a benchmark figure (README "Speed"), not a timed test: a wall-clock bound fails
// under a sanitizer or a loaded machine without saying anything about braid.
TEST_CASE("braid compare runs each of the eight Megatron studies", "[megatron][cli]") {
  for (const char* model : kModels) {
    for (const char* variant : kVariants) {
      const std::string args =
          "compare --study " + study_path(model, variant) + " --schedules 1f1b-i --json";
      INFO(args);
      const CliRun r = run_braid(args);
      REQUIRE(r.exit_code == 0);
      CHECK(r.err.empty());
      const auto j = nlohmann::json::parse(r.out);
      REQUIRE(j.at("reports").size() == 1);
      const auto& rep = j.at("reports")[0];
      CHECK(rep.at("schedule") == "1f1b-i");
      CHECK(rep.at("iteration_time_s").get<double>() > 0);
      CHECK(rep.at("hfu").get<double>() > rep.at("mfu").get<double>());
      CHECK_FALSE(rep.at("oom").get<bool>());
    }
  }
}

TEST_CASE("the --nodes override changes the cluster a Megatron study runs on", "[megatron][cli]") {
  const CliRun r =
      run_braid("info --study " + study_path("gpt3-175b", "full") + " --nodes 16 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("gpus") == 128);
  CHECK(j.at("dp") == 2);
  CHECK(j.at("recompute") == "full");
  const CliRun bad = run_braid("info --study " + study_path("gpt3-175b", "full") + " --nodes 3");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("does not divide the 24 GPUs"));
}

TEST_CASE("full recomputation lowers under every schedule, braided ones included",
          "[megatron][dag]") {
  StudyOverrides o;
  o.recompute = Recompute::Full;
  const Study study = load_study(resolve_config("studies", "default"), o);
  for (const std::string& name : schedule_names()) {
    INFO(name);
    const Sim s = run(study, name);
    check_sum_identity(s.report);
    int reruns = 0;
    for (const DagOp& op : s.dag.ops) reruns += op.recompute && op.kind == OpKind::Compute;
    CHECK(reruns == study.model.layers * 4 * study.training.microbatches);
    // Every byte allocated (forward, rerun, backward) is freed by the end of the iteration.
    for (int rank = 0; rank < s.schedule.pp; ++rank) {
      double last = -1;
      for (const MemorySample& m : s.timeline.memory)
        if (m.rank == rank) last = m.activation_bytes;
      CHECK(last == Approx(0).margin(1));
    }
  }
}
