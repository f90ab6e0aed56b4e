// The rank layout (rank_layout.hpp). A rank's coordinates follow Megatron-Core's
// generate_masked_orthogonal_rank_groups: with the dimensions in order (fastest first) and their
// strides the prefix products of the sizes, rank = sum of index x stride; a group of some of the
// dimensions holds the ranks that agree with `rank` in every other dimension.
#include "braid/rank_layout.hpp"

#include <algorithm>
#include <array>

#include "braid/config.hpp"

namespace braid {

namespace {

constexpr Group kGroups[] = {Group::Tp,  Group::Cp, Group::Dp,  Group::Pp,    Group::DpCp,
                             Group::Etp, Group::Ep, Group::Edp, Group::TpDpCp};

// The four dimensions a group is cut from, fastest first, and which of them the group spans.
struct Dimensions {
  std::array<int, 4> size{};
  std::array<bool, 4> in_group{};
};

Dimensions dimensions(const RankLayout& l, Group g) {
  const bool expert = g == Group::Etp || g == Group::Ep || g == Group::Edp;
  Dimensions d;
  d.size = expert ? std::array<int, 4>{l.etp, l.ep, l.edp, l.pp}
                  : std::array<int, 4>{l.tp, l.cp, l.dp, l.pp};
  switch (g) {
    case Group::Tp:
    case Group::Etp:
      d.in_group[0] = true;
      break;
    case Group::Cp:
    case Group::Ep:
      d.in_group[1] = true;
      break;
    case Group::Dp:
    case Group::Edp:
      d.in_group[2] = true;
      break;
    case Group::Pp:
      d.in_group[3] = true;
      break;
    case Group::DpCp:
      d.in_group[1] = d.in_group[2] = true;
      break;
    case Group::TpDpCp:
      d.in_group[0] = d.in_group[1] = d.in_group[2] = true;
      break;
  }
  return d;
}

}  // namespace

const char* name(Group g) {
  switch (g) {
    case Group::Tp:
      return "tp";
    case Group::Cp:
      return "cp";
    case Group::Dp:
      return "dp";
    case Group::Pp:
      return "pp";
    case Group::DpCp:
      return "dp-cp";
    case Group::Etp:
      return "etp";
    case Group::Ep:
      return "ep";
    case Group::Edp:
      return "edp";
    case Group::TpDpCp:
      return "tp-dp-cp";
  }
  return "?";
}

std::optional<Group> parse_group(std::string_view text) {
  for (Group g : kGroups)
    if (text == name(g)) return g;
  return std::nullopt;
}

int RankLayout::size(Group g) const {
  const Dimensions d = dimensions(*this, g);
  int n = 1;
  for (int i = 0; i < 4; ++i)
    if (d.in_group[i]) n *= d.size[i];
  return n;
}

std::vector<int> RankLayout::ranks(Group g, int rank) const {
  const Dimensions d = dimensions(*this, g);
  std::array<int, 4> stride{};
  int base = 0, members = 1;
  for (int i = 0, s = 1; i < 4; s *= d.size[i], ++i) {
    stride[i] = s;
    if (d.in_group[i])
      members *= d.size[i];
    else
      base += (rank / s) % d.size[i] * s;
  }
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(members));
  for (int k = 0; k < members; ++k) {
    int r = base, rest = k;
    for (int i = 0; i < 4; ++i) {
      if (!d.in_group[i]) continue;
      r += rest % d.size[i] * stride[i];
      rest /= d.size[i];
    }
    out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool RankLayout::spans_nodes(Group g) const {
  const std::vector<int> members = ranks(g, 0);
  return node_of(members.back()) != node_of(members.front());
}

int RankLayout::members_per_node(Group g) const {
  const std::vector<int> members = ranks(g, 0);
  const int node = node_of(members.front());
  return static_cast<int>(
      std::count_if(members.begin(), members.end(), [&](int r) { return node_of(r) == node; }));
}

int RankLayout::nic_users(Group g) const {
  if (!spans_nodes(g)) return 0;
  const int node = node_of(0), stage = stage_of(0);
  int users = 0;
  for (int q = node * gpus_per_node; q < (node + 1) * gpus_per_node && q < world(); ++q) {
    if (stage_of(q) != stage) continue;
    const std::vector<int> members = ranks(g, q);
    users += node_of(members.front()) != node_of(members.back());
  }
  return users;
}

RankLayout rank_layout(const Study& study) {
  const ParallelConfig& p = study.parallel;
  return make_rank_layout(study.cluster.gpus(), study.cluster.gpus_per_node, p.tp, p.cp, p.pp, p.ep,
                          p.etp);
}

int expert_tp(int tp, int etp) { return etp > 0 ? etp : tp; }

RankLayout make_rank_layout(int world, int gpus_per_node, int tp, int cp, int pp, int ep, int etp) {
  RankLayout l;
  l.gpus_per_node = gpus_per_node;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  l.dp = world / (tp * cp * pp);
  l.etp = expert_tp(tp, etp);
  l.ep = ep;
  l.edp = world / (l.etp * ep * pp);
  return l;
}

}  // namespace braid
