// Output files (src/util/atomic_file.cpp, issue 41 findings 5 and 8): braid replaces only regular
// files, through a unique temporary that a signal or a failure removes; a symlink keeps being a
// link, a hard-linked file keeps its other names, a user's `x.tmp` is never taken, standard output,
// character devices and pipes are written in place and their write errors reported. The device
// nodes live in a tmpfs of a private mount namespace (`unshare -m`), so the machine's /dev is never
// touched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>
#include <zlib.h>

#include "../src/util/atomic_file.hpp"
#include "../src/util/format.hpp"
#include "../src/util/gzip.hpp"
#include "braid/error.hpp"
#include "cli_run.hpp"

namespace fs = std::filesystem;
using braid::test::CliRun;
using braid::test::run_braid;
using braid::test::run_program;
using braid::test::slurp;

namespace {

// A fresh, empty directory for one scenario, removed with it.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::temp_directory_path() /
             ("braid_output_files." + std::to_string(::getpid()) + "." + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

void put(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

// The names in `dir`, sorted, one per line.
std::string listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& n : names) text += n + "\n";
  return text;
}

// Runs `script` (saved in `dir`) with sh from the source root: $1 is the braid binary, $2 `dir`.
CliRun run_script(const fs::path& dir, const std::string& script, const std::string& prefix = "") {
  put(dir / "script.sh", script);
  return run_program(
      "sh", "'" + (dir / "script.sh").string() + "' '" + BRAID_EXE + "' '" + dir.string() + "'",
      fs::path(BRAID_SOURCE_DIR), prefix);
}

const std::string kSimulate = "simulate --study default --schedule 1f1b";

// The data of a gzip file, decompressed by zlib itself (not braid's code); throws on anything that
// is not one whole gzip member.
std::string gunzip(const std::string& gz) {
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);  // 15 + 16: a gzip wrapper only
  std::string out;
  std::array<char, 1 << 16> buf{};
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - zs.avail_out);
  }
  const bool whole = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  if (!whole)
    throw std::runtime_error("not one whole gzip member: zlib says " + std::to_string(rc));
  return out;
}

// The first 10 bytes of a gzip member, as hex: magic 1f 8b, method 08 (deflate), flags 00 (no
// name, no comment), mtime 00000000, extra flags 00 (default level), OS 03 (Unix).
std::string gzip_header(const std::string& gz) {
  std::string hex;
  for (std::size_t i = 0; i < 10 && i < gz.size(); ++i)
    hex += braid::util::format("%02x", static_cast<unsigned char>(gz[i]));
  return hex;
}

}  // namespace

TEST_CASE("a user's x.tmp beside the target is kept, and no temporary is left", "[output_files]") {
  ScratchDir dir("usertmp");
  put(dir.path / "keep.json.tmp", "mine\n");
  const CliRun r = run_braid(kSimulate + " --trace '" + (dir.path / "keep.json").string() + "'");
  REQUIRE(r.exit_code == 0);
  CHECK(slurp(dir.path / "keep.json.tmp") == "mine\n");
  CHECK(slurp(dir.path / "keep.json").rfind("{\"traceEvents\"", 0) == 0);
  CHECK(listing(dir.path) == "keep.json\nkeep.json.tmp\n");
}

TEST_CASE("gzip_compress: an empty file is the 20-byte gzip member with no name and mtime 0",
          "[output_files][gzip]") {
  const std::string gz = braid::detail::gzip_compress("");
  // Header (10 bytes), the empty final block 03 00, CRC32 0 and length 0 (4 bytes each).
  CHECK(gz.size() == 20);
  CHECK(gzip_header(gz) == "1f8b0800000000000003");
  CHECK(gunzip(gz).empty());
  CHECK(gunzip(braid::detail::gzip_compress("braid\n")) == "braid\n");
  CHECK(braid::detail::names_gzip("t.json.gz"));
  CHECK_FALSE(braid::detail::names_gzip("t.json"));
  CHECK_FALSE(braid::detail::names_gzip("t.gzip"));
}

