#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;

namespace {

// Every run of this file also has its pp_idle measured from the gaps (check_pp_idle).
Report run(const Schedule& s, const CostModel& cost, const SimOptions& sim = {},
           const LowerOptions& lo = {}) {
  const Dag dag = lower(s, cost, lo);
  const Timeline t = simulate(dag, sim);
  Report r = make_report("hand", s, cost, dag, t);
  check_pp_idle(r, dag, t);
  return r;
}

void check_rank(const RankReport& r, double busy, double tp, double pp, double off = 0) {
  INFO("rank " << r.rank);
  CHECK(r.busy_s == busy);
  CHECK(r.tp_exposed_s == tp);
  CHECK(r.pp_idle_s == pp);
  CHECK(r.offload_stall_s == off);
}

// The exposed time of the groups other than TP, each in its own field.
void check_groups(const RankReport& r, double cp, double ep, double dp) {
  INFO("rank " << r.rank);
  CHECK(r.cp_exposed_s == cp);
  CHECK(r.ep_exposed_s == ep);
  CHECK(r.dp_exposed_s == dp);
}

}  // namespace

// Unit costs (hand_schedules.hpp): forward unit 1, B unit 2, W unit 2, each All-Reduce 1, M_a 4.
TEST_CASE("1F1B, 2 ranks, 2 microbatches: exact breakdown and peak memory", "[report]") {
  const Report r = run(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  CHECK(r.iteration_time_s == 66.0);
  // Rank 0: each F exposes its two All-Reduces (2 x 1); idle [11,28] is 1 TP (F0.1's last
  // All-Reduce) + 16 waiting for rank 1's gradient (sent when its B ends), [44,50] is 6 more.
  check_rank(r.ranks[0], 40, 4, 22);
  // Rank 1: start-up [0,6] and drain [50,66] are PP; four exposed All-Reduces.
  check_rank(r.ranks[1], 40, 4, 22);
  CHECK(r.tp_bubble_rate == Approx(8.0 / 132.0));
  CHECK(r.pp_bubble_rate == Approx(44.0 / 132.0));
  CHECK(r.ranks[0].activation_peak_ma == 2.0);
  CHECK(r.ranks[1].activation_peak_ma == 1.0);
  check_sum_identity(r);
}

// report_figures: make_report's step time, throughputs and memory, bit for bit, without the
// attribution (the same run as above: 66 s, peaks 2 and 1 M_a; every busy and idle time 0).
TEST_CASE("report_figures gives make_report's figures without the attribution", "[report]") {
  const Schedule s = one_f_one_b_p2_m2();
  const CostModel cost = uniform_cost_model(unit_costs(), 2);
  const Dag dag = lower(s, cost);
  const Timeline t = simulate(dag);
  const Report whole = make_report("hand", s, cost, dag, t);
  const Report r = report_figures("hand", s, cost, dag, t);
  CHECK(r.iteration_time_s == 66.0);
  CHECK(r.tokens_per_s == whole.tokens_per_s);
  CHECK(r.samples_per_s == whole.samples_per_s);
  CHECK(r.mfu == whole.mfu);
  CHECK(r.max_peak_memory_gib == whole.max_peak_memory_gib);
  CHECK(r.oom == whole.oom);
  REQUIRE(r.ranks.size() == 2);
  for (int k = 0; k < 2; ++k) {
    INFO("rank " << k);
    CHECK(r.ranks[k].rank == k);
    CHECK(r.ranks[k].static_bytes == whole.ranks[k].static_bytes);
    CHECK(r.ranks[k].peak_memory_bytes == whole.ranks[k].peak_memory_bytes);
    CHECK(r.ranks[k].busy_s == 0);
    CHECK(r.ranks[k].pp_idle_s == 0);
  }
  CHECK(r.ranks[0].activation_peak_ma == 2.0);
  CHECK(r.ranks[1].activation_peak_ma == 1.0);
  CHECK(r.pp_bubble_rate == 0);
  CHECK(r.critical_path.ops == 0);
  CHECK(whole.critical_path.ops > 0);
}

TEST_CASE("1F1B-I, 2 ranks, 2 microbatches: TP bubble 2m T_AR, peak (3p-2) M_a", "[report]") {
  const Report r = run(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4));
  CHECK(r.iteration_time_s == 110.0);
  // 2m T_AR = 2 * 2 * 2 = 8 on every rank: the four forwards each expose both All-Reduces, the
  // full backwards hide theirs under W.
  check_rank(r.ranks[0], 80, 8, 22);
  check_rank(r.ranks[1], 80, 8, 22);
  CHECK(r.ranks[0].activation_peak_ma == 4.0);  // 3p - 2
  CHECK(r.ranks[1].activation_peak_ma == 3.0);
  check_sum_identity(r);
}

