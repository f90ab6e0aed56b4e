// braid: the command-line driver. Parses the subcommand, runs it, and turns bad input into one
// line on stderr and exit code 2.
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "braid/error.hpp"
#include "commands.hpp"
#include "distributed.hpp"

int main(int argc, char** argv) {
  // Under mpirun/srun every rank runs the same command; rank 0 alone prints and writes
  // (docs/distributed.md). Input errors are the same on every rank: all exit 2, rank 0 says why.
  braid::cli::MpiSession mpi(argc, argv);
  const bool root = braid::cli::is_root();
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
  braid::cli::register_design(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (root) std::cerr << "braid: " << e.what() << " (see braid --help)\n";
    return 2;
  } catch (const braid::InputError& e) {
    if (root) std::cerr << "braid: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Not an input error: it may have happened on this rank alone, so end the whole job rather
    // than leave the others waiting in an exchange.
    std::cerr << "braid: internal error: " << e.what() << "\n";
    braid::cli::abort_job(1);
    return 1;
  }
  return 0;
}
