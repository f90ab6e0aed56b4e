// Schedules (DESIGN §3): the STP order of the authors' generator, every generator valid over the
// issue's grid of sizes, the peak in-flight activations of Table 1, and the validator catching
// incomplete, misordered and deadlocking programs.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "cli_run.hpp"

using namespace braid;

namespace {

Schedule make(const std::string& name, int p, int m, int vpp = 2) {
  ScheduleOptions o;
  o.pp = p;
  o.microbatches = m;
  o.vpp = vpp;
  return make_schedule(name, o);
}

// DESIGN §3, p = 4, m = 12 (the paper's order from the authors' public generator).
const char* kStpRank0 =
    "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 F0.7 F1.1&B1.0* F0.8&W F1.2&B1.1* F0.9&W F1.3&B1.2* "
    "F0.10&W F1.4&B1.3 F0.11&B0.0 F1.5&B1.4 B0.1 F1.6&B1.5* B0.2 F1.7&B1.6* B0.3 F1.8&B1.7* B0.4 "
    "F1.9&B1.8* B0.5 F1.10&B1.9* B0.6 F1.11&B1.10* B0.7 B1.11 B0.8 W W B0.9 W W B0.10 W W B0.11";
const char* kStpRank3 =
    "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 F0.4+F0.5 F0.6+F0.7 F1.4&B1.0 F0.8&B0.0 "
    "F1.5&B1.1 F0.9&B0.1 F1.6&B1.2 F0.10&B0.2 F1.7&B1.3* F0.11&B0.3* F1.8&B1.4* B0.4 F1.9&B1.5* "
    "B0.5 F1.10&B1.6* B0.6 F1.11&B1.7* B0.7 B1.8 B0.8 B1.9 B0.9 B1.10 B0.10 B1.11 B0.11 W W W W W "
    "W";

std::vector<int> sizes_for(int p) {
  return {2 * p, 2 * p + 1, 3 * p - 1, 3 * p, 4 * p, 8 * p, 8 * p + 3};
}

}  // namespace

TEST_CASE("STP p=4 m=12 matches DESIGN §3 token by token", "[schedule][stp]") {
  Schedule s = make("stp", 4, 12);
  REQUIRE(s.ranks.size() == 4);
  CHECK(s.placement == Placement::V);
  CHECK(format_program(s.ranks[0]) == kStpRank0);
  CHECK(format_program(s.ranks[3]) == kStpRank3);
  ValidationResult v = validate(s);
  REQUIRE(v.ok());
  CHECK(v.peak_in_flight == std::vector<int>{12, 12, 12, 12});
}

TEST_CASE("STP W instructions name the deferred pass they run", "[schedule][stp]") {
  Schedule s = make("stp", 4, 12);
  // Rank 0, position 10 is F0.8&W: the W of B1.0, deferred by F1.1&B1.0* just before it.
  const Instruction& fw = s.ranks[0].instructions[10];
  CHECK(fw.op == InstructionKind::FW);
  CHECK(fw.a == Pass{0, 8, false});
  CHECK(fw.b == Pass{1, 0, false});
  // Rank 3 ends with the six W of B1.3, B0.3, B1.4, B1.5, B1.6, B1.7 in that (FIFO) order.
  const auto& list = s.ranks[3].instructions;
  std::vector<Pass> tail;
  for (size_t k = list.size() - 6; k < list.size(); ++k) tail.push_back(list[k].a);
  CHECK(tail == std::vector<Pass>{{1, 3, false},
                                  {0, 3, false},
                                  {1, 4, false},
                                  {1, 5, false},
                                  {1, 6, false},
                                  {1, 7, false}});
}

TEST_CASE("every schedule validates for p in 2..8 and the issue's microbatch counts",
          "[schedule][validator]") {
  for (const std::string& name : schedule_names()) {
    for (int p = 2; p <= 8; ++p) {
      for (int m : sizes_for(p)) {
        ScheduleOptions o;
        o.pp = p;
        o.microbatches = m;
        const bool megatron_rule = m % p == 0 || m % p >= p;  // group size N = p
        if ((name == "1f1b-i" || name == "combined-1f1b") && !megatron_rule) {
          CHECK_THROWS_AS(make_schedule(name, o), InputError);
          continue;
        }
        Schedule s = make_schedule(name, o);
        ValidationResult v = validate(s);
        INFO(name << " p=" << p << " m=" << m << ": " << v.error);
        CHECK(v.ok());
        CHECK(s.microbatches == m);
        CHECK(static_cast<int>(v.peak_in_flight.size()) == p);
      }
    }
  }
}

