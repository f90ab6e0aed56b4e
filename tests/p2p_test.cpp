// Pipeline sends as Megatron runs them (P2pMode::Batched): a send starts once its receiver has
// posted the receive, at the end of the receiver's instruction before the consumer; the sender's
// next instruction waits for its batch (its sends and its own receives). Against the older
// blocking model, which the study option p2p_batched = false keeps.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;
namespace fs = std::filesystem;

namespace {

int find_op(const Dag& dag, const std::string& name, int rank) {
  for (int i = 0; i < dag.size(); ++i)
    if (dag.ops[i].rank == rank && op_name(dag, i) == name) return i;
  FAIL("no op " << name << " on rank " << rank);
  return -1;
}

// No collectives; a forward takes 4 (1 per unit), a full backward 16 (B 8 + W 8); every send
// takes 3 (3 bytes at 1 byte/s on one node).
CostModel send_cost(int chunks) {
  CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, chunks);
  cost.uniform = false;
  cost.intra_p2p_Bps = 1;
  cost.node_of_rank.assign(8, 0);
  for (ChunkCost& c : cost.chunks) c.output_bytes = 3;
  return cost;
}

// Rank 0 runs all three forwards before its backwards; rank 1 alternates (F0 B0 F1 B1 F2 B2).
// Under rendezvous rank 0's send of F1 must wait for rank 1 to finish B0, its instruction before
// F1. Run by Megatron's runtime (one batch per instruction).
Schedule forwards_first_p2_m3(P2pRuntime runtime = P2pRuntime::Megatron) {
  Schedule s = make("1f1b", 2, 1, 3, Placement::Loop,
                    {{F(0, 0), F(0, 1), F(0, 2), B(0, 0), B(0, 1), B(0, 2)},
                     {F(0, 0), B(0, 0), F(0, 1), B(0, 1), F(0, 2), B(0, 2)}});
  s.p2p_runtime = runtime;
  return s;
}

}  // namespace

