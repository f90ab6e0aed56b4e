// The subcommands of the `braid` driver. Each lives in its own file (cmd_<name>.cpp) and registers
// itself on the app; main() only parses and reports errors. Commands are thin: they parse options,
// call the library and print.
#pragma once

#include <CLI/CLI.hpp>

namespace braid::cli {

// One line per command, added with the command file (cmd_<name>.cpp).
void register_info(CLI::App& app);
void register_schedule(CLI::App& app);
void register_export(CLI::App& app);
void register_simulate(CLI::App& app);
void register_compare(CLI::App& app);
void register_theory(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_sweep(CLI::App& app);
void register_search(CLI::App& app);
void register_merge(CLI::App& app);
void register_report(CLI::App& app);
void register_design(CLI::App& app);
void register_import(CLI::App& app);

}  // namespace braid::cli