TEST_CASE("STP peaks at 3p chunk activations on every rank for m >= 3p-1", "[schedule][peak]") {
  for (int p = 2; p <= 8; ++p)
    for (int m : {3 * p - 1, 3 * p, 4 * p, 8 * p, 8 * p + 3}) {
      ValidationResult v = validate(make("stp", p, m));
      INFO("p=" << p << " m=" << m);
      REQUIRE(v.ok());
      CHECK(v.peak_in_flight == std::vector<int>(p, 3 * p));
    }
}

TEST_CASE("STP below 3p-1 microbatches still peaks at no more than 3p", "[schedule][peak]") {
  for (int p = 2; p <= 8; ++p)
    for (int m = 2 * p; m < 3 * p - 1; ++m) {
      ValidationResult v = validate(make("stp", p, m));
      INFO("p=" << p << " m=" << m);
      REQUIRE(v.ok());
      for (int peak : v.peak_in_flight) CHECK(peak <= 3 * p);
    }
}

TEST_CASE("ZB-V peaks at 2p chunk activations on every rank", "[schedule][peak]") {
  for (int p = 2; p <= 8; ++p)
    for (int m : sizes_for(p)) {
      ValidationResult v = validate(make("zb-v", p, m));
      INFO("p=" << p << " m=" << m);
      REQUIRE(v.ok());
      CHECK(v.peak_in_flight == std::vector<int>(p, 2 * p));
    }
}

// Table 1 writes (3p-2) M_a for 1F1B-I: the 3p-2 warm-up forwards of rank 0. Counted per
// instruction, Megatron's steady state runs its forward before its backward, so one more
// activation is live at that moment: 3p-1 (Korthikanti et al.'s p*v*(1+(p-1)/(p*v)) = 3p-1 at
// v = 2). docs/schedules.md explains the difference.
TEST_CASE("1F1B-I (v=2, m a multiple of p) peaks at 3p-1 on rank 0: 3p-2 warm-up + 1",
          "[schedule][peak]") {
  for (int p = 2; p <= 8; ++p)
    for (int m : {2 * p, 3 * p, 4 * p, 8 * p}) {
      ValidationResult v = validate(make("1f1b-i", p, m));
      INFO("p=" << p << " m=" << m);
      REQUIRE(v.ok());
      CHECK(v.peak_in_flight[0] == 3 * p - 1);
      // Rank r warms up with 2(p-r-1) + p forwards, then one more before its first backward.
      for (int r = 0; r < p; ++r) CHECK(v.peak_in_flight[r] == 2 * (p - r - 1) + p + 1);
    }
}

TEST_CASE("1F1B peaks at p-r activations on rank r", "[schedule][peak]") {
  ValidationResult v = validate(make("1f1b", 4, 16));
  REQUIRE(v.ok());
  CHECK(v.peak_in_flight == std::vector<int>{4, 3, 2, 1});
  ValidationResult h1 = validate(make("zb-h1", 4, 16));
  CHECK(h1.peak_in_flight == std::vector<int>{4, 3, 2, 1});
  ValidationResult g = validate(make("gpipe", 4, 16));
  CHECK(g.peak_in_flight == std::vector<int>{16, 16, 16, 16});
}

TEST_CASE("DualPipeV follows DeepSeek's eight steps (p=4, m=10)", "[schedule][dualpipe-v]") {
  Schedule s = make("dualpipe-v", 4, 10);
  // Rank 0: 6 F0; F0 F1; 3 x [B1* W F1]; 3 x [F0&B1 F1&B0]; 3 x [B1 F1&B0]; [B1 B0*];
  // 3 x [W B0*]; W.
  CHECK(format_program(s.ranks[0]) ==
        "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 B1.0* W F1.1 B1.1* W F1.2 B1.2* W F1.3 "
        "F0.7&B1.3 F1.4&B0.0 F0.8&B1.4 F1.5&B0.1 F0.9&B1.5 F1.6&B0.2 B1.6 F1.7&B0.3 B1.7 "
        "F1.8&B0.4 B1.8 F1.9&B0.5 B1.9 B0.6* W B0.7* W B0.8* W B0.9* W");
  // The last rank runs its first F0 and B1 apart; its second half of step 6 defers W.
  CHECK(format_program(s.ranks[3])
            .rfind("F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 F0.4 B1.0 "
                   "F1.4&B0.0 F0.5&B1.1",
                   0) == 0);
  CHECK(validate(s).ok());
}

