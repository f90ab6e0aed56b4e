#include "atomic_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "braid/error.hpp"
#include "gzip.hpp"

namespace braid::detail {

namespace fs = std::filesystem;

namespace {

// The temporaries being written, for the SIGINT/SIGTERM handler. A signal handler can reach no
// argument, so this is braid's one mutable global; a fixed array of fixed buffers, because the
// handler may only call async-signal-safe functions (unlink, raise) and must not allocate.
enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };
struct LiveTemp {
  std::atomic<int> state{kFree};
  std::array<char, 4096> path{};
};
constexpr int kLiveTemps = 32;
std::array<LiveTemp, kLiveTemps>
    live_temps;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void remove_live_temps(int sig) {
  for (LiveTemp& t : live_temps)
    if (t.state.load() == kLive) ::unlink(t.path.data());
  // SA_RESETHAND restored the default action: the raised signal ends the process as it would
  // have without braid's handler (exit status, core dump rules) once this handler returns.
  ::raise(sig);
}

// Installed on the first temporary, and only over the default action: a signal the caller
// ignores (nohup) or handles itself stays as it was.
void install_cleanup_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction act {};
      act.sa_handler = remove_live_temps;
      act.sa_flags = SA_RESETHAND;
      sigemptyset(&act.sa_mask);
      ::sigaction(sig, &act, nullptr);
    }
  });
}

// A slot for a temporary about to be made; -1 when every slot is taken (more files in flight
// than any command writes: the file is still written, only a signal could leave it behind).
int claim_slot() {
  install_cleanup_handler();
  for (int i = 0; i < kLiveTemps; ++i) {
    int expected = kFree;
    if (live_temps[i].state.compare_exchange_strong(expected, kFilling)) return i;
  }
  return -1;
}

void release_temp(int slot) {
  if (slot >= 0) live_temps[slot].state.store(kFree);
}

std::string errno_text(int err) { return std::strerror(err); }

// Standard output or error by any of its names ("-", /dev/stdout, /proc/self/fd/1, a link to
// one, or the file stdout is redirected to): written to the descriptor itself. Renaming over
// /dev/stdout would replace the device link, or the shell's file behind it, which the shell
// still holds open.
int standard_stream(const std::string& path) {
  if (path == "-") return STDOUT_FILENO;
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) return -1;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat stream {};
    if (::fstat(fd, &stream) == 0 && stream.st_dev == target.st_dev &&
        stream.st_ino == target.st_ino)
      return fd;
  }
  return -1;
}

// The file a symlink leads to (through every link, also when its last name does not exist yet),
// so that the rename replaces the real file and the link stays a link.
fs::path real_target(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
  fs::path real = fs::canonical(p, ec);
  if (!ec) return real;
  fs::path cur = p;
  for (int hop = 0; hop < 40 && fs::is_symlink(fs::symlink_status(cur, ec)); ++hop) {
    const fs::path next = fs::read_symlink(cur, ec);
    if (ec) break;
    cur = next.is_absolute() ? next : cur.parent_path() / next;
  }
  return cur;
}

enum class TargetKind { Regular, HardLinked, InPlace };

// What writing `path` means: a regular file (existing or new) is replaced by rename; a regular
// file with other names (hard links) is staged the same way, then copied into place, since a
// rename would give this name a new file and leave the others the old content; a character
// device (a terminal, /dev/null, /dev/full) or a pipe is written in place; anything else is
// refused, since renaming over it would destroy what is not braid's.
TargetKind target_kind(const std::string& option, const std::string& path) {
  if (path.empty()) throw InputError(option, "path", "empty; give a file name");
  if (standard_stream(path) >= 0) return TargetKind::InPlace;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return TargetKind::Regular;  // a new file
  if (S_ISREG(st.st_mode)) return st.st_nlink > 1 ? TargetKind::HardLinked : TargetKind::Regular;
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return TargetKind::InPlace;
  if (S_ISDIR(st.st_mode)) throw InputError(option, path, "is a directory; give a file name");
  throw InputError(option, path,
                   std::string(S_ISBLK(st.st_mode) ? "is a block device" : "is a socket") +
                       "; braid writes regular files, standard output, character devices and "
                       "pipes");
}

// Writes all of `data` to `fd`; returns 0 or the errno of the failure.
int write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// The mode a new file gets from open(0666): mkstemp makes 0600, which a report shared with
// others should not be. An existing target keeps its own mode.
mode_t new_file_mode(const fs::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) return st.st_mode & 07777;
  const mode_t mask = ::umask(022);  // umask has no read-only form; restored at once
  ::umask(mask);
  return 0666 & ~mask;
}

// A unique temporary beside `target`, open for writing and registered for the signal cleanup.
struct Temp {
  std::string path;
  int fd = -1;
  int slot = -1;
};

