// The simulator on the studies in configs/: the sum identity on every rank of every schedule and
// study, and the ordering of TP bubbles DESIGN §6 predicts on the default study.
#include <string>
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
