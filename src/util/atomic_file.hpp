// Output files written whole or not at all, and only files braid may own. A regular target is
// written to a unique temporary beside it (mkstemp, so a user's `x.tmp` is never taken, and two
// runs never share one) and renamed over it at the end, so bad input, a failure or SIGINT/SIGTERM
// never leave a half-written file or a stray temporary. A symlink is followed to its real file;
// a hard-linked target is staged the same way and then copied into place, so all its names see
// the new content (docs/reliability.md).
// Standard output (`-`, /dev/stdout), standard error, a character device and a pipe are written
// in place, never renamed over; a block device or socket is refused. Internal (src/util, any
// module may use it: the CLI and braid-profile); it knows nothing of what the files hold, but
// a name ending in `.gz` is written gzip-compressed.
#pragma once

#include <string>
#include <vector>

namespace braid::detail {

// Throws InputError(option, path, reason) if `path` cannot be created or written. Touches no
// existing file: the probe is a unique temporary, removed at once.
void check_writable(const std::string& option, const std::string& path);

// The files of one command, put in place together: add() writes each to its temporary (or, for
// an in-place target, keeps its content), commit() renames them all into place and writes the
// in-place ones. A set destroyed uncommitted (an exception between two files) removes its
// temporaries, so a failed run leaves every target as it was.
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  // Throws InputError(option, path, reason) when the temporary cannot be written (ENOSPC, EIO).
  // A path ending in `.gz` gets `content` gzip-compressed (src/util/gzip.hpp).
  void add(const std::string& option, const std::string& path, const std::string& content);
  // Throws InputError naming the file that failed and those already in place.
  void commit();

 private:
  struct Staged {
    std::string option, path;  // as the user gave them, for messages
    std::string target;        // the real file (symlinks followed), or the in-place path
    std::string temp;          // empty for an in-place target
    std::string content;       // kept only for an in-place or hard-linked target
    int slot = -1;             // the signal cleanup's registration of `temp`
    bool linked = false;       // a hard-linked regular file: staged, then copied into place
  };
  void add_bytes(const std::string& option, const std::string& path, const std::string& content);
  static void copy_into_place(Staged& s, const std::string& done);
  std::vector<Staged> staged_;
};

// One file: OutputFiles with a single add() and commit().
void write_file(const std::string& option, const std::string& path, const std::string& content);

}  // namespace braid::detail