TEST_CASE("an FB block hides a collective shorter than the partner's compute", "[report][fb]") {
  // One rank: F0.0, FB(F0.1, B0.0 split), B0.1 split, W0.0, W0.1. Only the forward All-Reduce
  // after Attn is kept, of length a. The plain F0.0 exposes all of it; inside the block it runs
  // under B.MLP + B.PreMLP = 4.
  auto schedule =
      make("fb", 1, 1, 2, Placement::Loop,
           {{F(0, 0), FB({0, 1, false}, {0, 0, true}), B(0, 1, true), W(0, 0), W(0, 1)}});
  CostModel cost = uniform_cost_model(unit_costs(), 1);
  SECTION("a = 3 < 4: the block exposes nothing") {
    keep_only_collective(cost, 1, Phase::F, 3.0);
    const Report r = run(schedule, cost);
    CHECK(r.iteration_time_s == 43.0);
    check_rank(r.ranks[0], 40, 3, 0);  // only F0.0's own
  }
  SECTION("a = 6 > 4: the block exposes exactly the difference, 2") {
    keep_only_collective(cost, 1, Phase::F, 6.0);
    const Report r = run(schedule, cost);
    CHECK(r.iteration_time_s == 48.0);
    check_rank(r.ranks[0], 40, 6 + 2, 0);
  }
  SECTION("with a full backward the W units hide it too: a = 10 exposes 10 - 8") {
    schedule.ranks[0].instructions = {F(0, 0), FB({0, 1, false}, {0, 0, false}), B(0, 1)};
    keep_only_collective(cost, 1, Phase::F, 10.0);
    const Report r = run(schedule, cost);
    CHECK(r.iteration_time_s == 52.0);
    check_rank(r.ranks[0], 40, 10 + 2, 0);
  }
}

TEST_CASE("reload waits are offload stalls", "[report]") {
  CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 1);
  cost.uniform = false;
  cost.d2h_Bps = 1;
  cost.h2d_Bps = 1;
  const Report r =
      run(make("off", 1, 1, 1, Placement::Loop, {{F(0, 0), Offload(0, 0), Reload(0, 0), B(0, 0)}}),
          cost);
  // F [0,4]; the B waits [4,12] for OFFLOAD [4,8] then RELOAD [8,12].
  check_rank(r.ranks[0], 20, 0, 0, 8);
  CHECK(r.offload_stall_rate == Approx(8.0 / 28.0));
  check_sum_identity(r);
}

TEST_CASE("a blocking send is pipeline idle time, and a collective feeding it is TP time",
          "[report]") {
  CostModel cost = uniform_cost_model(unit_costs(), 2);
  cost.uniform = false;
  cost.intra_p2p_Bps = 1;
  cost.node_of_rank = {0, 0};
  for (ChunkCost& c : cost.chunks) c.output_bytes = 3;
  const Report blocking = run(one_f_one_b_p2_m2(), cost);
  const Report async = run(one_f_one_b_p2_m2(), cost, {}, LowerOptions{P2pMode::Async});
  // Rank 0: F0.0's MLP All-Reduce [5,6] then its send [6,9]; F0.1 waits for both when
  // blocking: 1 TP + 3 PP. Async: only the All-Reduce (synchronous) holds F0.1.
  CHECK(blocking.ranks[0].tp_exposed_s == 4.0);
  CHECK(async.ranks[0].tp_exposed_s == 4.0);
  CHECK(blocking.iteration_time_s > async.iteration_time_s);
  check_sum_identity(blocking);
  check_sum_identity(async);
}

TEST_CASE("the sum identity holds under contention", "[report]") {
  CostModel cost = uniform_cost_model(unit_costs(), 4);
  cost.uniform = false;
  cost.contention = Contention{1.25, 1.6};
  const Report r = run(interleaved_p2_m2(), cost);
  check_sum_identity(r);
  const Report free = run(interleaved_p2_m2(), cost, SimOptions{false, false});
  CHECK(free.iteration_time_s == 110.0);
  CHECK(r.iteration_time_s > free.iteration_time_s);
}

TEST_CASE("OOM is flagged with the rank and the amount over", "[report]") {
  CostModel cost = uniform_cost_model(unit_costs(), 2);
  cost.hbm_bytes = 10;
  cost.fixed_overhead_bytes = 1;
  cost.chunks[0].static_bytes = 2;
  cost.chunks[1].static_bytes = 1;
  const Report r = run(one_f_one_b_p2_m2(), cost);
  // rank 0: 1 + 2 + 8 = 11 > 10; rank 1: 1 + 1 + 4 = 6.
  CHECK(r.ranks[0].peak_memory_bytes == 11.0);
  CHECK(r.ranks[0].oom);
  CHECK(r.ranks[0].over_bytes == 1.0);
  CHECK_FALSE(r.ranks[1].oom);
  CHECK(r.oom);
  CHECK(r.oom_rank == 0);
}

