// A chunk's layers as spans of its layer units (cost_model.hpp: ChunkCost, LayerCost).
#include <string>

#include "braid/cost_model.hpp"
#include "braid/error.hpp"

namespace braid {

double PhaseCost::collective_s() const {
  double t = 0;
  for (const Collective& c : collectives) t += c.time_s;
  return t;
}

int PhaseCost::compute_steps() const {
  int steps = 1;
  const Collective* first = nullptr;
  for (const Collective& c : collectives) {
    if (c.position != CollectivePosition::Inside) continue;
    if (c.steps < 2 || (steps != 1 && c.steps != steps))
      throw InternalError("a phase's collectives inside its compute run in " +
                          std::to_string(c.steps) + " steps, not 2 or more agreeing ones");
    if (first != nullptr &&
        (c.segment_begin != first->segment_begin || c.segment_end != first->segment_end ||
         c.order != first->order || c.compute_slowdown != first->compute_slowdown))
      throw InternalError(
          "a phase's collectives inside its compute cover different segments or orders");
    steps = c.steps;
    first = &c;
  }
  return steps;
}

int PhaseCost::compute_ops() const {
  const int steps = compute_steps();
  if (steps == 1) return 1;
  for (const Collective& c : collectives) {
    if (c.position != CollectivePosition::Inside) continue;
    // A pipelined reduce-scatter always has the op after the pieces: the unit's output, once the
    // last transfer is done.
    const bool tail = c.segment_end < 1 || c.order == InsideOrder::Pipeline;
    return steps + (c.segment_begin > 0 ? 1 : 0) + (tail ? 1 : 0);
  }
  return steps;
}

std::span<const UnitCost> ChunkCost::layer(int l) const {
  const LayerSpan& s = layers[static_cast<std::size_t>(l)];
  return {layer_units.data() + s.first, static_cast<std::size_t>(s.units)};
}

std::span<UnitCost> ChunkCost::layer(int l) {
  const LayerSpan& s = layers[static_cast<std::size_t>(l)];
  return {layer_units.data() + s.first, static_cast<std::size_t>(s.units)};
}

std::span<const UnitCost> ChunkCost::first_half(int l) const {
  return layer(l).first(static_cast<std::size_t>(layers[static_cast<std::size_t>(l)].half));
}

std::span<const UnitCost> ChunkCost::second_half(int l) const {
  return layer(l).subspan(static_cast<std::size_t>(layers[static_cast<std::size_t>(l)].half));
}

bool ChunkCost::has_all_to_all_cuts(int l) const {
  const LayerSpan& s = layers[static_cast<std::size_t>(l)];
  return s.dispatch > 0 && s.combine > s.dispatch;
}

std::span<const UnitCost> ChunkCost::to_dispatch(int l) const {
  return layer(l).first(static_cast<std::size_t>(layers[static_cast<std::size_t>(l)].dispatch) + 1);
}

std::span<const UnitCost> ChunkCost::between_all_to_alls(int l) const {
  const LayerSpan& s = layers[static_cast<std::size_t>(l)];
  return layer(l).subspan(static_cast<std::size_t>(s.dispatch) + 1,
                          static_cast<std::size_t>(s.combine - s.dispatch - 1));
}

std::span<const UnitCost> ChunkCost::from_combine(int l) const {
  return layer(l).subspan(static_cast<std::size_t>(layers[static_cast<std::size_t>(l)].combine));
}

void ChunkCost::add_layer(const LayerCost& layer) {
  layers.push_back({static_cast<int>(layer_units.size()), static_cast<int>(layer.units.size()),
                    layer.half, layer.dispatch, layer.combine});
  layer_units.insert(layer_units.end(), layer.units.begin(), layer.units.end());
}

}  // namespace braid
