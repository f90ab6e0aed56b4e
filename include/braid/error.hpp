// InputError: the one way braid reports bad user input (configs, CSV files, command-line values).
// It carries the file (or "--option"), the field and what is allowed, and formats them as the
// single line that `main` prints before exiting with code 2. It is not for internal bugs: those are
// assertions, and the simulator's inner loop never throws.
#pragma once

#include <stdexcept>
#include <string>

namespace braid {

struct InputError : std::runtime_error {
  InputError(const std::string& where, const std::string& field, const std::string& problem)
      : std::runtime_error(where + ": " + field + ": " + problem),
        where(where),
        field(field),
        problem(problem) {}

  std::string where;    // file path, or the command-line option ("--tp")
  std::string field;    // YAML path ("training.seq") or CSV cell ("row 2, column 5")
  std::string problem;  // what is wrong and what is allowed
};

}  // namespace braid
