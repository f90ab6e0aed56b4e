#include "atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "braid/error.hpp"

namespace braid::detail {

namespace fs = std::filesystem;

void check_writable(const std::string& option, const std::string& path) {
  if (path.empty()) throw InputError(option, "path", "empty; give a file name");
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw InputError(option, path, "is a directory; give a file name");
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw InputError(option, path, "directory " + dir.string() + " does not exist");
  // Probe with a temporary so an existing target is never touched before the real write.
  fs::path probe = dir / (".braid-probe-" + p.filename().string());
  {
    std::ofstream f(probe);
    if (!f) throw InputError(option, path, std::string("cannot write: ") + std::strerror(errno));
  }
  fs::remove(probe, ec);
}

void write_file(const std::string& option, const std::string& path, const std::string& content) {
  fs::path p(path);
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw InputError(option, path, std::string("cannot write: ") + std::strerror(errno));
    f << content;
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw InputError(option, path, "write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) throw InputError(option, path, "cannot rename into place: " + ec.message());
}

}  // namespace braid::detail
