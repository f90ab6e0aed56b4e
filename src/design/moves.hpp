// The designer's neighbourhood: edits of one rank's instruction program that keep every pass
// present once (validity across ranks is left to validate()). Internal to src/design/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/schedule.hpp"

namespace braid::designer {

// splitmix64: the same stream on every platform (std:: distributions are not portable).
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return n <= 0 ? 0 : static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

// Compute-stream idle time before an instruction, from the parent's timeline.
struct Gap {
  double idle_s = 0;
  int rank = 0;
  int position = 0;
};

// Applies one random move to `s`, aimed at `gaps` (largest first) when there are some; `tight`
// favours offloading; `offload` = false never offloads. Returns false when
// the drawn move does not apply. `what` names the move for the trace.
bool mutate(Schedule& s, const std::vector<Gap>& gaps, bool tight, bool offload, Rng& rng,
            std::string& what);

// Order-sensitive hash of every rank program (to skip candidates already simulated).
std::uint64_t schedule_hash(const Schedule& s);

}  // namespace braid::designer
