// "Did you mean": the one rule by which every name the user types (a command, an option, a
// schedule, a model, cluster, profile or study name) is matched against the known ones when it
// names none of them. Internal (src/util/, usable by every module).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::util {

// Edits (insert, delete, replace) that turn `a` into `b`.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The known word closest to `word`, when it is close enough to be a typo (a third of its
// letters, at least 1, at most 3); "" when none is. The first of equally close words wins.
std::string closest(const std::string& word, const std::vector<std::string>& known);

// "; did you mean WORD?" for the closest known word, "" when none is close: the suffix every
// "unknown ..." message appends.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known);

}  // namespace braid::util
