// The building-block family of blocks.hpp. A block is first fixed by residues (slot modulo the
// period) per rank, then unwrapped into absolute slots of microbatch 0 by walking its dependency
// chain: chunk 0's forward down the ranks, chunk 1's forward up, chunk 1's backward down, chunk 0's
// backward up, each pass in the first slot of its residue after the pass it waits for; a weight
// gradient in the first free slot after its backward.
#include "blocks.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

namespace braid::designer {

namespace {

constexpr int kPeriod = 6;  // one F, B and W of each of two chunks
enum Slot { F0, F1, B1, B0, W1, W0, kSlots };

int mod(int x) { return ((x % kPeriod) + kPeriod) % kPeriod; }

// The first slot after `after` whose residue is `residue`.
int next_slot(int after, int residue) { return after + 1 + mod(residue - (after + 1)); }

// Chunk-microbatches alive (from F to W) on a rank in the steady state: the largest, over the
// slots of one period, of the passes started and not yet freed.
int steady_live(const std::array<int, kSlots>& u) {
  int worst = 0;
  const int base = kPeriod * 1000;  // far into the steady state
  for (int t = base; t < base + kPeriod; ++t) {
    int live = 0;
    for (auto [f, w] : {std::pair{F0, W0}, std::pair{F1, W1}}) {
      auto floor_div = [](int a) { return a >= 0 ? a / kPeriod : -((-a + kPeriod - 1) / kPeriod); };
      live += floor_div(t - u[f]) - floor_div(t - u[w]);
    }
    worst = std::max(worst, live);
  }
  return worst;
}

// A block from rank 0's residues (F0 at 0) and the offsets; empty target if two passes of a rank
// share a slot.
Block make_block(int p, int f1, int b1, int b0, int d0, int d1, int len0) {
  std::vector<int> shift(p, 0);  // cumulative offset of the passes flowing down
  for (int i = 1; i < p; ++i) shift[i] = shift[i - 1] + (i - 1 < len0 ? d0 : d1);
  std::vector<std::array<int, kSlots>> res(p);
  for (int i = 0; i < p; ++i) {
    std::array<int, kSlots>& r = res[i];
    r[F0] = mod(shift[i]);
    r[F1] = mod(f1 - i);
    r[B1] = mod(b1 + shift[i]);
    r[B0] = mod(b0 - i);
    std::array<bool, kPeriod> used{};
    for (int x : {F0, F1, B1, B0}) {
      if (used[r[x]]) return {};
      used[r[x]] = true;
    }
    for (auto [b, w] : {std::pair{B1, W1}, std::pair{B0, W0}}) {
      int s = r[b];
      while (used[mod(s)]) ++s;
      r[w] = mod(s);
      used[r[w]] = true;
    }
  }
  std::vector<std::array<int, kSlots>> u(p);
  u[0][F0] = 0;
  for (int i = 1; i < p; ++i) u[i][F0] = u[i - 1][F0] + (i - 1 < len0 ? d0 : d1);
  u[p - 1][F1] = next_slot(u[p - 1][F0], res[p - 1][F1]);
  for (int i = p - 2; i >= 0; --i) u[i][F1] = next_slot(u[i + 1][F1], res[i][F1]);
  u[0][B1] = next_slot(u[0][F1], res[0][B1]);
  for (int i = 1; i < p; ++i) u[i][B1] = next_slot(u[i - 1][B1], res[i][B1]);
  u[p - 1][B0] = next_slot(u[p - 1][B1], res[p - 1][B0]);
  for (int i = p - 2; i >= 0; --i) u[i][B0] = next_slot(u[i + 1][B0], res[i][B0]);
  Block block;
  block.period = kPeriod;
  block.target.assign(static_cast<std::size_t>(p) * 6, 0.0);  // F, B, W of two chunks per rank
  for (int i = 0; i < p; ++i) {
    u[i][W1] = next_slot(u[i][B1], res[i][W1]);
    u[i][W0] = next_slot(u[i][B0], res[i][W0]);
    const int stage0 = i, stage1 = 2 * p - 1 - i;
    const int slots[2][3] = {{u[i][F0], u[i][B0], u[i][W0]}, {u[i][F1], u[i][B1], u[i][W1]}};
    for (int phase = 0; phase < 3; ++phase) {
      block.target[3 * stage0 + phase] = slots[0][phase];
      block.target[3 * stage1 + phase] = slots[1][phase];
    }
    block.steady_peak = std::max(block.steady_peak, steady_live(u[i]));
  }
  block.label = "F1@" + std::to_string(f1) + ",B1@" + std::to_string(b1) + ",B0@" +
                std::to_string(b0) + "," + std::to_string(d0) + "x" + std::to_string(len0) + "," +
                std::to_string(d1);
  return block;
}

}  // namespace

std::vector<Block> block_family(int p) {
  std::vector<Block> family;
  for (int f1 = 1; f1 < kPeriod; ++f1)
    for (int b1 = 1; b1 < kPeriod; ++b1)
      for (int b0 = 1; b0 < kPeriod; ++b0) {
        if (f1 == b1 || f1 == b0 || b1 == b0) continue;
        for (int d0 = 1; d0 < kPeriod; ++d0)
          for (int d1 = 1; d1 <= d0; ++d1)
            // d0 between the first len0 + 1 ranks, d1 after; d1 = d0 needs no split point.
            for (int len0 = d1 == d0 ? p : 1; len0 <= (d1 == d0 ? p : p - 2); ++len0) {
              Block b = make_block(p, f1, b1, b0, d0, d1, len0);
              if (!b.target.empty()) family.push_back(std::move(b));
            }
      }
  return family;
}

std::vector<double> block_program(const Block& block, int p, int m, int limit) {
  std::vector<double> target(block.target.size() * static_cast<size_t>(m));
  for (size_t slot = 0; slot < block.target.size(); ++slot)
    for (int mb = 0; mb < m; ++mb) target[slot * m + mb] = block.period * mb + block.target[slot];
  // Warm-up targets lie before every block target (which start at 0).
  for (int r = 0; r < p; ++r) {
    const int chunk1 = std::min({r + 1, limit / 2, m});
    const int chunk0 = std::min(limit - chunk1, m);
    const int alone = std::min(chunk0, 2 * (p - 1 - r));
    const size_t f0 = static_cast<size_t>(3 * r) * m,
                 f1 = static_cast<size_t>(3 * (2 * p - 1 - r)) * m;
    double at = -1e6;
    int n0 = 0, n1 = 0;
    while (n0 < alone) target[f0 + n0++] = at++;
    while (n0 < chunk0 || n1 < chunk1) {
      if (n0 < chunk0) target[f0 + n0++] = at++;
      if (n1 < chunk1) target[f1 + n1++] = at++;
    }
  }
  return target;
}

}  // namespace braid::designer