TEST_CASE("a batched send starts when the receiver posts its receive", "[p2p]") {
  const CostModel cost = send_cost(2);
  const Dag dag = lower(forwards_first_p2_m3(), cost, LowerOptions{P2pMode::Batched});
  const Timeline t = simulate(dag);
  // Rank 0: F0 [0,4]; its send goes at once, rank 1 posts F0's receive at the start: [4,7].
  CHECK(t.start_s[find_op(dag, "send F0.0 r0->r1", 0)] == 4.0);
  // Rank 1: F0 [7,11], B0 [11,27]; it posts F1's receive at 27, so rank 0's send of F1 (ready at
  // 11) runs [27,30] and rank 0's F2 waits for it.
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L0", 0)] == 7.0);
  CHECK(t.start_s[find_op(dag, "send F0.1 r0->r1", 0)] == 27.0);
  CHECK(t.start_s[find_op(dag, "F0.2 PreAttn L0", 0)] == 30.0);
  // Rank 0 posts B0's receive after F2 (34): rank 1's send of B0 runs [34,37], and rank 1's F1
  // waits for that batch (send B0, receive F1): [37,41], then B1 [41,57].
  CHECK(t.start_s[find_op(dag, "send B0.0 r1->r0", 1)] == 34.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L1", 1)] == 37.0);
  // Rank 1 posts F2's receive after B1 (57): rank 0's send of F2 [57,60] holds its B0 to 60.
  CHECK(t.start_s[find_op(dag, "send F0.2 r0->r1", 0)] == 57.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0", 0)] == 60.0);
  // Rank 0 posts B1's receive after B0 (76): send B1 [76,79]; rank 1's F2 [79,83], B2 [83,99];
  // rank 0's B1 [79,95]; send B2 [99,102]; rank 0's B2 [102,118].
  CHECK(t.start_s[find_op(dag, "send B0.1 r1->r0", 1)] == 76.0);
  CHECK(t.start_s[find_op(dag, "F0.2 PreAttn L1", 1)] == 79.0);
  CHECK(t.start_s[find_op(dag, "send B0.2 r1->r0", 1)] == 99.0);
  CHECK(t.start_s[find_op(dag, "B0.2 MLP L0", 0)] == 102.0);
  CHECK(t.iteration_time_s == 118.0);
}

TEST_CASE("a schedule file runs under the runtime it records, whatever its name", "[p2p][file]") {
  // The same order, named 1f1b both times, written with each runtime and read back. Megatron's
  // rendezvous holds rank 0's send of F1 until rank 1 posts the receive (27, the test above);
  // receives posted ahead let it go as soon as F1 has run (11), and the iteration ends sooner.
  const CostModel cost = send_cost(2);
  std::vector<double> send_f1, end;
  for (P2pRuntime runtime : {P2pRuntime::Megatron, P2pRuntime::PostedAhead}) {
    const std::string text = to_json(forwards_first_p2_m3(runtime));
    CHECK(text.find(std::string("\"p2p_runtime\":\"") + name(runtime) + "\"") != std::string::npos);
    std::istringstream in(text);
    const Schedule s = read_schedule_json(in, "1f1b.json");
    REQUIRE(s.name == "1f1b");
    CHECK(s.p2p_runtime == runtime);
    const Dag dag = lower(s, cost, LowerOptions{P2pMode::Batched});
    const Timeline t = simulate(dag);
    send_f1.push_back(t.start_s[find_op(dag, "send F0.1 r0->r1", 0)]);
    end.push_back(t.iteration_time_s);
  }
  CHECK(send_f1 == std::vector<double>{27.0, 11.0});
  CHECK(end[0] == 118.0);
  CHECK(end[1] < end[0]);
  // A file without the field runs posted-ahead, as braid's own orders do; a name is no runtime.
  std::string old = to_json(forwards_first_p2_m3());
  old.erase(old.find(",\"p2p_runtime\""), std::string(",\"p2p_runtime\":\"megatron\"").size());
  std::istringstream in(old);
  CHECK(read_schedule_json(in, "old.json").p2p_runtime == P2pRuntime::PostedAhead);
  // Megatron's runtime has no V-shaped schedule: such a file is refused in one line.
  Schedule v = make_schedule("zb-v", ScheduleOptions{2, 2, 4});
  v.p2p_runtime = P2pRuntime::Megatron;
  std::istringstream vin(to_json(v));
  CHECK_THROWS_WITH(read_schedule_json(vin, "v.json"),
                    Catch::Contains("p2p_runtime megatron runs loop-placed schedules only"));
}

TEST_CASE("the blocking model sends as soon as the pass ends, as before", "[p2p]") {
  const CostModel cost = send_cost(2);
  const Dag dag = lower(forwards_first_p2_m3(), cost, LowerOptions{P2pMode::Blocking});
  const Timeline t = simulate(dag);
  // Rank 0: F0 [0,4] send [4,7] F1 [7,11] send [11,14] F2 [14,18] send [18,21].
  CHECK(t.start_s[find_op(dag, "send F0.1 r0->r1", 0)] == 11.0);
  CHECK(t.start_s[find_op(dag, "F0.2 PreAttn L0", 0)] == 14.0);
  // Rank 1: F0 [7,11] B0 [11,27] send [27,30] F1 [30,34] B1 [34,50] send [50,53] F2 [53,57]
  // B2 [57,73] send [73,76]; rank 0: B0 [30,46] B1 [53,69] B2 [76,92].
  CHECK(t.start_s[find_op(dag, "send B0.0 r1->r0", 1)] == 27.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L1", 1)] == 30.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0", 0)] == 30.0);
  CHECK(t.start_s[find_op(dag, "B0.2 MLP L0", 0)] == 76.0);
  CHECK(t.iteration_time_s == 92.0);
}

TEST_CASE("the next instruction waits for its receive as well as for its own sends", "[p2p]") {
  // Megatron's 1F1B, p = 2, m = 2. Rank 1 posts F1's receive after B0 (27): rank 0's send of F1
  // runs [27,30], not at 11; rank 0's B0 waits for that batch, which holds B0's gradient
  // (sent [27,30]) too. Rank 1's F1 waits for its batch: the send of B0 and the receive of F1.
  const CostModel cost = send_cost(2);
  const Dag dag = lower(one_f_one_b_p2_m2(), cost, LowerOptions{P2pMode::Batched});
  const Timeline t = simulate(dag);
  CHECK(t.start_s[find_op(dag, "send F0.1 r0->r1", 0)] == 27.0);
  CHECK(t.start_s[find_op(dag, "send B0.0 r1->r0", 1)] == 27.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0", 0)] == 30.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L1", 1)] == 30.0);
  // Rank 1: F1 [30,34] B1 [34,50] send [50,53]; rank 0: B0 [30,46] B1 [53,69].
  CHECK(t.iteration_time_s == 69.0);
  // The same order under the blocking model ends at the same time: in 1F1B the receiver posts
  // before the sender would wait anyway.
  CHECK(simulate(lower(one_f_one_b_p2_m2(), cost, LowerOptions{P2pMode::Blocking}))
            .iteration_time_s == 69.0);
}

