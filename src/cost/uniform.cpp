// uniform_cost_model: the symbolic costs of theory mode (DESIGN §4, §6). Every chunk is one dense
// layer; each of its four units takes a quarter of T_F, T_B and T_W; the forward All-Reduces
// (after Attn and MLP) and the backward ones (after PreMLP B and PreAttn B) take T_AR/2 each, so a
// chunk's forward and its backward each carry T_AR of collectives, split the way the real cost
// model splits them. M_a is allocated a quarter per forward unit and freed a quarter per B unit.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "units.hpp"

namespace braid {

namespace {

Collective all_reduce(double time_s) {
  Collective c;
  c.kind = CollectiveKind::AllReduce;
  c.group = Group::Tp;
  c.position = CollectivePosition::After;
  c.time_s = time_s;
  return c;
}

}  // namespace

CostModel uniform_cost_model(const UniformCosts& costs, int virtual_stages) {
  CostModel model;
  model.uniform = true;
  model.tp = 1;
  model.gpus = 1;
  model.contention = Contention{1.0, 1.0};
  model.chunks.resize(virtual_stages);
  // The dense layer kind: each unit a quarter of the chunk's work; row-parallel outputs are
  // reduced in the forward, column-parallel input gradients in the backward (DESIGN §2 table).
  const detail::LayerKind& kind = detail::dense_layer();
  const double units = static_cast<double>(kind.units.size());
  for (int k = 0; k < virtual_stages; ++k) {
    ChunkCost& chunk = model.chunks[k];
    chunk.virtual_stage = k;
    chunk.activation_bytes = costs.ma;
    LayerCost layer;
    layer.half = kind.half;
    for (const detail::UnitRole& role : kind.units) {
      UnitCost unit;
      unit.kind = role.kind;
      unit.layer = k;
      unit[Phase::F].time_s = costs.tf / units;
      unit[Phase::F].alloc_bytes = costs.ma / units;
      unit[Phase::B].time_s = costs.tb / units;
      unit[Phase::B].free_bytes = costs.ma / units;
      unit[Phase::W].time_s = costs.tw / units;
      const Phase reduced = role.tp == detail::TpSplit::Row ? Phase::F : Phase::B;
      unit[reduced].collectives.push_back(all_reduce(costs.tar / 2));
      layer.units.push_back(std::move(unit));
    }
    chunk.add_layer(layer);
  }
  return model;
}

UniformCosts parse_unit_costs(std::string_view text, const std::string& option) {
  const std::string expected = "expected tf,tb,tw,tar[,ma] (numbers, tf > 0, ma > 0, others >= 0)";
  std::vector<double> values;
  std::string item;
  const std::string s(text);
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = s.find(',', begin);
    item = s.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(v >= 0) || v > 1e300)
      throw InputError(option, s, "'" + item + "' is not a number >= 0; " + expected);
    values.push_back(v);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (values.size() != 4 && values.size() != 5) throw InputError(option, s, expected);
  if (values[0] <= 0) throw InputError(option, s, "tf must be > 0; " + expected);
  UniformCosts c;
  c.tf = values[0];
  c.tb = values[1];
  c.tw = values[2];
  c.tar = values[3];
  if (values.size() == 5) {
    if (values[4] <= 0) throw InputError(option, s, "ma must be > 0; " + expected);
    c.ma = values[4];
  }
  return c;
}

}  // namespace braid
