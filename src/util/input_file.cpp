#include "input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "braid/error.hpp"
#include "gzip.hpp"

namespace braid::util {

std::string escape_control_bytes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
      continue;
    }
    const char* digits = "0123456789abcdef";
    out += "\\x";
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  return out;
}

std::string special_file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

namespace {

// Closes the descriptor on every way out, a throw included.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

struct Refusal {
  const std::filesystem::path& file;
  const InputFileKind& kind;
  const std::string& option;

  [[noreturn]] void operator()(const std::string& problem) const {
    if (option.empty()) throw InputError(file.string(), "", problem);
    throw InputError(option, file.string(), problem);
  }
  [[noreturn]] void not_regular(unsigned mode) const {
    const std::string what = special_file_kind(mode);
    if (S_ISDIR(mode)) (*this)("is a directory; give " + std::string(kind.noun));
    (*this)("not a regular file: " + what + "; give " + kind.noun);
  }
  [[noreturn]] void too_large(std::uint64_t bytes, bool at_least) const {
    (*this)(std::string("is ") + (at_least ? "more than " : "") + std::to_string(bytes) +
            " bytes, above the cap of " + std::to_string(kind.cap_bytes) + " bytes (" +
            std::to_string(kind.cap_bytes / kMiB) + " MiB) for " + kind.noun +
            " (docs/configuration.md)");
  }
};

}  // namespace

std::string read_input_file(const std::filesystem::path& file, const InputFileKind& kind,
                            const std::string& option) {
  const Refusal refuse{file, kind, option};
  // stat before open: opening a named pipe for reading waits for a writer.
  struct stat info = {};
  if (::stat(file.c_str(), &info) != 0)
    refuse(errno == ENOENT ? "no such file" : std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) refuse.not_regular(info.st_mode);
  // O_NONBLOCK: should the path become a pipe between the two calls, open does not wait.
  const Descriptor in{::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (in.fd < 0) refuse(std::string("cannot open: ") + std::strerror(errno));
  if (::fstat(in.fd, &info) != 0 || !S_ISREG(info.st_mode)) refuse.not_regular(info.st_mode);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > kind.cap_bytes) refuse.too_large(size, false);
  std::string text;
  text.reserve(static_cast<std::size_t>(size));
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(in.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    // A file that grows while it is read stops at the cap too.
    if (text.size() > kind.cap_bytes) refuse.too_large(kind.cap_bytes, true);
  }
  if (!detail::names_gzip(file.string())) return text;
  // A .gz name is gzip, as braid writes it (atomic_file.cpp); the cap holds on what it expands to.
  detail::Gunzipped plain = detail::gzip_decompress(text, kind.cap_bytes);
  if (!plain.problem.empty())
    refuse(plain.problem + "; a .gz name must hold gzip data of " + kind.noun + " (cap " +
           std::to_string(kind.cap_bytes / kMiB) + " MiB)");
  return std::move(plain.data);
}

}  // namespace braid::util