TEST_CASE("megatron's 1f1b warm-up posts the next receive once its send has completed", "[p2p]") {
  // 1F1B, p = 3, m = 3. Rank 1 warms up with F0 then F1: Megatron calls send_forward(F0), then
  // recv_forward(F1), so rank 0's send of F1 (ready at 11) waits for rank 1's send of F0 to end
  // (14), not only for rank 1's F0 (11). Across phases (F then B, B then F) the receive goes in the
  // batch with the sends.
  const Schedule s = generated("1f1b", 3, 3);
  const CostModel cost = send_cost(3);
  const Dag dag = lower(s, cost, LowerOptions{P2pMode::Batched});
  const Timeline t = simulate(dag);
  CHECK(t.start_s[find_op(dag, "send F0.0 r1->r2", 1)] == 11.0);
  CHECK(t.start_s[find_op(dag, "send F0.1 r0->r1", 0)] == 14.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L1", 1)] == 17.0);
  // Rank 1's cool-down B1 then B2: it posts B2's receive after its send of B1 [79,82]; rank 2's
  // send of B2 is ready at 83 anyway. The gradients reach rank 0 at 82 and 105: iteration 121.
  CHECK(t.start_s[find_op(dag, "send B0.1 r1->r0", 1)] == 79.0);
  CHECK(t.start_s[find_op(dag, "send B0.2 r2->r1", 2)] == 83.0);
  CHECK(t.iteration_time_s == 121.0);
}

TEST_CASE("a receive that would deadlock under rendezvous is posted early", "[p2p]") {
  // Rank 1 runs F1 before F0. Its receive of F0 would be posted after F1, whose input rank 0
  // sends only after its F0 send completes: a deadlock. The plan posts F0's receive at rank 1's
  // start instead, and the order runs as under the blocking model:
  // rank 0: F0 [0,4] send [4,7] F1 [7,11] send [11,14]; rank 1: F1 [14,18] F0 [18,22] B0 [22,38]
  // send [38,41] B1 [41,57] send [57,60]; rank 0: B0 [41,57] B1 [60,76].
  const Schedule s =
      make("1f1b", 2, 1, 2, Placement::Loop,
           {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(0, 1), F(0, 0), B(0, 0), B(0, 1)}});
  const CostModel cost = send_cost(2);
  const Dag dag = lower(s, cost, LowerOptions{P2pMode::Batched});
  REQUIRE(find_cycle(dag).empty());
  const Timeline t = simulate(dag);
  CHECK(t.start_s[find_op(dag, "send F0.0 r0->r1", 0)] == 4.0);
  CHECK(t.start_s[find_op(dag, "F0.0 PreAttn L1", 1)] == 18.0);
  CHECK(t.start_s[find_op(dag, "send B0.1 r1->r0", 1)] == 57.0);
  CHECK(t.iteration_time_s == 76.0);
  CHECK(simulate(lower(s, cost, LowerOptions{P2pMode::Blocking})).iteration_time_s == 76.0);
}

TEST_CASE("the study option picks the mode for real costs, theory mode stays async", "[p2p]") {
  CostModel cost = send_cost(2);
  const Schedule s = forwards_first_p2_m3();
  CHECK(simulate(lower(s, cost)).iteration_time_s == 118.0);  // p2p_batched is the default
  cost.p2p_batched = false;
  CHECK(simulate(lower(s, cost)).iteration_time_s == 92.0);
  const CostModel theory = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 2);
  CHECK(simulate(lower(s, theory)).iteration_time_s ==
        simulate(lower(s, theory, LowerOptions{P2pMode::Async})).iteration_time_s);

  Study study = short_default_study().study;
  CHECK(study.training.p2p_batched);
  CHECK(build_cost_model(study, short_default_study().profile, 2).p2p_batched);
  study.training.p2p_batched = false;
  CHECK_FALSE(build_cost_model(study, short_default_study().profile, 2).p2p_batched);
}

