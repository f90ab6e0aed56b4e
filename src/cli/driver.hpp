// The command-line driver as a function: the `braid` executable (main.cpp) and the Python module
// (python/) both run commands through it, so an option is parsed and checked in one place.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace braid::cli {

// Registers the commands on `app`: only the one named `first` when it names one (start-up time),
// otherwise all of them.
void add_commands(CLI::App& app, const std::string& first);

// Runs one command line (argv[0] is the program's name): parses it, runs the command, which
// prints to std::cout and std::cerr, and returns the exit code: 0, 2 with one line on std::cerr
// for bad input, 1 for an internal error. The process around it (MPI, the heap) is the caller's.
int run(int argc, char** argv);

}  // namespace braid::cli