TEST_CASE("1F1B-I follows Megatron's schedule table (PP2, VP2, N3, M5)", "[schedule][1f1b-i]") {
  ScheduleOptions o;
  o.pp = 2;
  o.vpp = 2;
  o.microbatches = 5;
  o.group_size = 3;
  Schedule s = make_schedule("1f1b-i", o);
  // Megatron's comment: microbatch 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1; rank 0 warms
  // up with 2 + 3 = 5 forwards, then alternates; backwards mirror the chunk.
  CHECK(format_program(s.ranks[0]) ==
        "F0.0 F0.1 F0.2 F1.0 F1.1 F1.2 B1.0 F0.3 B1.1 F0.4 B1.2 F1.3 B0.0 F1.4 B0.1 B0.2 B1.3 "
        "B1.4 B0.3 B0.4");
  CHECK(validate(s).ok());
}

TEST_CASE("combined 1F1B runs Megatron's steady state as F&B blocks", "[schedule][combined]") {
  // One rank (Megatron's combined_1f1b_schedule_for_no_pipelining): F0, F(i+1)&B(i), B(m-1).
  CHECK(format_program(make("combined-1f1b", 1, 4, 1).ranks[0]) ==
        "F0.0 F0.1&B0.0 F0.2&B0.1 F0.3&B0.2 B0.3");
  // PP2, VP2, N = p = 2, M4: the schedule table is microbatch 0 1 0 1 2 3 2 3, chunk
  // 0 0 1 1 0 0 1 1. Rank 0 warms up with 1F1B-I's (2-0-1)*2 + (2-1)*2 = 4 forwards plus one,
  // rank 1 with 0 + 2 + 1 = 3; then table entry k + warm-up forward beside entry k's backward
  // (chunk mirrored), then the remaining backwards.
  const Schedule s = make("combined-1f1b", 2, 4);
  CHECK(format_program(s.ranks[0]) ==
        "F0.0 F0.1 F1.0 F1.1 F0.2 F0.3&B1.0 F1.2&B1.1 F1.3&B0.0 B0.1 B1.2 B1.3 B0.2 B0.3");
  // Rank 1 holds the last stage: 1F1B-I's first steady pair is F1.0 then B1.0 of that very
  // microbatch; the extra warm-up forward makes every block's two passes independent.
  CHECK(format_program(s.ranks[1]) ==
        "F0.0 F0.1 F1.0 F1.1&B1.0 F0.2&B1.1 F0.3&B0.0 F1.2&B0.1 F1.3&B1.2 B1.3 B0.2 B0.3");
  CHECK(s.p2p_runtime == P2pRuntime::Megatron);
  CHECK(validate(s).ok());
  // One chunk per rank on p > 1 ranks: refused, as Megatron does.
  CHECK_THROWS_WITH(make("combined-1f1b", 3, 6, 1),
                    "--vpp: 1: combined-1f1b with pp > 1 needs at least 2 chunks per rank "
                    "(Megatron asserts a virtual pipeline size with "
                    "--overlap-moe-expert-parallel-comm); give --vpp 2 or more");
  // The interleaved sizes follow 1F1B-I's rules.
  CHECK_THROWS_WITH(make("combined-1f1b", 4, 10),
                    Catch::Contains("combined-1f1b with group size N = 4 needs m mod N"));
  CHECK_THROWS_WITH(make("combined-1f1b", 4, 8, 0), Catch::Contains("--vpp: 0"));
}

