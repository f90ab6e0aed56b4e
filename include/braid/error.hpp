// InputError: the one way braid reports bad user input (configs, CSV files, command-line values).
// It carries the file (or "--option"), the field and what is allowed, and formats them as the
// single line that `main` prints before exiting with code 2. InternalError is its opposite: a bug
// in braid (a generated schedule that does not lower, an unexpected exception), exit code 1.
// Neither is for the simulator's inner loop, which never throws.
#pragma once

#include <stdexcept>
#include <string>

namespace braid {

// What `field` of an InputError holds, so that a reader (the explorer's row reasons) formats it
// without guessing from its characters.
enum class InputKind {
  Field,  // a place in the input: a YAML path ("training.seq"), a CSV cell, "size"; `where` is
          // the file, the study, or the option that overrode the field
  Value,  // the value given to the command-line option `where` ("--vpp" "3")
};

struct InputError : std::runtime_error {
  InputError(const std::string& where, const std::string& field, const std::string& problem,
             InputKind kind = InputKind::Field)
      : std::runtime_error(join(where, field, problem)),
        where(where),
        field(field),
        problem(problem),
        kind(kind) {}

  std::string where;    // file path, or the command-line option ("--tp")
  std::string field;    // YAML path ("training.seq"), CSV cell ("row 2, column 5"), or a value
  std::string problem;  // what is wrong and what is allowed
  InputKind kind;

 private:
  // "where: field: problem", an empty part left out (no stray ": ").
  static std::string join(const std::string& where, const std::string& field,
                          const std::string& problem) {
    std::string text = where;
    for (const std::string* part : {&field, &problem}) {
      if (part->empty()) continue;
      if (!text.empty()) text += ": ";
      text += *part;
    }
    return text;
  }
};

// A bug in braid, not in its input: `main` prints "internal error (a bug in braid): ..." and
// exits with code 1. `what` says what failed and on which configuration.
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace braid