TEST_CASE("every generated schedule lowers without a cycle under batched sends", "[p2p]") {
  int lowered = 0;
  for (const std::string& name : schedule_names())
    for (int p : {2, 3, 4, 8})
      for (int vpp : {1, 2, 3, 4}) {
        if (fixed_vpp(name) != 0 && vpp > 1) continue;  // one run for fixed-chunk schedules
        for (int m_per_p : {1, 2, 3, 4})
          for (double offload : {0.0, 0.5}) {
            ScheduleOptions o;
            o.pp = p;
            o.vpp = chunks_per_rank(name, vpp);
            o.microbatches = m_per_p * p;
            if (!traits(parse_schedule_kind(name)).own_offload) o.offload = offload;
            if (o.microbatches < min_microbatches(name, o)) continue;
            if (name == "combined-1f1b" && o.vpp == 1) continue;  // refused at p > 1
            INFO(name << " p " << p << " vpp " << o.vpp << " m " << o.microbatches << " offload "
                      << o.offload);
            const Schedule s = make_schedule(name, o);
            CostModel cost = send_cost(s.virtual_stages());
            cost.node_of_rank.assign(p, 0);
            for (bool overlap : {true, false}) {
              INFO("overlap_p2p_comm " << overlap);
              cost.overlap_p2p_comm = overlap;
              const Dag dag = lower(s, cost, LowerOptions{P2pMode::Batched});
              REQUIRE_NOTHROW(check_acyclic(dag));
              const Timeline t = simulate(dag);
              check_sum_identity(make_report("batched", s, cost, dag, t));
              ++lowered;
            }
          }
      }
  CHECK(lowered > 100);
}

TEST_CASE("megatron's interleaved steady state sends a forward's output after the next backward",
          "[p2p]") {
  const Schedule s = generated("1f1b-i", 4, 8);  // two chunks per rank
  CostModel cost = send_cost(s.virtual_stages());
  cost.overlap_p2p_comm = false;  // one send_forward_backward_recv_forward_backward per pair
  for (P2pMode mode : {P2pMode::Batched, P2pMode::Blocking}) {
    const Dag dag = lower(s, cost, LowerOptions{mode});
    int after_backward = 0;
    for (const DagOp& op : dag.ops) {
      if (op.kind != OpKind::P2P || op.phase != Phase::F) continue;
      const std::vector<Instruction>& in = s.ranks[op.rank].instructions;
      int produced = -1;
      for (std::size_t i = 0; i < in.size(); ++i)
        if (in[i].op == InstructionKind::F && in[i].a.chunk == op.chunk && in[i].a.mb == op.mb)
          produced = static_cast<int>(i);
      INFO("rank " << op.rank << " F" << op.chunk << "." << op.mb);
      if (op.instruction == produced) continue;
      CHECK(mode == P2pMode::Batched);
      CHECK(op.instruction == produced + 1);
      CHECK(in[op.instruction].op == InstructionKind::B);
      ++after_backward;
    }
    // Steady-state forwards of every stage but the last send after their backward.
    if (mode == P2pMode::Batched) CHECK(after_backward > 0);
  }
}