TEST_CASE("ZB-H1 keeps r weight gradients of rank r for the drain", "[schedule][zb-h1]") {
  Schedule s = make("zb-h1", 4, 6);
  CHECK(format_program(s.ranks[0]) ==
        "F0.0 F0.1 F0.2 F0.3 B0.0* W F0.4 B0.1* W F0.5 B0.2* W B0.3* W B0.4* W B0.5* W");
  CHECK(format_program(s.ranks[3]) ==
        "F0.0 B0.0* F0.1 B0.1* F0.2 B0.2* F0.3 B0.3* W F0.4 B0.4* W F0.5 B0.5* W W W W");
}

TEST_CASE("STP-offload offloads chunk-0 activations and reloads one instruction early",
          "[schedule][stp-offload]") {
  ScheduleOptions o;
  o.pp = 4;
  o.microbatches = 12;
  Schedule s = make_schedule("stp-offload", o);
  ValidationResult v = validate(s);
  REQUIRE(v.ok());
  CHECK(v.peak_in_flight == std::vector<int>(4, 12));  // offloading moves, it does not free
  for (int r = 0; r < 4; ++r) CHECK(v.peak_on_device[r] < v.peak_in_flight[r]);
  // Rank 0: F0.0 is followed by its OFFLOAD; B0.0 runs in F0.11&B0.0, and its RELOAD comes before
  // the instruction ahead of it (F1.4&B1.3).
  const std::string text = format_program(s.ranks[0]);
  CHECK(text.rfind("F0.0 OFF0.0 F0.1 OFF0.1", 0) == 0);
  CHECK(text.find("REL0.0 F1.4&B1.3 F0.11&B0.0") != std::string::npos);
  // Removing the offloads gives STP back; fraction 0 offloads nothing.
  o.offload_fraction = 0.0;
  Schedule none = make_schedule("stp-offload", o);
  CHECK(format_program(none.ranks[0]) == kStpRank0);
}

TEST_CASE("bad sizes and names are one clear InputError", "[schedule][errors]") {
  CHECK_THROWS_WITH(make("pipedream", 4, 8),
                    Catch::Contains("unknown schedule; known: gpipe, 1f1b, 1f1b-i, zb-h1, zb-v, "
                                    "dualpipe-v, stp, stp-offload, combined-1f1b"));
  CHECK_THROWS_WITH(make("1f1b", 0, 8), Catch::Contains("--pp: 0: pipeline size must be >= 1"));
  CHECK_THROWS_WITH(make("stp", 4, 7),
                    Catch::Contains("--microbatches: 7: stp needs at least 8 microbatches"));
  CHECK_THROWS_WITH(make("dualpipe-v", 3, 5), Catch::Contains("needs at least 6 microbatches"));
  CHECK_THROWS_WITH(make("1f1b-i", 4, 10),
                    Catch::Contains("needs m mod N to be 0 or at least p = 4"));
  CHECK_THROWS_WITH(make("1f1b-i", 4, 3), Catch::Contains("needs at least 4 microbatches"));
  CHECK_THROWS_WITH(make("1f1b-i", 4, 8, 0), Catch::Contains("--vpp: 0"));  // vpp 1: 1f1b
  ScheduleOptions o;
  o.pp = 4;
  o.microbatches = 10;
  o.group_size = 5;  // 10 mod 5 == 0: allowed
  CHECK(validate(make_schedule("1f1b-i", o)).ok());
  o.group_size = 3;
  CHECK_THROWS_WITH(make_schedule("1f1b-i", o), Catch::Contains("--group-size: 3"));
  CHECK(min_microbatches("stp", o) == 8);
  CHECK(fixed_vpp("1f1b-i") == 0);
  CHECK(fixed_vpp("zb-v") == 2);
  // chunks_per_rank: a schedule's own chunks per rank, or the requested number where it lets it
  // be chosen.
  CHECK(chunks_per_rank("1f1b-i", 4) == 4);
  CHECK(chunks_per_rank("1f1b", 4) == 1);
  CHECK(chunks_per_rank("zb-v", 4) == 2);
  CHECK(chunks_per_rank(ScheduleKind::Stp, 3) == 2);
  CHECK_THROWS_WITH(chunks_per_rank("1f1x", 2), Catch::Contains("unknown schedule"));
}

