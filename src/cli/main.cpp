// braid: the command-line driver. Parses the subcommand, runs it, and turns bad input into one
// line on stderr and exit code 2.
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "braid/error.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "braid: discrete-event simulator and schedule explorer for tensor + pipeline parallel "
      "training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "braid 0.1.0");
  braid::cli::register_info(app);
  braid::cli::register_schedule(app);
  braid::cli::register_export(app);
  braid::cli::register_simulate(app);
  braid::cli::register_compare(app);
  braid::cli::register_theory(app);
  braid::cli::register_calibrate(app);
  braid::cli::register_sweep(app);
  braid::cli::register_search(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "braid: " << e.what() << " (see braid --help)\n";
    return 2;
  } catch (const braid::InputError& e) {
    std::cerr << "braid: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "braid: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
