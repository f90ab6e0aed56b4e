// Output files written by commands: the atomic writer of src/util (atomic_file.hpp), under the
// names the commands use.
#pragma once

#include "../util/atomic_file.hpp"

namespace braid::cli {

using detail::check_writable;
using detail::OutputFiles;
using detail::write_file;

}  // namespace braid::cli
