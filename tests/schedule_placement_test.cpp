#include <catch2/catch.hpp>

#include "braid/schedule.hpp"

using namespace braid;

namespace {

// A schedule of p ranks and vpp chunks per rank placed one way; no programs (placement only).
Schedule placed(int pp, int vpp, Placement placement) {
  Schedule s;
  s.pp = pp;
  s.vpp = vpp;
  s.placement = placement;
  return s;
}

}  // namespace

TEST_CASE("V placement puts stage r and 2p-1-r on rank r", "[schedule][placement]") {
  const Schedule s = placed(4, 2, Placement::V);
  CHECK(s.virtual_stage(0, 0) == 0);
  CHECK(s.virtual_stage(0, 1) == 7);
  CHECK(s.virtual_stage(3, 1) == 4);
  for (int k = 0; k < 8; ++k) CHECK(s.virtual_stage(s.rank_of(k), s.chunk_of(k)) == k);
}

TEST_CASE("loop placement puts stage c*p+r on rank r", "[schedule][placement]") {
  const Schedule s = placed(4, 3, Placement::Loop);
  CHECK(s.virtual_stage(1, 2) == 9);
  CHECK(s.rank_of(9) == 1);
  CHECK(s.chunk_of(9) == 2);
}
