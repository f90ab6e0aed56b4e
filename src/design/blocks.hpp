// Building blocks: periodic steady states of the V placement used as target times for the greedy
// list scheduler (greedy.hpp). In a block every rank runs, once per period of six slots, one
// forward, one input-gradient backward and one weight gradient of each of its two chunks; rank 0's
// slots are chosen, and each next rank shifts chunk 0's forward and chunk 1's backward by an offset
// d (the passes flowing down the ranks) and chunk 1's forward and chunk 0's backward by one slot
// the other way (the passes flowing up). Two offsets (one for the first ranks, one for the rest)
// give the family. The list scheduler turns a block into a whole schedule: its warm-up and drain
// follow from the dependencies and the memory limit. Internal to src/design/.
#pragma once

#include <string>
#include <vector>

namespace braid::designer {

struct Block {
  std::string label;           // "F1@a,B1@b,B0@c,d0xn,d1": rank 0's slots, d0 for n ranks, then d1
  std::vector<double> target;  // per (virtual stage k, phase F/B/W): slot of microbatch 0
  double period = 0;           // slots per microbatch
  int steady_peak = 0;         // largest rank's chunk-microbatches alive from F to W
};

// Every valid block for `pp` ranks (passes of one rank in distinct slots), in a fixed order.
std::vector<Block> block_family(int pp);

// Per-pass targets (GreedyPolicy::pass_target) of the block over `microbatches`, with a filled
// warm-up: first of all rank r runs its first limit - min(r + 1, limit / 2) chunk-0 forwards and
// its first min(r + 1, limit / 2) chunk-1 forwards, chunk 0 alone for 2 (p - 1 - r) of them (the
// time the first microbatch takes to come back up to r) and then the chunks alternating. The
// rest follows the block.
std::vector<double> block_program(const Block& block, int pp, int microbatches, int limit);

}  // namespace braid::designer
