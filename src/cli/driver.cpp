// braid's command-line driver: parses the subcommand, runs it, and turns bad input into one line
// on std::cerr and exit code 2. The process around it (heap, MPI) is main.cpp's; the Python
// module (python/) runs the same driver in-process, so both read options through this one parser.
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "../util/did_you_mean.hpp"
#include "braid/error.hpp"
#include "commands.hpp"
#include "distributed.hpp"
#include "driver.hpp"

namespace {

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> option_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  return names;
}

// One line for a command-line error: what is wrong, a suggestion when a name looks like a typo,
// and the help of the command that was being parsed.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  const CLI::App& cmd = parsed.empty() ? app : *parsed.back();
  const std::string help =
      "see braid " + (parsed.empty() ? std::string() : cmd.get_name() + " ") + "--help";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    for (const std::string& arg : cmd.remaining()) {
      if (arg.rfind("--", 0) != 0) continue;
      const std::string name = arg.substr(0, arg.find('='));
      return "unknown option " + name + braid::util::did_you_mean(name, option_names(cmd)) + " (" +
             help + ")";
    }
    const std::vector<std::string> rest = cmd.remaining();
    if (!rest.empty())
      return "unexpected argument '" + rest.front() + "' (options start with --; " + help + ")";
  }
  return std::string(e.what()) + " (" + help + ")";
}

// `braid help [COMMAND]` and a first word that names no command, before CLI11 sees them: CLI11
// would only say "A subcommand is required". Returns the exit code, or -1 to go on parsing.
int first_word(CLI::App& app, int argc, char** argv, bool root) {
  if (argc < 2 || argv[1][0] == '-') return -1;
  const std::string word = argv[1];
  const std::vector<std::string> names = subcommand_names(app);
  if (std::find(names.begin(), names.end(), word) != names.end()) return -1;
  if (word == "help") {
    const CLI::App* sub = nullptr;
    if (argc > 2)
      for (const CLI::App* s :
           std::as_const(app).get_subcommands([](const CLI::App*) { return true; }))
        if (s->get_name() == argv[2]) sub = s;
    if (root) std::cout << (sub != nullptr ? sub->help() : app.help());
    return 0;
  }
  if (root) {
    std::cerr << "braid: unknown command '" << word << "'" << braid::util::did_you_mean(word, names)
              << " (commands: " << CLI::detail::join(names, ", ") << "; see braid --help)\n";
  }
  return 2;
}

// The commands in the order `braid --help` lists them.
struct Command {
  const char* name;
  void (*add)(CLI::App&);
};
constexpr Command kCommands[] = {
    {"info", braid::cli::register_info},           {"schedule", braid::cli::register_schedule},
    {"export", braid::cli::register_export},       {"simulate", braid::cli::register_simulate},
    {"compare", braid::cli::register_compare},     {"theory", braid::cli::register_theory},
    {"calibrate", braid::cli::register_calibrate}, {"sweep", braid::cli::register_sweep},
    {"search", braid::cli::register_search},       {"merge", braid::cli::register_merge},
    {"report", braid::cli::register_report},       {"design", braid::cli::register_design},
    {"import", braid::cli::register_import},
};

}  // namespace

namespace braid::cli {

// Only the invoked command when the first word names one: building every command's options
// (hundreds of CLI11 options and validators) took a third of a small run's start-up. Everything
// else (--help, help, --version, a typo) sees them all.
void add_commands(CLI::App& app, const std::string& first) {
  for (const Command& c : kCommands)
    if (first == c.name) {
      c.add(app);
      return;
    }
  for (const Command& c : kCommands) c.add(app);
}

int run(int argc, char** argv) {
  // Under mpirun/srun every rank runs the same command; rank 0 alone prints and writes
  // (docs/distributed.md). Input errors are the same on every rank: all exit 2, rank 0 says why.
  const bool root = is_root();
  CLI::App app{
      "braid: discrete-event simulator and schedule explorer for tensor + pipeline parallel "
      "training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "braid 0.1.0");
  add_commands(app, argc > 1 ? argv[1] : "");

  if (const int code = first_word(app, argc, argv, root); code >= 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (root) std::cerr << "braid: " << parse_error_line(app, e) << "\n";
    return 2;
  } catch (const InputError& e) {
    if (root) std::cerr << "braid: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Not an input error: it may have happened on this rank alone, so end the whole job rather
    // than leave the others waiting in an exchange.
    std::cerr << "braid: internal error (a bug in braid): " << e.what() << "\n";
    abort_job(1);
    return 1;
  }
  return 0;
}

}  // namespace braid::cli
