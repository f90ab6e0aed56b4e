// rank_static_parts: a rank's static memory by part, from its chunks' (cost_model.hpp).
#include <span>

#include "braid/cost_model.hpp"

namespace braid {

StaticParts rank_static_parts(const CostModel& cost, std::span<const int> virtual_stages) {
  StaticParts rank;
  bool embeds = false;
  double tied_copy = 0;
  for (const int k : virtual_stages) {
    const ChunkCost& chunk = cost.chunks[k];
    rank.layers_bytes += chunk.parts.layers_bytes;
    rank.embeddings_bytes += chunk.parts.embeddings_bytes;
    // Whatever the chunk holds beyond layers and embeddings (its other_bytes for a built model;
    // a uniform-cost chunk states static_bytes alone).
    rank.other_bytes +=
        chunk.static_bytes - chunk.parts.layers_bytes - chunk.parts.embeddings_bytes;
    embeds = embeds || chunk.embeds;
    tied_copy += chunk.tied_copy_bytes;
  }
  if (embeds) rank.embeddings_bytes -= tied_copy;
  return rank;
}

}  // namespace braid
