// `braid info`: what the cost model makes of a study -- parameter counts, FLOPs, per-unit costs
// and activation memory per chunk -- as a table or JSON (field names in docs/cost-model.md).
#include <iostream>
#include <string>

#include "braid/cost_model.hpp"
#include "commands.hpp"
#include "study_options.hpp"

namespace braid::cli {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "info", "show what the cost model makes of a study: parameters, FLOPs, per-unit costs, M_a");
  cmd->footer(
      "Examples:\n"
      "  braid info --study default\n"
      "  braid info --study default --tp 4 --pp 4 --seq 4096 --json\n"
      "See docs/cost-model.md.");
  auto args = std::make_shared<StudyArgs>();
  auto json = std::make_shared<bool>(false);
  add_study_options(*cmd, *args);
  cmd->add_flag("--json", *json, "print JSON instead of tables (fields: docs/cost-model.md)");
  cmd->callback([args, json] {
    Study study = resolve_study(*args, ModelUse::Describe);
    Profile profile = resolve_profile(*args, study);
    CostModel cm = build_cost_model(study, profile, study.parallel.pp * study.parallel.vpp);
    ParameterCount pc = count_parameters(study.model);
    std::cout << (*json ? cost_model_json(study, profile, cm, pc)
                        : cost_model_table(study, profile, cm, pc));
  });
}

}  // namespace braid::cli
