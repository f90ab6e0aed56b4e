// Activation offloading (docs/multimodal.md): the shared post-pass adds OFFLOAD / RELOAD to any
// schedule without touching its compute order, lowers peak activation memory, and costs time
// only when a reload is late (offload_stall), which a slow host link makes happen; copies in the
// two directions contend per the profile.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"

using namespace braid;

namespace {

Study h20_study() {
  StudyOverrides o;
  o.model = "qwen2-26.3b";
  o.cluster = "h20x16";
  o.tp = 2;
  o.pp = 8;
  o.vpp = 2;
  o.seq = 4096;
  o.microbatches = 16;
  return load_study(resolve_config("studies", "default"), o);
}

std::vector<Instruction> compute_only(const RankProgram& p) {
  std::vector<Instruction> out;
  for (const Instruction& in : p.instructions)
    if (in.op != InstructionKind::Offload && in.op != InstructionKind::Reload) out.push_back(in);
  return out;
}

int count(const Schedule& s, InstructionKind op) {
  int n = 0;
  for (const RankProgram& r : s.ranks)
    for (const Instruction& in : r.instructions) n += in.op == op;
  return n;
}

Report run(const Study& s, const Profile& p, const Schedule& sched, SimOptions sim = {}) {
  const CostModel cm = build_cost_model(s, p, sched.virtual_stages());
  const Dag dag = lower(sched, cm);
  return make_report(s.name, sched, cm, dag, simulate(dag, sim));
}

ScheduleOptions options(int pp, int m, double offload) {
  ScheduleOptions o;
  o.pp = pp;
  o.vpp = 2;
  o.microbatches = m;
  o.offload = offload;
  return o;
}

}  // namespace

TEST_CASE("offloading (--offload) never changes a schedule's order, only adds OFFLOAD / RELOAD",
          "[offload][schedule]") {
  for (const std::string& name : schedule_names()) {
    if (name == "stp-offload") continue;
    for (int pp : {2, 4}) {
      const int m = std::max(3 * pp, min_microbatches(name, options(pp, 0, 0)));
      INFO(name << " pp " << pp << " m " << m);
      const Schedule plain = make_schedule(name, options(pp, m, 0));
      const Schedule off = make_schedule(name, options(pp, m, 1));
      CHECK(off.name == name + "+offload");
      CHECK(count(plain, InstructionKind::Offload) == 0);
      CHECK(count(off, InstructionKind::Offload) > 0);
      CHECK(count(off, InstructionKind::Offload) == count(off, InstructionKind::Reload));
      for (int r = 0; r < pp; ++r) CHECK(compute_only(off.ranks[r]) == plain.ranks[r].instructions);
      const ValidationResult v = validate(off);
      CHECK(v.ok());
      CHECK(v.peak_in_flight == validate(plain).peak_in_flight);
    }
  }
  // stp with --offload 1 is stp-offload; a fraction offloads that share of the microbatches.
  const Schedule a = make_schedule("stp", options(4, 12, 1));
  ScheduleOptions o = options(4, 12, 0);
  const Schedule b = make_schedule("stp-offload", o);
  for (int r = 0; r < 4; ++r) CHECK(a.ranks[r].instructions == b.ranks[r].instructions);
  const Schedule half = make_schedule("1f1b", options(4, 12, 0.5));
  for (const RankProgram& r : half.ranks)
    for (const Instruction& in : r.instructions)
      if (in.op == InstructionKind::Offload) CHECK(in.a.mb < 6);
  CHECK_THROWS_WITH(make_schedule("1f1b", options(4, 12, 1.5)),
                    Catch::Contains("--offload") && Catch::Contains("between 0 and 1"));
}

TEST_CASE("offloading lowers peak memory on h20x16, tp 2, pp 8", "[offload][memory]") {
  const Study s = h20_study();
  const Profile p = load_profile(s.cluster.profile);
  for (const char* name : {"1f1b", "1f1b-i", "zb-v", "stp"}) {
    INFO(name);
    const Report plain = run(s, p, make_schedule(name, options(8, 16, 0)));
    const Report off = run(s, p, make_schedule(name, options(8, 16, 1)));
    CHECK(off.max_peak_memory_gib < plain.max_peak_memory_gib);
    CHECK(off.ranks[0].activation_peak_bytes < plain.ranks[0].activation_peak_bytes);
    for (int r = 0; r < 8; ++r)
      CHECK(off.ranks[r].activation_peak_bytes <= plain.ranks[r].activation_peak_bytes * 1.0000001);
    CHECK(off.iteration_time_s >= plain.iteration_time_s * 0.999999);  // never faster
  }
}

TEST_CASE("offload_stall is zero on a fast host link and grows as it slows", "[offload][stall]") {
  const Study s = h20_study();
  Profile p = load_profile(s.cluster.profile);
  const Schedule sched = make_schedule("stp-offload", options(8, 16, 0));
  auto stall = [&](double Bps) {
    p.host_d2h_Bps = p.host_h2d_Bps = Bps;
    const Report r = run(s, p, sched);
    double sum = 0;
    for (const RankReport& rr : r.ranks) sum += rr.offload_stall_s;
    return sum;
  };
  CHECK(stall(1e15) == 0.0);  // copies take (almost) no time
  const double at_5 = stall(5e9), at_1 = stall(1e9);
  CHECK(at_5 > 0);
  CHECK(at_1 > at_5);
  // The profile's own Gen5 link: some stall or none, but the time lost is what the report says.
  p = load_profile(s.cluster.profile);
  const Report r = run(s, p, sched);
  test::check_sum_identity(r);
}

TEST_CASE("D2H and H2D copies contend per the profile's bidirectional factors",
          "[offload][contention]") {
  const Study s = h20_study();
  Profile p = load_profile(s.cluster.profile);
  CHECK(p.copy_contention.h2d_slowdown == Approx(1.12));
  CHECK(load_profile("a800").copy_contention.h2d_slowdown == Approx(2.28));
  p.host_d2h_Bps = p.host_h2d_Bps = 2e9;  // long copies, so the directions overlap
  const Schedule sched = make_schedule("stp-offload", options(8, 16, 0));
  auto copy_time = [&](double h2d_slowdown, bool contention) {
    p.copy_contention = CopyContention{1.0, h2d_slowdown};
    const CostModel cm = build_cost_model(s, p, 16);
    const Dag dag = lower(sched, cm);
    SimOptions o;
    o.contention = contention;
    const Timeline tl = simulate(dag, o);
    double stretched = 0;
    for (int i = 0; i < dag.size(); ++i) {
      if (dag.ops[i].kind != OpKind::Reload) continue;
      const double took = tl.end_s[i] - tl.start_s[i];
      CHECK(took >= dag.cost(i).duration_s * (1 - 1e-9));
      stretched += took - dag.cost(i).duration_s;
    }
    return stretched;
  };
  CHECK(copy_time(1.0, true) == Approx(0).margin(1e-12));
  CHECK(copy_time(3.0, true) > 0);                          // reloads slowed while an offload runs
  CHECK(copy_time(3.0, false) == Approx(0).margin(1e-12));  // --no-contention
}
