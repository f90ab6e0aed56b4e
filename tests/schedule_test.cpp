// Schedules (DESIGN §3): the STP order of the authors' generator, every generator valid over the
// issue's grid of sizes, the peak in-flight activations of Table 1, and the validator catching
// incomplete, misordered and deadlocking programs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/schedule.hpp"

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
  CHECK(fw.op == OpCode::FW);
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
        if (name == "1f1b-i" && !megatron_rule) {
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