namespace {

Schedule two_rank_1f1b(const std::vector<std::vector<Instruction>>& programs, int m) {
  Schedule s;
  s.pp = 2;
  s.vpp = 1;
  s.microbatches = m;
  for (int r = 0; r < 2; ++r) s.ranks.push_back({r, programs[r]});
  return s;
}

Instruction F(int c, int i) { return {InstructionKind::F, {c, i, false}, {}}; }
Instruction B(int c, int i, bool defer = false) { return {InstructionKind::B, {c, i, defer}, {}}; }
Instruction W(int c, int i) { return {InstructionKind::W, {c, i, false}, {}}; }

}  // namespace

TEST_CASE("the validator names rank, position and instruction of what is wrong",
          "[schedule][validator]") {
  const std::vector<Instruction> good = {F(0, 0), B(0, 0)};
  CHECK(validate(two_rank_1f1b({good, good}, 1)).ok());
  CHECK(validate(two_rank_1f1b({good, {F(0, 0)}}, 1)).error ==
        "rank 1: chunk 0 microbatch 0 has no B");
  CHECK(validate(two_rank_1f1b({good, {B(0, 0), F(0, 0)}}, 1)).error ==
        "rank 1, position 0 (B0.0): B of chunk 0 microbatch 0 before its F");
  CHECK(validate(two_rank_1f1b({good, {F(0, 0), B(0, 0, true)}}, 1)).error ==
        "rank 1: chunk 0 microbatch 0 defers its W but has no W");
  CHECK(validate(two_rank_1f1b({good, {F(0, 0), B(0, 0), W(0, 0)}}, 1)).error ==
        "rank 1, position 2 (W0.0): W of chunk 0 microbatch 0 whose B already ran the weight "
        "gradient");
  CHECK(validate(two_rank_1f1b({good, {F(0, 0), F(0, 0), B(0, 0)}}, 1)).error ==
        "rank 1, position 1 (F0.0): second F of chunk 0 microbatch 0 (first at position 0)");
  CHECK(validate(two_rank_1f1b({good, {F(0, 0), B(0, 3)}}, 1)).error ==
        "rank 1, position 1 (B0.3): chunk must be in 0..0 and microbatch in 0..0");
}

TEST_CASE("a dependency cycle across ranks is reported as a deadlock", "[schedule][validator]") {
  // Rank 1 starts microbatch 1 first; rank 0 waits for B0.0 before sending it F0.1.
  Schedule s = two_rank_1f1b(
      {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 1), F(0, 0), B(0, 0), B(0, 1)}}, 2);
  ValidationResult v = validate(s);
  CHECK_THAT(v.error, Catch::StartsWith("deadlock: these instructions wait on each other") &&
                          Catch::Contains("rank 1, position 0 (F0.1)") &&
                          Catch::Contains("rank 0, position 2 (F0.1)") &&
                          Catch::Contains("rank 0, position 1 (B0.0)") &&
                          Catch::Contains("rank 1, position 2 (B0.0)"));
  // A braided pair whose halves depend on each other deadlocks too (V placement, one rank: F1.0
  // needs F0.0 of the same FF block).
  Schedule v1;
  v1.pp = 1;
  v1.vpp = 2;
  v1.microbatches = 1;
  v1.placement = Placement::V;
  v1.ranks.push_back({0, {{InstructionKind::FF, {0, 0, false}, {1, 0, false}}, B(1, 0), B(0, 0)}});
  CHECK_THAT(validate(v1).error, Catch::Contains("deadlock: rank 0, position 0 (F0.0+F1.0)"));
}

// ---- the command line ----

namespace {

struct Run {
  int status;
  std::string output;  // stdout and stderr
};

Run run(const std::string& args) {
  // In the test's own directory: the export test writes a relative file there.
  const braid::test::CliRun r = braid::test::run_braid(args, std::filesystem::current_path());
  return {r.exit_code, r.out + r.err};
}

}  // namespace

TEST_CASE("braid schedule --schedule stp --pp 4 --microbatches 12 prints the DESIGN example",
          "[schedule][cli]") {
  Run r = run("schedule --schedule stp --pp 4 --microbatches 12");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains(std::string("\nrank 0: ") + kStpRank0 + "\n"));
  CHECK_THAT(r.output, Catch::Contains(std::string("\nrank 3: ") + kStpRank3 + "\n"));
  CHECK_THAT(
      r.output,
      Catch::Contains("peak in-flight activations per rank (chunk-microbatches): 12 12 12 12"));
}