TEST_CASE("a .gz trace or page is gzip of exactly the plain file's bytes, the same every run",
          "[output_files][gzip]") {
  ScratchDir dir("gzip");
  const auto at = [&](const std::string& name) { return "'" + (dir.path / name).string() + "'"; };
  REQUIRE(run_braid(kSimulate + " --trace " + at("t.json") + " --html " + at("r.html")).exit_code ==
          0);
  REQUIRE(run_braid(kSimulate + " --trace " + at("t.json.gz") + " --html " + at("r.html.gz"))
              .exit_code == 0);
  const std::string trace_gz = slurp(dir.path / "t.json.gz");
  const std::string html_gz = slurp(dir.path / "r.html.gz");
  CHECK(gzip_header(trace_gz) == "1f8b0800000000000003");
  CHECK(gzip_header(html_gz) == "1f8b0800000000000003");
  CHECK(gunzip(trace_gz) == slurp(dir.path / "t.json"));
  CHECK(gunzip(html_gz) == slurp(dir.path / "r.html"));
  CHECK(trace_gz.size() * 5 < slurp(dir.path / "t.json").size());  // compressed, not renamed

  // Again into other names: byte for byte the same files.
  REQUIRE(run_braid(kSimulate + " --trace " + at("t2.json.gz") + " --html " + at("r2.html.gz"))
              .exit_code == 0);
  CHECK(slurp(dir.path / "t2.json.gz") == trace_gz);
  CHECK(slurp(dir.path / "r2.html.gz") == html_gz);
  CHECK(listing(dir.path) ==
        "r.html\nr.html.gz\nr2.html.gz\nt.json\nt.json.gz\nt2.json.gz\n");  // no temporary
}

TEST_CASE("a hard-linked .gz target gets the gzip bytes under every name", "[output_files][gzip]") {
  ScratchDir dir("gzip_link");
  put(dir.path / "a.csv.gz", "old\n");
  fs::create_hard_link(dir.path / "a.csv.gz", dir.path / "b.csv.gz");
  braid::detail::OutputFiles files;
  files.add("--csv", (dir.path / "a.csv.gz").string(), "x,y\n1,2\n");
  files.commit();
  CHECK(gunzip(slurp(dir.path / "b.csv.gz")) == "x,y\n1,2\n");
  CHECK(listing(dir.path) == "a.csv.gz\nb.csv.gz\n");
}

TEST_CASE("a symlinked target stays a link and its real file gets the content", "[output_files]") {
  ScratchDir dir("symlink");
  fs::create_directories(dir.path / "real");
  put(dir.path / "real" / "trace.json", "old\n");
  fs::create_symlink(dir.path / "real" / "trace.json", dir.path / "link.json");
  const CliRun r = run_braid(kSimulate + " --trace '" + (dir.path / "link.json").string() + "'");
  REQUIRE(r.exit_code == 0);
  CHECK(fs::is_symlink(dir.path / "link.json"));
  CHECK(slurp(dir.path / "real" / "trace.json").rfind("{\"traceEvents\"", 0) == 0);
  CHECK(listing(dir.path / "real") == "trace.json\n");
}

TEST_CASE("a hard-linked target keeps its links: every name sees the new content",
          "[output_files]") {
  ScratchDir dir("hardlink");
  put(dir.path / "trace.json", "old content, longer than nothing\n");
  fs::create_hard_link(dir.path / "trace.json", dir.path / "other-name.json");
  const CliRun r = run_braid(kSimulate + " --trace '" + (dir.path / "trace.json").string() + "'");
  REQUIRE(r.exit_code == 0);
  CHECK(fs::hard_link_count(dir.path / "trace.json") == 2);
  CHECK(fs::equivalent(dir.path / "trace.json", dir.path / "other-name.json"));
  const std::string written = slurp(dir.path / "other-name.json");
  CHECK(written.rfind("{\"traceEvents\"", 0) == 0);
  CHECK(written.find("old content") == std::string::npos);      // truncated, not overwritten
  CHECK(listing(dir.path) == "other-name.json\ntrace.json\n");  // no temporary left
}