TEST_CASE(
    "with overlap_p2p_comm megatron's interleaved steady state posts each receive a step "
    "early and waits for a backward's sends only after the next backward",
    "[p2p]") {
  // 1F1B-I, p = 2, v = 2, m = 4 (stages: rank 0 holds 0 and 2, rank 1 holds 1 and 3):
  //   rank 0: F0.0 F0.1 F1.0 F1.1 | F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 | B1.2 B1.3 B0.2 B0.3
  //   rank 1: F0.0 F0.1 | F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 | B0.2 B0.3
  // (warm-up | steady pairs | cool-down). F takes 4, B 16, a send 3; p = 2: one send stream.
  const Schedule s = generated("1f1b-i", 2, 4);
  const CostModel cost = send_cost(s.virtual_stages());
  REQUIRE(cost.overlap_p2p_comm);  // Megatron's default
  const Dag dag = lower(s, cost, LowerOptions{P2pMode::Batched});
  const Timeline t = simulate(dag);
  // Warm-up, blocking: rank 0 F0.0 [0,4] send [4,7]; rank 1 F0.0 [7,11]; ... rank 0 F1.1
  // [21,25]; rank 1 F1.0 [21,25], then its first steady B1.0 [25,41] sends its gradient [41,44].
  CHECK(t.start_s[find_op(dag, "send B1.0 r1->r0", 1)] == 41.0);
  // That send is waited for only after rank 1's next backward: F1.1 starts as B1.0 ends.
  CHECK(t.start_s[find_op(dag, "F1.1 PreAttn L3", 1)] == 41.0);
  // Rank 0: F0.2 [28,32] (after its F1.1 send [25,28]); its send goes once rank 1 has run F1.1
  // [41,45], the instruction after which rank 1 posts F0.2's receive: [45,48]; rank 0's B1.0
  // waits for it: [48,64].
  CHECK(t.start_s[find_op(dag, "send F0.2 r0->r1", 0)] == 45.0);
  CHECK(t.start_s[find_op(dag, "B1.0 MLP L2", 0)] == 48.0);
  // Rank 1: B1.1 [45,61], send [64,67] (rank 0 posts it after B1.0, at 64); F0.2 [61,65].
  // Rank 0's F0.3 [64,68] posts F1.2's receive (a step early: before B1.1), so rank 1's send of
  // F0.2 runs [68,71] behind its B1.1 send; without overlap it would wait for rank 0's B1.1.
  CHECK(t.start_s[find_op(dag, "send F0.2 r1->r0", 1)] == 68.0);
  // Rank 0's B1.0 gradient [64,67] is held until its F1.2, which starts once B1.1 [71,87] ends.
  CHECK(t.start_s[find_op(dag, "send B1.0 r0->r1", 0)] == 64.0);
  CHECK(t.start_s[find_op(dag, "F1.2 PreAttn L2", 0)] == 87.0);
  // The pairs go on in step, 16 + 4 + 3 apart; the cool-down is blocking: rank 0 B1.2 [136,152]
  // B1.3 [155,171] B0.2 [174,190]; rank 1 sends B0.3 [190,193]; rank 0 B0.3 [193,209].
  CHECK(t.start_s[find_op(dag, "B1.2 MLP L2", 0)] == 136.0);
  CHECK(t.start_s[find_op(dag, "send B0.3 r1->r0", 1)] == 190.0);
  CHECK(t.iteration_time_s == 209.0);
}

TEST_CASE("orders other than megatron's post receives ahead and stay near the blocking model",
          "[p2p]") {
  // STP's trainer posts its receives ahead of the consumer where the order needs it; braid posts
  // them ahead for every order but Megatron's: no send waits for its receiver.
  ScheduleOptions o;
  o.pp = 4;
  o.microbatches = 8;
  for (const char* name : {"stp", "zb-v", "dualpipe-v"}) {
    INFO(name);
    o.vpp = fixed_vpp(name);
    const Schedule s = make_schedule(name, o);
    const CostModel cost = send_cost(s.virtual_stages());
    const Timeline batched = simulate(lower(s, cost, LowerOptions{P2pMode::Batched}));
    const Timeline blocking = simulate(lower(s, cost, LowerOptions{P2pMode::Blocking}));
    CHECK(batched.iteration_time_s >= blocking.iteration_time_s);
    CHECK(batched.iteration_time_s <= blocking.iteration_time_s * 1.05);
  }
}

TEST_CASE("the study file and --p2p-batched off give the blocking model", "[p2p][cli]") {
  const std::string study = "simulate --study default --schedule 1f1b-i --microbatches 8 --json ";
  const auto time_s = [](const CliRun& r) {
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["iteration_time_s"].get<double>();
  };
  const double batched = time_s(run_braid(study));
  const double off = time_s(run_braid(study + "--p2p-batched off"));
  CHECK(off == time_s(run_braid(study + "--p2p blocking")));
  CHECK(batched == time_s(run_braid(study + "--p2p batched")));
  CHECK(batched != off);
  // The default study with `p2p_batched: false` in its training block.
  const fs::path dir = fs::temp_directory_path() / ("braid_p2p." + std::to_string(::getpid()));
  std::string yaml = slurp(fs::path(BRAID_SOURCE_DIR) / "configs/studies/default.yaml");
  yaml.replace(yaml.find("training:"), 9, "training:\n  p2p_batched: false");
  write_file(dir / "s.yaml", yaml);
  const double from_file = time_s(run_braid("simulate --study '" + (dir / "s.yaml").string() +
                                            "' --schedule 1f1b-i --microbatches 8 --json"));
  fs::remove_all(dir);
  CHECK(from_file == off);
  const CliRun bad = run_braid(study + "--p2p-batched maybe");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--p2p-batched"));
}