TEST_CASE("braid schedule --json prints DESIGN §8's schema", "[schedule][cli]") {
  Run r = run("schedule --schedule stp --pp 2 --microbatches 5 --json");
  REQUIRE(r.status == 0);
  CHECK(r.output.rfind(R"({"schedule":"stp","pp":2,"vpp":2,"microbatches":5,"ranks":[{"rank":0,)"
                       R"("instructions":[{"op":"F","chunk":0,"mb":0},)",
                       0) == 0);
  CHECK_THAT(r.output,
             Catch::Contains(
                 R"({"op":"FB","f":{"chunk":1,"mb":1},"b":{"chunk":1,"mb":0,"defer_w":true}})"));
  CHECK_THAT(r.output,
             Catch::Contains(R"({"op":"FW","f":{"chunk":0,"mb":4},"w":{"chunk":1,"mb":0}})"));
  CHECK_THAT(r.output,
             Catch::Contains(R"({"op":"FF","f":[{"chunk":0,"mb":2},{"chunk":0,"mb":3}]})"));
  CHECK_THAT(r.output, Catch::Contains(R"({"op":"W","chunk":)"));
}

TEST_CASE("braid schedule rejects bad input with one line and exit code 2", "[schedule][cli]") {
  Run unknown = run("schedule --schedule nope --pp 4 --microbatches 8");
  CHECK(unknown.status == 2);
  CHECK(unknown.output ==
        "braid: --schedule: nope: unknown schedule; known: gpipe, 1f1b, 1f1b-i, zb-h1, zb-v, "
        "dualpipe-v, stp, stp-offload, combined-1f1b\n");
  Run few = run("schedule --schedule stp --pp 4 --microbatches 6");
  CHECK(few.status == 2);
  CHECK(few.output ==
        "braid: --microbatches: 6: stp needs at least 8 microbatches (2p with p = 4)\n");
  Run vpp = run("schedule --schedule 1f1b --pp 4 --microbatches 8 --vpp 3");
  CHECK(vpp.status == 2);
  CHECK_THAT(vpp.output, Catch::StartsWith("braid: --vpp: 3: 1f1b always has 1 chunk per rank"));
  Run group = run("schedule --schedule stp --pp 4 --microbatches 8 --group-size 4");
  CHECK(group.status == 2);
  Run fraction =
      run("schedule --schedule stp-offload --pp 4 --microbatches 8 --offload-fraction 2");
  CHECK(fraction.status == 2);
  CHECK_THAT(fraction.output, Catch::Contains("--offload-fraction: 2") &&
                                  Catch::Contains("must be between 0 and 1"));
  Run pp = run("schedule --schedule gpipe --pp 0 --microbatches 8");
  CHECK(pp.status == 2);
  CHECK(pp.output == "braid: --pp: 0: pipeline size must be >= 1\n");
  Run csv = run(std::string("schedule --schedule-csv ") + BRAID_SOURCE_DIR +
                "/tests/data/malformed_unknown_action.csv");
  CHECK(csv.status == 2);
  CHECK_THAT(csv.output, Catch::Contains("row 1 (rank 0), column 2: cannot parse '0X1'"));
}

TEST_CASE("braid export writes a CSV that braid schedule --schedule-csv reads back",
          "[schedule][cli]") {
  const std::string file = "braid_export_test_zbv.csv";
  std::remove(file.c_str());
  Run ex = run("export --format pytorch-csv --schedule zb-v --pp 4 --microbatches 8 -o " + file);
  REQUIRE(ex.status == 0);
  Run direct = run("schedule --schedule zb-v --pp 4 --microbatches 8");
  Run back = run("schedule --schedule-csv " + file + " --pp 4");
  REQUIRE(back.status == 0);
  // Same rank lines and peaks; only the header names the source.
  CHECK(direct.output.substr(direct.output.find('\n')) ==
        back.output.substr(back.output.find('\n')));
  Run wrong_pp = run("schedule --schedule-csv " + file + " --pp 2");
  CHECK(wrong_pp.status == 2);
  std::remove(file.c_str());
  Run no_dir =
      run("export --format pytorch-csv --schedule stp --pp 4 --microbatches 12 -o "
          "no/such/dir/x.csv");
  CHECK(no_dir.status == 2);
  Run bad_m = run("export --format pytorch-csv --schedule stp --pp 4 --microbatches 3 -o " + file);
  CHECK(bad_m.status == 2);
  std::ifstream left(file);
  CHECK_FALSE(left.good());  // no partial output on bad input
}