TEST_CASE("`-` writes to standard output and creates no file", "[output_files]") {
  ScratchDir dir("dash");
  const CliRun r = run_braid(kSimulate + " --trace -", dir.path);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("{\"traceEvents\"", 0) == 0);  // the trace, then the report
  CHECK(r.out.find("\niteration time") != std::string::npos);
  CHECK(listing(dir.path).empty());
}

TEST_CASE("a set of outputs destroyed uncommitted leaves the targets as they were",
          "[output_files]") {
  ScratchDir dir("uncommitted");
  put(dir.path / "a.csv", "old a\n");
  {
    braid::detail::OutputFiles files;
    files.add("--csv", (dir.path / "a.csv").string(), "new a\n");
    files.add("--svg", (dir.path / "b.svg").string(), "new b\n");
    CHECK(std::count_if(fs::directory_iterator(dir.path), fs::directory_iterator{},
                        [](const auto&) { return true; }) == 3);  // a.csv and two temporaries
  }
  CHECK(listing(dir.path) == "a.csv\n");
  CHECK(slurp(dir.path / "a.csv") == "old a\n");
  braid::detail::OutputFiles files;
  files.add("--csv", (dir.path / "a.csv").string(), "new a\n");
  files.add("--svg", (dir.path / "b.svg").string(), "new b\n");
  files.commit();
  CHECK(listing(dir.path) == "a.csv\nb.svg\n");
  CHECK(slurp(dir.path / "b.svg") == "new b\n");
}

// The device nodes: /dev/full's and /dev/null's numbers (c 1 7, c 1 3), a loop device's (b 7 0),
// a FIFO and a link to /proc/self/fd/1, made in a tmpfs that only this namespace sees.
TEST_CASE("devices, pipes and standard output are written in place, never renamed over",
          "[output_files][unshare]") {
  if (run_program("unshare", "-m true").exit_code != 0) {
    WARN("skipped: unshare -m is not permitted here (CI runs as root and permits it)");
    return;
  }
  ScratchDir dir("devices");
  const std::string script = R"sh(B=$1; D=$2/mnt; mkdir -p "$D"
mount -t tmpfs none "$D" || exit 99
mknod "$D/full" c 1 7; mknod "$D/null" c 1 3; mknod "$D/blk" b 7 0; mkfifo "$D/fifo"
ln -s /proc/self/fd/1 "$D/stdout"
S="simulate --study default --schedule 1f1b"
"$B" $S --trace "$D/full" >/dev/null 2>"$D/full.err"; echo "full rc=$?"
test -c "$D/full" && echo "full is a device"
"$B" $S --trace "$D/null" >/dev/null 2>&1; echo "null rc=$?"
test -c "$D/null" && echo "null is a device"
"$B" $S --trace "$D/blk" >/dev/null 2>"$D/blk.err"; echo "blk rc=$?"
test -b "$D/blk" && echo "blk is a device"
"$B" $S --trace "$D/stdout" >"$D/out.txt" 2>&1; echo "stdout rc=$?"
test -L "$D/stdout" && echo "stdout is a link"
grep -c traceEvents "$D/out.txt"
cat "$D/fifo" >"$D/got.txt" & "$B" $S --trace "$D/fifo" >/dev/null 2>&1; echo "fifo rc=$?"; wait
test -p "$D/fifo" && echo "fifo is a pipe"
grep -c traceEvents "$D/got.txt"
cat "$D/full.err" "$D/blk.err"
ls -A "$D" | tr '\n' ' '; echo
umount "$D"
)sh";
  const CliRun r = run_script(dir.path, script, "unshare -m ");
  if (r.exit_code == 99) {
    WARN("skipped: cannot mount a tmpfs in the namespace: " + r.err);
    return;
  }
  CHECK(r.out ==
        "full rc=2\nfull is a device\n"
        "null rc=0\nnull is a device\n"
        "blk rc=2\nblk is a device\n"
        "stdout rc=0\nstdout is a link\n1\n"
        "fifo rc=0\nfifo is a pipe\n1\n"
        "braid: --trace: " +
            (dir.path / "mnt" / "full").string() +
            ": cannot write: No space left on device\n"
            "braid: --trace: " +
            (dir.path / "mnt" / "blk").string() +
            ": is a block device; braid writes regular files, standard output, character "
            "devices and pipes\n"
            "blk blk.err fifo full full.err got.txt null out.txt stdout \n");
}

