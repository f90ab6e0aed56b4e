// Closed forms of DESIGN §6: Table 1 of the STP paper (1F1B-I, ZB-V, STP) and the classic pipeline
// forms (GPipe and 1F1B (p-1)(F+B+W), ZB-H1 (p-1)(F+B-W)), in the symbols of uniform-cost mode:
// T_F, T_B (input gradient), T_W (weight gradient), T_AR (TP collectives of one chunk's forward,
// and again of its backward), M_a (activations of one microbatch on one chunk). The forms are the
// published ones, unchanged: where braid's simulation differs, docs/theory.md and
// tests/theory_test.cpp say by how much and why.
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "braid/theory.hpp"

namespace braid {

namespace {

ClosedForm form(std::string formula, double value) {
  ClosedForm f;
  f.known = true;
  f.formula = std::move(formula);
  f.value = value;
  return f;
}

}  // namespace

ClosedForms closed_forms(std::string_view schedule, int pp, int vpp, int microbatches,
                         const UniformCosts& c) {
  const ScheduleKind kind = parse_schedule_kind(schedule);  // InputError for an unknown name
  const double p = pp, m = microbatches, v = vpp;
  ClosedForms f;
  if (kind == ScheduleKind::GPipe) {
    f.pp_bubble = form("(p-1)(T_F+T_B+T_W)", (p - 1) * (c.tf + c.tb + c.tw));
    f.tp_bubble = form("m T_AR", m * c.tar);
    f.peak_activation = form("m M_a", m);
  } else if (kind == ScheduleKind::OneFOneB) {
    f.pp_bubble = form("(p-1)(T_F+T_B+T_W)", (p - 1) * (c.tf + c.tb + c.tw));
    f.tp_bubble = form("m T_AR", m * c.tar);
    f.peak_activation = form("p M_a", p);
  } else if (kind == ScheduleKind::ZbH1) {
    f.pp_bubble = form("(p-1)(T_F+T_B-T_W)", (p - 1) * (c.tf + c.tb - c.tw));
    f.tp_bubble = form("2m T_AR", 2 * m * c.tar);
    f.peak_activation = form("p M_a", p);
  } else if (kind == ScheduleKind::Interleaved) {
    f.pp_bubble = form("(p-1)(T_F+T_AR+T_B+T_W)", (p - 1) * (c.tf + c.tar + c.tb + c.tw));
    if (vpp == 2) {
      f.tp_bubble = form("2m T_AR", 2 * m * c.tar);
      f.peak_activation = form("(3p-2) M_a", 3 * p - 2);
    } else {
      f.tp_bubble = form("v m T_AR", v * m * c.tar);
      f.peak_activation = form("((v+1)p-2) M_a", (v + 1) * p - 2);
    }
  } else if (kind == ScheduleKind::ZbV) {
    f.pp_bubble = form("(p-1)(T_F+2T_AR+T_B-2T_W)", (p - 1) * (c.tf + 2 * c.tar + c.tb - 2 * c.tw));
    f.tp_bubble = form("4m T_AR", 4 * m * c.tar);
    f.peak_activation = form("2p M_a", 2 * p);
  } else if (kind == ScheduleKind::Stp) {
    f.pp_bubble = form("(p-1)(T_F+T_AR+T_B-T_W)", (p - 1) * (c.tf + c.tar + c.tb - c.tw));
    f.tp_bubble = form("(2p+1) T_AR", (2 * p + 1) * c.tar);
    f.peak_activation = form("3p M_a", 3 * p);
  }
  return f;
}

}  // namespace braid