TEST_CASE("small and unusual sizes stay valid", "[schedule][validator]") {
  for (const std::string& name : schedule_names()) {
    ScheduleOptions o;
    o.pp = 1;
    o.microbatches = 4;
    INFO(name << " p=1");
    CHECK(validate(make_schedule(name, o)).ok());
  }
  for (const char* name : {"gpipe", "1f1b", "zb-h1", "zb-v"})
    for (int p = 1; p <= 6; ++p)
      // From each one's minimum: 1, or p for gpipe and 1f1b (refused below it).
      for (int m = min_microbatches(name, ScheduleOptions{.pp = p}); m <= 2 * p; ++m) {
        INFO(name << " p=" << p << " m=" << m);
        Schedule s = make(name, p, m);
        CHECK(s.microbatches == m);
        CHECK(validate(s).ok());
      }
  for (int v = 2; v <= 4; ++v)
    for (int p = 2; p <= 6; ++p)
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("1f1b-i v=" << v << " p=" << p << " m=" << m);
        CHECK(validate(make("1f1b-i", p, m, v)).ok());
      }
  for (int p = 2; p <= 6; ++p)
    for (int m = 2 * p; m <= 4 * p; ++m)
      for (double x : {0.0, 0.25, 1.0}) {
        ScheduleOptions o;
        o.pp = p;
        o.microbatches = m;
        o.offload_fraction = x;
        INFO("stp-offload p=" << p << " m=" << m << " x=" << x);
        CHECK(validate(make_schedule("stp-offload", o)).ok());
      }
}