TEST_CASE("SIGTERM while a large trace is written leaves no temporary and no target",
          "[output_files][signal]") {
  ScratchDir dir("sigterm");
  // The 1024-microbatch trace is about 60 MB: the temporary lives long enough to be seen.
  const std::string script = R"sh(B=$1; D=$2/out; mkdir "$D"
"$B" simulate --study default --schedule 1f1b --microbatches 1024 --trace "$D/t.json" \
  >/dev/null 2>&1 & pid=$!
while [ -z "$(ls -A "$D")" ] && kill -0 $pid 2>/dev/null; do :; done
kill -TERM $pid; wait $pid; echo "rc=$?"
ls -A "$D" | tr '\n' ' '; echo
)sh";
  const CliRun r = run_script(dir.path, script);
  CHECK(r.out == "rc=143\n\n");  // 128 + SIGTERM: the handler re-raised it
}

TEST_CASE("a .gz input is read back: a gzipped shard merges as the plain one, a bomb is refused",
          "[output_files][gzip]") {
  ScratchDir dir("gunzip");
  const auto at = [&](const std::string& name) { return "'" + (dir.path / name).string() + "'"; };
  const std::string sweep = "sweep --study default --tp 4,8 --schedules 1f1b --jobs 1 --shard 1/1";
  REQUIRE(run_braid(sweep + " --shard-out " + at("p.bin")).exit_code == 0);
  REQUIRE(run_braid(sweep + " --shard-out " + at("p.bin.gz")).exit_code == 0);
  CHECK(slurp(dir.path / "p.bin.gz").substr(0, 2) == "\x1f\x8b");
  const CliRun plain = run_braid("merge " + at("p.bin") + " --csv " + at("plain.csv"));
  const CliRun gz = run_braid("merge " + at("p.bin.gz") + " --csv " + at("gz.csv"));
  REQUIRE(plain.exit_code == 0);
  REQUIRE(gz.exit_code == 0);
  CHECK(gz.out == plain.out);
  CHECK(slurp(dir.path / "gz.csv") == slurp(dir.path / "plain.csv"));

  // Two members, as `cat a.gz b.gz` makes: one stream of both, as gzip -d reads it.
  const std::string both =
      braid::detail::gzip_compress("one ") + braid::detail::gzip_compress("two");
  CHECK(braid::detail::gzip_decompress(both, 100).data == "one two");
  CHECK(braid::detail::gzip_decompress(both, 100).problem.empty());
  // The cap holds on the bytes it expands to: 1 MiB + 1 of zeros is about 1 KiB of gzip.
  const std::string bomb = braid::detail::gzip_compress(std::string((1 << 20) + 1, '\0'));
  CHECK(bomb.size() < 2048);
  CHECK(braid::detail::gzip_decompress(bomb, 1 << 20).problem ==
        "decompresses to more than 1048576 bytes");
  CHECK(braid::detail::gzip_decompress(bomb, (1 << 20) + 1).data.size() == (1 << 20) + 1);
  CHECK(braid::detail::gzip_decompress(bomb.substr(0, bomb.size() - 9), 1 << 21).problem ==
        "gzip data ends early (truncated)");
  CHECK_THAT(braid::detail::gzip_decompress("plain text", 100).problem,
             Catch::StartsWith("not gzip data ("));
  CHECK(braid::detail::gzip_decompress("", 100).problem == "gzip data ends early (truncated)");

  // Plain bytes under a .gz name: one line naming the file and what it must hold.
  std::ofstream(dir.path / "fake.bin.gz") << "not gzip";
  const CliRun fake = run_braid("merge " + at("fake.bin.gz"));
  CHECK(fake.exit_code == 2);
  CHECK(braid::test::count_lines(fake.err) == 1);
  CHECK_THAT(fake.err, Catch::Contains("fake.bin.gz: not gzip data (") &&
                           Catch::Contains("a .gz name must hold gzip data of a shard file"));
}