TEST_CASE("the critical path covers the iteration", "[report]") {
  const Report r = run(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  const CriticalPathSummary& cp = r.critical_path;
  CHECK(cp.compute_s + cp.collective_s + cp.p2p_s + cp.copy_s == 66.0);
  CHECK(cp.wait_s == 0.0);
  CHECK(cp.rank_sequence.front() == 0);
  CHECK(cp.rank_sequence.back() == 0);
  CHECK(cp.rank_s[1] > 0);
}

TEST_CASE("the critical path walks back the last-ending predecessors, ties to the lowest index",
          "[report]") {
  // Rank 0 F [0,6] (with its two All-Reduces) > rank 1 F, B, F, B [6,50] > rank 0 B, B [50,66].
  const Report plain = run(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  CHECK(plain.critical_path.text == "r0 6 > r1 44 > r0 16");
  CHECK(plain.critical_path.ops == 44);
  // W and All-Reduces of zero time end together with the units they follow: many ties, settled
  // by the lowest op index (docs/simulator.md). Regenerate with
  //   braid simulate --unit-costs 1,2,0,0 --schedule 1f1b-i --pp 4 --microbatches 8 --json
  ScheduleOptions o;
  o.pp = 4;
  o.vpp = 2;
  o.microbatches = 8;
  const Schedule s = make_schedule("1f1b-i", o);
  const Report tied = run(s, uniform_cost_model(UniformCosts{1, 2, 0, 0, 1}, 8));
  CHECK(tied.critical_path.text == "r0 5 > r1 1 > r2 1 > r3 36 > r2 2 > r1 2 > r0 10");
  CHECK(tied.critical_path.ops == 195);
  CHECK(tied.critical_path.wait_s == 0.0);
  CHECK(tied.critical_path.compute_s == tied.iteration_time_s);
}

TEST_CASE("the critical path is as long as the longest path through the graph", "[report]") {
  // Each op of the walk starts when its critical predecessor ends, so the path's ops fill the
  // iteration without a gap; no chain of dependencies and stream order can be longer. Boost's
  // longest path over the simulated durations (a second, independent method) gives the length,
  // with contention (the default study) and without.
  const StudyFixture& f = short_default_study();
  for (const std::string& name : schedule_names()) {
    INFO(name);
    ScheduleOptions o;
    o.pp = 4;
    o.vpp = 2;
    o.microbatches = 8;
    const Schedule s = make_schedule(name, o);
    const CostModel cost = build_cost_model(f.study, f.profile, s.virtual_stages());
    const Dag dag = lower(s, cost);
    const Timeline t = simulate(dag);
    const Report r = make_report("hand", s, cost, dag, t);
    std::vector<double> duration(dag.size());
    for (int i = 0; i < dag.size(); ++i) duration[i] = t.end_s[i] - t.start_s[i];
    double longest = 0;
    for (const int i : longest_path(dag, duration)) longest += duration[i];
    const CriticalPathSummary& cp = r.critical_path;
    CHECK(cp.wait_s == Approx(0).margin(1e-12 * r.iteration_time_s));
    CHECK(cp.compute_s + cp.collective_s + cp.p2p_s + cp.copy_s == Approx(longest).epsilon(1e-12));
    CHECK(longest == Approx(r.iteration_time_s).epsilon(1e-12));
  }
}

TEST_CASE("reports render as JSON with units in the names, CSV and tables", "[report]") {
  const Report r = run(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4));
  const nlohmann::json j = nlohmann::json::parse(report_json(r));
  CHECK(j["iteration_time_s"] == 110.0);
  CHECK(j["ranks"].size() == 2);
  CHECK(j["ranks"][0]["tp_exposed_s"] == 8.0);
  CHECK(j["ranks"][0]["activation_peak_ma"] == 4.0);
  CHECK(j.contains("max_peak_memory_gib"));
  CHECK(j["critical_path"].contains("compute_s"));
  CHECK(report_json(r) == report_json(r));  // deterministic
  const std::string csv = reports_csv({r, r});
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(csv.rfind("study,schedule,pp,", 0) == 0);
  const std::string rcsv = ranks_csv(r);
  CHECK(std::count(rcsv.begin(), rcsv.end(), '\n') == 3);
  const std::string table = simulate_table(r);
  CHECK(table.find("iteration time   110") != std::string::npos);
  Report slow = run(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  slow.schedule = "1f1b";
  const std::string cmp = compare_table({r, slow});
  CHECK(cmp.find("<- best") != std::string::npos);
  CHECK(cmp.find("speed-up vs 1f1b-i") != std::string::npos);
  const nlohmann::json all = nlohmann::json::parse(reports_json({r, slow}));
  CHECK(all["reports"].size() == 2);
}

// ---- with the generators (src/schedule) --------------------------------------------------------

namespace {

Report run_generated(const std::string& name, int p, int m, const UniformCosts& costs) {
  const Schedule s = generated(name, p, m);  // 2 chunks per rank where the schedule chooses
  return run(s, uniform_cost_model(costs, s.virtual_stages()));
}

}  // namespace

TEST_CASE("the generators' 1f1b and 1f1b-i for p = 2, m = 2 are the hand-built ones", "[report]") {
  ScheduleOptions o;
  o.pp = 2;
  o.vpp = 2;
  o.microbatches = 2;
  const Schedule a = make_schedule("1f1b", o), b = make_schedule("1f1b-i", o);
  for (int r = 0; r < 2; ++r) {
    CHECK(a.ranks[r].instructions == one_f_one_b_p2_m2().ranks[r].instructions);
    CHECK(b.ranks[r].instructions == interleaved_p2_m2().ranks[r].instructions);
  }
}

TEST_CASE("ZB-V, 2 ranks, 2 microbatches: exact breakdown and peak memory", "[report]") {
  // rank 0: F0.0 F0.1 F1.0 B1.0* W F1.1 B1.1* W B0.0* W B0.1* W
  // rank 1: F0.0 F1.0 F0.1 F1.1 B1.0* W B0.0* W B1.1* W B0.1* W
  // A plain F holds the rank 6 (4 compute + 2 synchronous All-Reduces), a split B 10 (8 + 2),
  // a W 8. Rank 0: F0.0 [0,6) F0.1 [6,12) F1.0 [18,24) (after rank 1's F1.0 at [12,18))
  // B1.0 [24,34) W [34,42) F1.1 [42,48) B1.1 [48,58) W [58,66) B0.0 [66,76) W [76,84)
  // B0.1 [98,108) (rank 1's B0.1 sends at 98) W [108,116).
  const Report r = run_generated("zb-v", 2, 2, unit_costs());
  CHECK(r.iteration_time_s == 116.0);
  check_rank(r.ranks[0], 80, 16, 20);  // TP: 4m T_AR = 16
  check_rank(r.ranks[1], 80, 16, 20);
  CHECK(r.ranks[0].activation_peak_ma == 3.0);
  CHECK(r.ranks[1].activation_peak_ma == 4.0);  // 2p M_a
}

TEST_CASE("STP, 2 ranks, 4 microbatches (its minimum, m >= 2p)", "[report]") {
  const Report r = run_generated("stp", 2, 4, unit_costs());
  // Busy is exact: 2 chunks x 4 microbatches x (4 + 8 + 8). At m = 2p the generator prunes and
  // re-braids the m >= 3p-1 order, so the TP bubble is 6 T_AR on rank 0 (5.5 on rank 1) rather
  // than the 2p + 1 = 5 of the full order (next test). The iteration time is the simulator's
  // value (regression; consistent with the breakdown; 200 since sends leave at the end of their
  // instruction, was 195 when they left as soon as their data was ready).
  CHECK(r.ranks[0].busy_s == 160.0);
  CHECK(r.ranks[1].busy_s == 160.0);
  CHECK(r.ranks[0].tp_exposed_s == 12.0);
  CHECK(r.ranks[1].tp_exposed_s == 11.0);
  CHECK(r.iteration_time_s == 200.0);
  check_sum_identity(r);
}

// DESIGN §6, Table 1: with every B and W unit longer than the collective it must hide, 1F1B-I
// exposes exactly 2m T_AR and ZB-V 4m T_AR on every rank, and STP (2p+1) T_AR on rank 0 whatever
// m is. (STP's last rank exposes more: at the V's turn B0 of a microbatch consumes the gradient
// its own FB block's trailing All-Reduce just produced — 10 T_AR at p = 4, 20 at p = 8.)
TEST_CASE("Table 1: TP bubble of 1f1b-i is 2m T_AR, of zb-v 4m T_AR, of stp (2p+1) T_AR",
          "[report][table1]") {
  const std::vector<UniformCosts> settings = {{4, 8, 8, 2, 1}, {2, 4, 6, 1, 1}};
  for (const UniformCosts& c : settings)
    for (int p : {2, 4, 8})
      for (int k : {4, 8, 16}) {
        const int m = k * p;
        INFO("p " << p << " m " << m << " tar " << c.tar);
        const Report i = run_generated("1f1b-i", p, m, c);
        const Report z = run_generated("zb-v", p, m, c);
        const Report s = run_generated("stp", p, m, c);
        for (int r = 0; r < p; ++r) {
          CHECK(i.ranks[r].tp_exposed_s == Approx(2.0 * m * c.tar).epsilon(1e-9));
          CHECK(z.ranks[r].tp_exposed_s == Approx(4.0 * m * c.tar).epsilon(1e-9));
        }
        CHECK(s.ranks[0].tp_exposed_s == Approx((2.0 * p + 1) * c.tar).epsilon(1e-9));
        check_sum_identity(i);
        check_sum_identity(z);
        check_sum_identity(s);
      }
}

TEST_CASE("every generated schedule keeps the sum identity on every rank", "[report]") {
  for (const std::string& name : schedule_names())
    for (const UniformCosts& c : {UniformCosts{4, 8, 8, 2, 1}, UniformCosts{1, 1, 1, 3, 1}}) {
      INFO(name << " tar " << c.tar);
      check_sum_identity(run_generated(name, 4, 16, c));
    }
}

// The report sums the collectives' time along the tp streams (no pass over every op record):
// that equals the definition, every Collective op's time added in op order, only while the
// Collective ops are exactly the tp streams' ops, listed in op order rank after rank.
TEST_CASE("tp_comm_rate adds every collective's time in op order, for built and uniform models",
          "[report]") {
  const StudyFixture& f = short_default_study();
  for (const std::string& name : schedule_names())
    for (const bool uniform : {true, false}) {
      INFO(name << (uniform ? " uniform" : " default study"));
      ScheduleOptions o;
      o.pp = 4;
      o.vpp = 2;
      o.microbatches = 16;
      const Schedule s = make_schedule(name, o);
      const CostModel cost = uniform ? uniform_cost_model({4, 8, 8, 2, 1}, s.virtual_stages())
                                     : build_cost_model(f.study, f.profile, s.virtual_stages());
      const Dag dag = lower(s, cost);
      const Timeline t = simulate(dag);
      int collectives = 0, on_tp = 0, prev = -1;
      bool ascending = true;
      double total = 0;
      for (int i = 0; i < dag.size(); ++i)
        if (dag.ops[i].kind == OpKind::Collective) {
          ++collectives;
          CHECK(dag.ops[i].stream == StreamKind::Tp);
          total += t.end_s[i] - t.start_s[i];
        }
      for (int r = 0; r < dag.pp; ++r) {
        const int sid = dag.stream_id(r, StreamKind::Tp);
        for (int k = dag.stream_begin[sid]; k < dag.stream_begin[sid + 1]; ++k) {
          ++on_tp;
          ascending = ascending && dag.stream_ops[k] > prev;
          prev = dag.stream_ops[k];
        }
      }
      CHECK(collectives > 0);
      CHECK(on_tp == collectives);
      CHECK(ascending);
      const Report rep = make_report("s", s, cost, dag, t);
      CHECK(rep.tp_comm_rate == total / (s.pp * t.iteration_time_s));
      // Listed out of op order, the same sum from a pass over every op.
      Dag swapped = dag;
      const int first = swapped.stream_begin[swapped.stream_id(0, StreamKind::Tp)];
      REQUIRE(swapped.stream_begin[swapped.stream_id(0, StreamKind::Tp) + 1] - first >= 2);
      std::swap(swapped.stream_ops[first], swapped.stream_ops[first + 1]);
      CHECK(make_report("s", s, cost, swapped, t).tp_comm_rate == rep.tp_comm_rate);
    }
}

namespace {

// Rank 0's attribution of its idle time on a Dag and timeline built by hand.
RankReport rank0_idle(const Dag& dag, const Timeline& t) {
  std::vector<RankReport> ranks;
  attribute_idle(dag, t, ranks);
  return ranks[0];
}

// One rank: compute op 0 in [0, 1), collectives 1 and 2 (and 3, which starts after the gap, when
// `third`), compute op X = the last, in [4.1, 5), waiting for all of them. The timeline is set by
// hand (the two collectives may overlap, which one tp stream never does).
RankReport gap_with_collectives(double b1, double e1, double b2, double e2, bool third) {
  Dag dag;
  const int n = third ? 5 : 4, x = n - 1;
  dag.ops.resize(n);  // each of cost 0 (the report reads times from the timeline)
  dag.costs = {OpCost{}};
  for (int i = 1; i < x; ++i) {
    dag.ops[i].kind = OpKind::Collective;
    dag.ops[i].stream = StreamKind::Tp;
  }
  dag.pred_begin.assign(n + 1, 0);
  for (int i = 1; i < x; ++i) dag.preds.push_back(i);
  dag.pred_begin[n] = x - 1;
  dag.stream_begin.assign(kStreamsPerRank + 1, n);
  dag.stream_begin[0] = 0;
  dag.stream_begin[1] = 2;  // compute: 0, x; tp: the collectives
  dag.stream_ops = {0, x};
  dag.stream_prev.assign(n, -1);
  dag.stream_prev[x] = 0;
  for (int i = 1; i < x; ++i) {
    dag.stream_ops.push_back(i);
    if (i > 1) dag.stream_prev[i] = i - 1;
  }
  Timeline t;
  t.start_s = {0, b1, b2};
  t.end_s = {1, e1, e2};
  if (third) {
    t.start_s.push_back(4.3);
    t.end_s.push_back(4.4);
  }
  t.start_s.push_back(4.1);
  t.end_s.push_back(5);
  t.iteration_time_s = 5;
  return rank0_idle(dag, t);
}

}  // namespace

TEST_CASE("two collectives in one gap: the first started holds its own, the other what follows",
          "[report]") {
  struct Case {
    double b1, e1, b2, e2;
    std::vector<ExposedPiece> pieces;
    double tp_s;
  };
  const std::vector<Case> cases = {
      // Both from the gap's start: the lower op holds the overlap; one length, 4.1 - 1.
      {0.5, 3.3, 0.7, 4.1, {{1, StreamKind::Tp, 1, 3.3}, {2, StreamKind::Tp, 3.3, 4.1}}, 4.1 - 1},
      // The second starts inside the first.
      {0.5, 3.3, 1.7, 4.1, {{1, StreamKind::Tp, 1, 3.3}, {2, StreamKind::Tp, 3.3, 4.1}}, 4.1 - 1},
      // The later inside the earlier: the earlier holds it all.
      {1.3, 4.1, 1.7, 2.9, {{1, StreamKind::Tp, 1.3, 4.1}}, 4.1 - 1.3},
      // The higher op started first.
      {1.7, 4.1, 0.2, 3.3, {{2, StreamKind::Tp, 1, 3.3}, {1, StreamKind::Tp, 3.3, 4.1}}, 4.1 - 1},
      // Apart: two lengths, in start order.
      {2.9,
       4.1,
       0.3,
       2.2,
       {{2, StreamKind::Tp, 1, 2.2}, {1, StreamKind::Tp, 2.9, 4.1}},
       (2.2 - 1) + (4.1 - 2.9)},
      // Touching: one length.
      {0.3, 2.2, 2.2, 4.1, {{1, StreamKind::Tp, 1, 2.2}, {2, StreamKind::Tp, 2.2, 4.1}}, 4.1 - 1},
      // One ended by the gap's start: the other alone.
      {0.3, 0.9, 1.7, 4.1, {{2, StreamKind::Tp, 1.7, 4.1}}, 4.1 - 1.7},
      // One starting after the gap (an empty part of it): the other alone.
      {4.2, 4.5, 1.7, 4.1, {{2, StreamKind::Tp, 1.7, 4.1}}, 4.1 - 1.7},
      {1.7, 4.1, 4.2, 4.5, {{1, StreamKind::Tp, 1.7, 4.1}}, 4.1 - 1.7},
  };
  for (const Case& c : cases) {
    INFO(c.b1 << " " << c.e1 << " " << c.b2 << " " << c.e2);
    const RankReport two = gap_with_collectives(c.b1, c.e1, c.b2, c.e2, false);
    CHECK(two.exposed_pieces == c.pieces);
    CHECK(two.tp_exposed_s == c.tp_s);
    CHECK(two.busy_s == 1.0 + (5 - 4.1));
    // A third collective, starting after the gap, adds nothing but takes the general path.
    const RankReport three = gap_with_collectives(c.b1, c.e1, c.b2, c.e2, true);
    CHECK(three.exposed_pieces == two.exposed_pieces);
    CHECK(three.tp_exposed_s == two.tp_exposed_s);
    CHECK(three.pp_idle_s == two.pp_idle_s);
  }
}

namespace {

// One rank: compute op 0 in [0, 1), a collective in [1.5, 3), k sends (the P2P stream) in
// [0.5, 2), compute op X = k + 2 in [4, 5). In a chain the collective is op 1, X waits for the
// last send, each send follows the one before on its stream and the first waits for the
// collective: the gap's walk meets every send before the collective. In a fan the collective is
// op k + 1 and X waits for it and every send: the walk holds them all on its stack at once, the
// collective pushed last.
RankReport gap_behind_sends(int k, bool chain) {
  Dag dag;
  const int n = k + 3, x = n - 1, coll = chain ? 1 : x - 1;
  dag.ops.resize(n);  // each of cost 0 (the report reads times from the timeline)
  dag.costs = {OpCost{}};
  for (int i = 1; i < x; ++i) {
    dag.ops[i].kind = i == coll ? OpKind::Collective : OpKind::P2P;
    dag.ops[i].stream = i == coll ? StreamKind::Tp : StreamKind::P2pNext;
  }
  dag.pred_begin.assign(n + 1, 0);
  dag.stream_prev.assign(n, -1);
  dag.stream_prev[x] = 0;
  dag.stream_ops = {0, x, coll};
  for (int i = 1; i < x; ++i) {
    if (i == coll) continue;
    if (dag.stream_ops.size() > 3) dag.stream_prev[i] = dag.stream_ops.back();
    dag.stream_ops.push_back(i);
  }
  if (chain) {
    dag.preds = {1, x - 1};  // send 2 waits for the collective, X for the last send
    for (int i = 3; i <= x; ++i) dag.pred_begin[i] = 1;
    dag.pred_begin[n] = 2;
  } else {
    for (int i = 1; i < x; ++i) dag.preds.push_back(i);
    dag.pred_begin[n] = x - 1;
  }
  dag.stream_begin.assign(kStreamsPerRank + 1, n);
  dag.stream_begin[0] = 0;
  dag.stream_begin[1] = 2;  // compute: 0, X
  dag.stream_begin[2] = 3;  // tp: the collective; p2p next: the sends
  Timeline t;
  for (int i = 0; i < n; ++i) {
    t.start_s.push_back(i == 0 ? 0 : i == x ? 4 : i == coll ? 1.5 : 0.5);
    t.end_s.push_back(i == 0 ? 1 : i == x ? 5 : i == coll ? 3 : 2);
  }
  t.iteration_time_s = 5;
  return rank0_idle(dag, t);
}

}  // namespace

// A gap whose walk meets a few ops is attributed on arrays of the stack; one that meets more (or
// holds more on its stack) than those arrays hold starts again on the general walk, which must
// find the same: the collective met after all the sends.
TEST_CASE("a gap whose walk meets many sends attributes as one that meets few", "[report]") {
  for (const bool chain : {true, false})
    for (const int k : {1, 3, 12, 40}) {
      INFO((chain ? "chain of " : "fan of ") << k << " sends");
      const RankReport r = gap_behind_sends(k, chain);
      const std::vector<ExposedPiece> pieces = {{chain ? 1 : k + 1, StreamKind::Tp, 1.5, 3}};
      CHECK(r.busy_s == 2);
      CHECK(r.tp_exposed_s == 1.5);
      CHECK(r.pp_idle_s == 1.5);
      CHECK(r.exposed_pieces == pieces);
    }
}

namespace {

// Rank 0 of two: compute ops 0 [0, 1), 1 [5, 6) and 2 [10, 11); before ops 1 and 2 a chain of
// `chain` collectives each (tp stream order, 1/16 long from the gap's start: 2.5 for 40), and a
// DP sync op on [1, 10) that both wait for.
RankReport long_gaps(int chain) {
  Dag dag;
  dag.pp = 2;
  const int dp = 3, first = 4, n = first + 2 * chain;
  dag.ops.resize(n);  // each of cost 0 (the report reads times from the timeline)
  dag.costs = {OpCost{}};
  Timeline t;
  t.start_s = {0, 5, 10, 1};
  t.end_s = {1, 6, 11, 10};
  dag.ops[dp].kind = OpKind::DpSync;
  dag.ops[dp].stream = StreamKind::Dp;
  std::vector<int> tp_ops;
  for (int g = 0; g < 2; ++g)
    for (int k = 0; k < chain; ++k) {
      const int i = first + g * chain + k;
      dag.ops[i].kind = OpKind::Collective;
      dag.ops[i].stream = StreamKind::Tp;
      const double b = (g == 0 ? 1 : 6) + k / 16.0;
      t.start_s.push_back(b);
      t.end_s.push_back(b + 1 / 16.0);
      tp_ops.push_back(i);
    }
  // Op 1 waits for the last collective of the first chain and the DP op, op 2 for the second's.
  dag.pred_begin = {0, 0, 2};
  dag.preds = {dp, first + chain - 1, dp, n - 1};
  dag.pred_begin.push_back(4);
  dag.pred_begin.resize(n + 1, 4);
  dag.stream_begin.assign(2 * kStreamsPerRank + 1, n);
  dag.stream_begin[0] = 0;
  dag.stream_begin[1] = 3;
  dag.stream_begin[2] = 3 + 2 * chain;  // tp
  dag.stream_begin[3] = 3 + 2 * chain;
  for (int s = 3; s <= 6; ++s) dag.stream_begin[s] = 3 + 2 * chain;
  dag.stream_begin[7] = n;  // dp holds op 3, then rank 1 has none
  dag.stream_ops = {0, 1, 2};
  dag.stream_ops.insert(dag.stream_ops.end(), tp_ops.begin(), tp_ops.end());
  dag.stream_ops.push_back(dp);
  dag.stream_prev.assign(n, -1);
  dag.stream_prev[1] = 0;
  dag.stream_prev[2] = 1;
  for (std::size_t k = 1; k < tp_ops.size(); ++k) dag.stream_prev[tp_ops[k]] = tp_ops[k - 1];
  t.iteration_time_s = 11;
  return rank0_idle(dag, t);
}

}  // namespace

// A gap's walk keeps the ops it met in a short list, then, past a few dozen, in per-op marks:
// every op met once per gap in both, and an op met by an earlier gap (the DP op) met again.
TEST_CASE("gaps that meet many ops attribute as gaps that meet few", "[report]") {
  for (const int chain : {2, 40}) {
    INFO("collectives per gap: " << chain);
    const RankReport r = long_gaps(chain);
    const double tp = chain / 16.0;
    CHECK(r.busy_s == 3);
    CHECK(r.tp_exposed_s == 2 * tp);
    CHECK(r.dp_exposed_s == 2 * (4 - tp));
    CHECK(r.pp_idle_s == 0);
    CHECK(r.exposed_pieces.size() == static_cast<std::size_t>(2 * chain));
  }
}

namespace {

// The critical path of a timeline whose ops have no predecessors: the op that ends last alone,
// the lowest index among equal ends. Op i takes (i + 1) / 16, so the path's wait names it.
int critical_op(const std::vector<double>& ends) {
  const int n = static_cast<int>(ends.size());
  Dag dag;
  dag.pp = 2;
  dag.ops.resize(n);  // each of cost 0 (the report reads times from the timeline)
  dag.costs = {OpCost{}};
  dag.pred_begin.assign(n + 1, 0);
  dag.stream_begin.assign(2 * kStreamsPerRank + 1, n);
  dag.stream_begin[0] = 0;
  Timeline t;
  for (int i = 0; i < n; ++i) {
    dag.stream_ops.push_back(i);
    dag.stream_prev.push_back(-1);
    t.end_s.push_back(ends[i]);
    t.start_s.push_back(ends[i] - (i + 1) / 16.0);
  }
  t.iteration_time_s = *std::max_element(ends.begin(), ends.end());
  t.peak_activation_bytes = {0, 0};
  const Report rep =
      make_report("hand", one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2), dag, t);
  REQUIRE(rep.critical_path.ops == 1);
  const double d = t.iteration_time_s - rep.critical_path.wait_s;
  for (int i = 0; i < n; ++i)
    if (d == (i + 1) / 16.0) return i;
  return -1;
}

}  // namespace

TEST_CASE("the critical path starts from the lowest op among the latest ends", "[report]") {
  CHECK(critical_op({9, 1, 9}) == 0);
  CHECK(critical_op({1, 2, 9, 3, 4, 9, 5}) == 2);
  CHECK(critical_op({1, 9, 2, 3, 4, 9, 9, 9, 9}) == 1);
  CHECK(critical_op({1, 2, 3, 4, 5, 6, 7, 8, 9.5}) == 8);
  CHECK(critical_op({1, 2, 3, 4, 5, 6, 9, 7, 9}) == 6);
  CHECK(critical_op({1, 2, 3, 9, 5, 9, 9, 9}) == 3);
  CHECK(critical_op({4}) == 0);
}

namespace {

// One layer of four units whose forwards each end with a collective on another group (tp 1,
// cp 2, ep 3, dp 4), synchronous in a plain forward; every other phase takes 1, no collective.
CostModel four_groups_model() {
  CostModel cost;
  cost.uniform = true;
  LayerCost l;
  l.half = 2;
  const Group groups[] = {Group::Tp, Group::Cp, Group::Ep, Group::Dp};
  for (int k = 0; k < 4; ++k) {
    UnitCost u;
    u.kind = std::array{UnitKind::PreAttn, UnitKind::Attn, UnitKind::PreMLP, UnitKind::MLP}[k];
    u.layer = 0;
    for (Phase p : {Phase::F, Phase::B, Phase::W}) u[p].time_s = 1;
    Collective c;
    c.group = groups[k];
    c.time_s = k + 1;
    u[Phase::F].collectives.push_back(c);
    l.units.push_back(u);
  }
  ChunkCost chunk;
  chunk.add_layer(l);
  cost.chunks.push_back(chunk);
  return cost;
}

}  // namespace

TEST_CASE("every group's exposed time is attributed to its own field", "[report][groups]") {
  // F: PreAttn 0-1, its TP collective 1-2; Attn 2-3, CP 3-5; PreMLP 5-6, EP 6-9; MLP 9-10, DP
  // 10-14; then B and W of the four units, 14-22. Each gap waits on one group's collective.
  const Schedule s = make("1f1b", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}});
  const Report r = run(s, four_groups_model());
  REQUIRE(r.ranks.size() == 1);
  const RankReport& rr = r.ranks[0];
  CHECK(r.iteration_time_s == 22);
  check_rank(rr, 12, 1, 0);
  check_groups(rr, 2, 3, 4);
  CHECK(r.tp_bubble_rate == Approx(1.0 / 22));
  CHECK(r.cp_exposed_rate == Approx(2.0 / 22));
  CHECK(r.ep_exposed_rate == Approx(3.0 / 22));
  CHECK(r.dp_exposed_rate == Approx(4.0 / 22));
  // Each stream's comm rate is its collectives' time.
  CHECK(r.tp_comm_rate == Approx(1.0 / 22));
  CHECK(r.cp_comm_rate == Approx(2.0 / 22));
  CHECK(r.ep_comm_rate == Approx(3.0 / 22));
  CHECK(r.dp_comm_rate == Approx(4.0 / 22));
  // The pieces name their streams; the pictures' intervals per stream are exactly the gaps.
  CHECK(exposed_intervals(rr, StreamKind::Tp) == std::vector<TimeInterval>{{1, 2}});
  CHECK(exposed_intervals(rr, StreamKind::Cp) == std::vector<TimeInterval>{{3, 5}});
  CHECK(exposed_intervals(rr, StreamKind::Ep) == std::vector<TimeInterval>{{6, 9}});
  CHECK(exposed_intervals(rr, StreamKind::Dp) == std::vector<TimeInterval>{{10, 14}});
}

