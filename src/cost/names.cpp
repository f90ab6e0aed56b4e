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
    case UnitKind::Router:
      return "Router";
    case UnitKind::Dispatch:
      return "Dispatch";
    case UnitKind::Experts:
      return "Experts";
    case UnitKind::Combine:
      return "Combine";
  }
  return "?";
}

const char* name(CollectivePosition p) {
  switch (p) {
    case CollectivePosition::After:
      return "after";
    case CollectivePosition::Before:
      return "before";
    case CollectivePosition::Inside:
      return "inside";
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
