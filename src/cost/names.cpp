#include "braid/cost_model.hpp"

namespace braid {

const char* name(UnitKind k) {
  switch (k) {
    case UnitKind::PreAttn:
      return "PreAttn";
    case UnitKind::Attn:
      return "Attn";
    case UnitKind::PreMLP:
      return "PreMLP";
    case UnitKind::MLP:
      return "MLP";
    case UnitKind::Embedding:
      return "Embedding";
    case UnitKind::Head:
      return "Head";
    case UnitKind::VisionPatch:
      return "VisionPatch";
    case UnitKind::VisionMerger:
      return "VisionMerger";
  }
  return "?";
}

const char* name(Phase p) {
  switch (p) {
    case Phase::F:
      return "F";
    case Phase::B:
      return "B";
    case Phase::W:
      return "W";
  }
  return "?";
}

}  // namespace braid