TEST_CASE("where two groups' collectives overlap, tp, then cp, then ep hold the time",
          "[report][groups]") {
  // The five-unit layer of hand_schedules.hpp: Dispatch's EP collective 4-6 and CP collective
  // 6-7 follow one another, so the gap 4-7 before Experts waits on both: CP holds 6-7 (its own),
  // EP the rest. 1F1B p 1 m 2: per microbatch TP 1, CP 1, EP 2 + 1 (Combine's B waits 10-11 on
  // EP).
  const CostModel cost = five_unit_model(1);
  const Schedule s = make("1f1b", 1, 1, 2, Placement::Loop, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}});
  const Report r = run(s, cost);
  const RankReport& rr = r.ranks.at(0);
  CHECK(r.iteration_time_s == 46);
  check_rank(rr, 36, 2, 0);
  check_groups(rr, 2, 6, 0);
  CHECK(exposed_intervals(rr, StreamKind::Cp) == std::vector<TimeInterval>{{6, 7}, {29, 30}});
  CHECK(exposed_intervals(rr, StreamKind::Ep) ==
        std::vector<TimeInterval>{{4, 6}, {10, 11}, {27, 29}, {33, 34}});
}

TEST_CASE("a collective inside its unit's compute runs in steps beside it", "[report][groups]") {
  // One unit: F 3 in three pieces with a CP collective of 4 inside it (two transfers of 2): piece
  // 0 0-1 and transfer 0 0-2 start together; piece 1 waits for transfer 0 (2-3), transfer 1
  // follows transfer 0 and piece 0 (2-4); piece 2 waits for it (4-5). B 5-6, W 6-7. The gaps
  // 1-2 and 3-4 are CP exposed.
  UnitCost u;
  u.kind = UnitKind::Attn;
  u.layer = 0;
  u[Phase::F].time_s = 3;
  u[Phase::F].alloc_bytes = 4;
  u[Phase::B].time_s = 1;
  u[Phase::B].free_bytes = 4;
  u[Phase::W].time_s = 1;
  Collective ring;
  ring.kind = CollectiveKind::P2P;
  ring.group = Group::Cp;
  ring.position = CollectivePosition::Inside;
  ring.steps = 3;
  ring.time_s = 4;
  ring.bytes = 6;
  u[Phase::F].collectives.push_back(ring);
  LayerCost l;
  l.units.push_back(u);
  l.half = 1;
  CostModel cost;
  cost.uniform = true;
  ChunkCost chunk;
  chunk.activation_bytes = 4;
  chunk.add_layer(l);
  cost.chunks.push_back(chunk);
  const Schedule s = make("1f1b", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}});
  const Dag dag = lower(s, cost);
  const Timeline t = simulate(dag);
  // The compute stream: three pieces, B, W; the CP stream: two transfers of half the bytes each.
  std::vector<std::pair<double, double>> compute, cp;
  const auto times = [&](StreamKind k, std::vector<std::pair<double, double>>& out) {
    const int id = dag.stream_id(0, k);
    for (int i = dag.stream_begin[id]; i < dag.stream_begin[id + 1]; ++i)
      out.emplace_back(t.start_s[dag.stream_ops[i]], t.end_s[dag.stream_ops[i]]);
  };
  times(StreamKind::Compute, compute);
  times(StreamKind::Cp, cp);
  CHECK(compute == std::vector<std::pair<double, double>>{{0, 1}, {2, 3}, {4, 5}, {5, 6}, {6, 7}});
  CHECK(cp == std::vector<std::pair<double, double>>{{0, 2}, {2, 4}});
  for (int i = dag.stream_begin[dag.stream_id(0, StreamKind::Cp)];
       i < dag.stream_begin[dag.stream_id(0, StreamKind::Cp) + 1]; ++i)
    CHECK(dag.cost(dag.stream_ops[i]).bytes == 3);
  // The activations are saved by the first piece and freed by B, as one op would.
  CHECK(t.peak_activation_bytes.at(0) == 4);
  const Report r = make_report("inside", s, cost, dag, t);
  check_pp_idle(r, dag, t);
  CHECK(r.ranks.at(0).cp_exposed_s == 2);
  CHECK(r.ranks.at(0).busy_s == 5);
  CHECK(r.cp_comm_rate == Approx(4.0 / 7));
}