Temp make_temp(const std::string& option, const std::string& shown, const fs::path& target) {
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = (dir / ("." + target.filename().string() + ".braid-XXXXXX")).string();
  Temp t;
  t.slot = name.size() < live_temps[0].path.size() ? claim_slot() : -1;
  // The cleanup signals wait while the file is made and registered, so none comes between the
  // two and leaves a temporary the handler does not know.
  sigset_t cleanup_signals;
  sigset_t before;
  sigemptyset(&cleanup_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&cleanup_signals, sig);
  ::pthread_sigmask(SIG_BLOCK, &cleanup_signals, &before);
  t.fd = ::mkstemp(name.data());
  const int err = errno;
  if (t.fd >= 0 && t.slot >= 0) {
    std::memcpy(live_temps[t.slot].path.data(), name.c_str(), name.size() + 1);
    live_temps[t.slot].state.store(kLive);
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (t.fd < 0) {
    release_temp(t.slot);
    throw InputError(option, shown, "cannot write: " + errno_text(err));
  }
  t.path = name;
  return t;
}

void discard(const std::string& temp, int slot) {
  if (!temp.empty()) ::unlink(temp.c_str());
  release_temp(slot);
}

// Writes, syncs and closes the temporary; on any failure removes it and says why.
void fill_temp(const Temp& t, const std::string& option, const std::string& shown,
               const fs::path& target, const std::string& content) {
  int err = ::fchmod(t.fd, new_file_mode(target)) != 0 ? errno : 0;
  if (!err) err = write_all(t.fd, content);
  if (!err && ::fsync(t.fd) != 0) err = errno;
  if (::close(t.fd) != 0 && !err) err = errno;
  if (!err) return;
  discard(t.path, t.slot);
  throw InputError(option, shown, "cannot write: " + errno_text(err));
}

// Writes `content` to an in-place target; returns 0 or the errno of the failure. A regular file
// (hard-linked) is truncated first and synced, a device or pipe only written.
int write_in_place(const std::string& path, const std::string& content) {
  int fd = standard_stream(path);
  const bool own = fd < 0;
  struct stat st {};
  const bool regular = own && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (own) fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | (regular ? O_TRUNC : 0));
  if (fd < 0) return errno;
  if (!own) std::fflush(fd == STDOUT_FILENO ? stdout : stderr);  // what was printed comes first
  int err = write_all(fd, content);
  if (!err && regular && ::fsync(fd) != 0) err = errno;
  if (own && ::close(fd) != 0 && !err) err = errno;
  return err;
}

}  // namespace

void check_writable(const std::string& option, const std::string& path) {
  if (target_kind(option, path) == TargetKind::InPlace) {
    const int fd = standard_stream(path);
    if (fd < 0 && ::access(path.c_str(), W_OK) != 0)
      throw InputError(option, path, "cannot write: " + errno_text(errno));
    return;
  }
  const fs::path target = real_target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(option, path, "directory " + dir.string() + " does not exist");
  const Temp probe = make_temp(option, path, target);
  ::close(probe.fd);
  discard(probe.path, probe.slot);
}

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) discard(s.temp, s.slot);
}

void OutputFiles::add(const std::string& option, const std::string& path,
                      const std::string& content) {
  // A `.gz` name gets gzip bytes, compressed whole in memory, so everything below (temporary,
  // rename, hard links, in-place targets) treats them as any other content.
  if (names_gzip(path)) {
    add_bytes(option, path, gzip_compress(content));
    return;
  }
  add_bytes(option, path, content);
}

void OutputFiles::add_bytes(const std::string& option, const std::string& path,
                            const std::string& content) {
  Staged s{option, path, path, "", "", -1};
  const TargetKind kind = target_kind(option, path);
  if (kind != TargetKind::Regular) s.content = content;
  s.linked = kind == TargetKind::HardLinked;
  if (kind == TargetKind::InPlace) {
    staged_.push_back(std::move(s));
    return;
  }
  s.target = real_target(path).string();
  // A hard-linked target is staged too: the full temporary proves the space is there before
  // the file every name shares is truncated.
  const Temp t = make_temp(option, path, s.target);
  fill_temp(t, option, path, s.target, content);
  s.temp = t.path;
  s.slot = t.slot;
  staged_.push_back(std::move(s));
}

// The hard-linked target gets the staged content in place, so every name sees it; the temporary
// goes once the copy is synced. If the copy fails midway the temporary is kept and named: it is
// the only whole copy left.
void OutputFiles::copy_into_place(Staged& s, const std::string& done) {
  if (const int err = write_in_place(s.target, s.content)) {
    release_temp(s.slot);  // the signal cleanup must not remove it now
    s.slot = -1;
    const std::string kept = s.temp;
    s.temp.clear();
    throw InputError(s.option, s.path,
                     "cannot write the hard-linked file in place: " + errno_text(err) +
                         "; the whole output is in " + kept +
                         (done.empty() ? "" : "; already written:" + done));
  }
  discard(s.temp, s.slot);
  s.temp.clear();
  s.slot = -1;
}

void OutputFiles::commit() {
  std::string done;
  for (Staged& s : staged_) {
    if (s.temp.empty()) {
      if (const int err = write_in_place(s.path, s.content))
        throw InputError(s.option, s.path, "cannot write: " + errno_text(err));
    } else if (s.linked) {
      copy_into_place(s, done);
    } else if (std::rename(s.temp.c_str(), s.target.c_str()) != 0) {
      const int err = errno;
      throw InputError(s.option, s.path,
                       "cannot rename into place: " + errno_text(err) +
                           (done.empty() ? "" : "; already written:" + done));
    }
    release_temp(s.slot);
    s.temp.clear();
    s.slot = -1;
    done += " " + s.path;
  }
  staged_.clear();
}

void write_file(const std::string& option, const std::string& path, const std::string& content) {
  OutputFiles files;
  files.add(option, path, content);
  files.commit();
}

}  // namespace braid::detail
