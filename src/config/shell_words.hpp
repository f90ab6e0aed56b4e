// The commands of a shell launch script as bash would run them: continuation lines joined,
// comments dropped, quotes removed, variables ($X, ${X}, ${X:-default}), bash arrays (NAME=( ...
// ), ${NAME[@]}) and integer arithmetic ($((...))) expanded; command substitutions $(...) and
// script arguments ($1) expand to nothing (nothing is run). Enough for Megatron-LM's launch
// scripts, not a shell. Private to src/config.
#pragma once

#include <string>
#include <vector>

namespace braid::detail {

struct ShellScript {
  std::vector<std::vector<std::string>> commands;  // each command's words, in order
};

// Throws InputError(where, "", ...) for an unclosed quote, array or expansion.
ShellScript shell_commands(const std::string& text, const std::string& where);

}  // namespace braid::detail