namespace {

// Unit-time list schedule, to check the generators' orders against the closed forms: F, B (input
// gradient) and W cost 1 per chunk, a full backward 2, a braided block the sum of its halves,
// communication nothing; each rank runs its instructions in order, each as soon as the passes it
// waits for (the validator's dependencies) have finished. Returns the makespan.
long unit_makespan(const Schedule& s) {
  const int p = s.pp, stages = s.virtual_stages(), m = s.microbatches;
  std::vector<long> f_end(static_cast<size_t>(stages) * m, -1), b_end(f_end);
  std::vector<size_t> next(p, 0);
  std::vector<long> clock(p, 0);
  auto backward_cost = [](const Pass& q) { return q.defer_w ? 1L : 2L; };
  auto cost = [&](const Instruction& in) -> long {
    switch (in.op) {
      case InstructionKind::B:
        return backward_cost(in.a);
      case InstructionKind::FB:
        return 1 + backward_cost(in.b);
      case InstructionKind::FW:
      case InstructionKind::FF:
        return 2;
      case InstructionKind::Offload:
      case InstructionKind::Reload:
        return 0;
      default:
        return 1;
    }
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r)
      while (next[r] < s.ranks[r].instructions.size()) {
        const Instruction& in = s.ranks[r].instructions[next[r]];
        const bool has_f = in.op == InstructionKind::F || in.op == InstructionKind::FB ||
                           in.op == InstructionKind::FW || in.op == InstructionKind::FF;
        long start = clock[r];
        bool ready = true;
        auto wait = [&](long end) {
          if (end < 0) ready = false;
          start = std::max(start, end);
        };
        auto stage = [&](const Pass& q) { return s.virtual_stage(r, q.chunk); };
        auto at = [&](int st, int mb) { return static_cast<size_t>(st) * m + mb; };
        auto wait_f = [&](const Pass& q) {
          if (stage(q) > 0) wait(f_end[at(stage(q) - 1, q.mb)]);
        };
        auto wait_b = [&](const Pass& q) {
          wait(stage(q) == stages - 1 ? f_end[at(stage(q), q.mb)] : b_end[at(stage(q) + 1, q.mb)]);
        };
        if (has_f) wait_f(in.a);
        if (in.op == InstructionKind::FF) wait_f(in.b);
        if (in.op == InstructionKind::B) wait_b(in.a);
        if (in.op == InstructionKind::FB) wait_b(in.b);
        if (!ready) break;
        const long end = start + cost(in);
        clock[r] = end;
        ++next[r];
        progress = true;
        if (has_f) f_end[at(stage(in.a), in.a.mb)] = end;
        if (in.op == InstructionKind::FF) f_end[at(stage(in.b), in.b.mb)] = end;
        if (in.op == InstructionKind::B) b_end[at(stage(in.a), in.a.mb)] = end;
        if (in.op == InstructionKind::FB) b_end[at(stage(in.b), in.b.mb)] = end;
      }
  }
  for (int r = 0; r < p; ++r) REQUIRE(next[r] == s.ranks[r].instructions.size());
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace

// DESIGN §6 and the peers' closed forms with F = B = W = 1 per chunk and no communication: the
// pipeline bubble is the makespan less each rank's work (3 units per chunk-microbatch).
TEST_CASE("unit-time bubbles match the closed forms", "[schedule][theory]") {
  for (int p = 2; p <= 8; ++p)
    for (int m : {3 * p, 4 * p, 8 * p}) {
      INFO("p=" << p << " m=" << m);
      auto bubble = [&](const char* name) {
        Schedule s = make(name, p, m);
        return unit_makespan(s) - 3L * s.vpp * m;
      };
      CHECK(bubble("gpipe") == 3 * (p - 1));   // (p-1)(F+B+W)
      CHECK(bubble("1f1b") == 3 * (p - 1));    // (p-1)(F+B+W)
      CHECK(bubble("1f1b-i") == 3 * (p - 1));  // Table 1: (p-1)(T_F+T_B+T_W)
      CHECK(bubble("zb-h1") == p - 1);         // (p-1)(F+B-W)
      CHECK(bubble("stp") == p - 1);           // Table 1: (p-1)(T_F+T_B-T_W)
      // DualPipeV README, p ranks: (p-1)(F&B + B - 3W) with B the full backward (2) and F&B = 3.
      CHECK(bubble("dualpipe-v") == 2 * (p - 1));
      // ZB-V: zero bubble after the unavoidable start-up of p-1 forwards (Table 1's
      // (p-1)(T_F+T_B-2T_W) = 0 leaves that start-up out).
      CHECK(bubble("zb-v") == p - 1);
    }
}

TEST_CASE("every schedule kind's traits describe what its generator builds", "[schedule]") {
  REQUIRE(schedule_names().size() == 9);
  for (const std::string& n : schedule_names()) {
    INFO(n);
    const ScheduleKind kind = parse_schedule_kind(n);
    const ScheduleTraits& t = traits(kind);
    CHECK(t.kind == kind);
    CHECK(std::string(name(kind)) == n);
    const Schedule s = make(n, 4, 12);
    CHECK(s.name == n);
    CHECK(s.placement == t.placement);
    CHECK(s.vpp == (t.vpp == 0 ? 2 : t.vpp));
    CHECK(fixed_vpp(n) == t.vpp);
  }
  CHECK(traits(ScheduleKind::StpOffload).own_offload);
  CHECK_FALSE(traits(ScheduleKind::Stp).own_offload);
  CHECK(traits(ScheduleKind::Interleaved).group_size);
  CHECK(traits(ScheduleKind::DualPipeV).microbatches_per_pp == 2);
  CHECK_THROWS_WITH(parse_schedule_kind("pipedream"),
                    "--schedule: pipedream: unknown schedule; known: gpipe, 1f1b, 1f1b-i, zb-h1, "
                    "zb-v, dualpipe-v, stp, stp-offload, combined-1f1b");
}

TEST_CASE("instruction and placement names read back to the same value", "[schedule]") {
  for (InstructionKind op : {InstructionKind::F, InstructionKind::B, InstructionKind::W,
                             InstructionKind::FB, InstructionKind::FW, InstructionKind::FF,
                             InstructionKind::Offload, InstructionKind::Reload})
    CHECK(parse_instruction_kind(name(op)) == op);
  CHECK(std::string(name(InstructionKind::Offload)) == "OFFLOAD");
  CHECK_FALSE(parse_instruction_kind("BF").has_value());
  CHECK(std::string(name(Placement::Loop)) == "loop");
  CHECK(parse_placement("v") == Placement::V);
  CHECK_FALSE(parse_placement("V").has_value());
}
