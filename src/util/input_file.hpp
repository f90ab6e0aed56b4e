// read_input_file: the one way braid reads a file it is given (YAML configs and profiles, schedule
// CSV and JSON, sweep shards, report data, Hugging Face config.json, Megatron argument files).
// Only a regular file is read: a named pipe would block forever, a device such as /dev/zero never
// ends, a directory has no bytes. Each kind of file has a size cap, checked on the file's size
// before reading and again on the bytes read (a file that grows while read), so no input can
// exhaust the machine's memory. Every refusal is one InputError naming the file, what it is, and
// for a size, the size and the cap. The caps are documented in docs/configuration.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace braid::util {

// What a kind of input file is called in messages ("a schedule CSV") and the most bytes braid
// reads of it.
struct InputFileKind {
  const char* noun;
  std::uint64_t cap_bytes;
};

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// The caps: each is about a hundred times the largest file of its kind braid writes or ships.
constexpr InputFileKind kYamlFile{"a YAML file", 16 * kMiB};
constexpr InputFileKind kScheduleCsvFile{"a CSV file", 64 * kMiB};
constexpr InputFileKind kScheduleJsonFile{"a schedule JSON file", 256 * kMiB};
constexpr InputFileKind kShardFile{"a shard file of braid sweep --shard", 1024 * kMiB};
constexpr InputFileKind kReportDataFile{"a file from braid simulate --report-data", 1024 * kMiB};
constexpr InputFileKind kHfConfigFile{"a Hugging Face config.json", 16 * kMiB};
constexpr InputFileKind kMegatronArgsFile{"a file of Megatron-LM arguments", 1 * kMiB};

// The bytes of `file`. Throws InputError when it cannot be opened, is not a regular file (a
// directory, named pipe, device or socket: said which), or is larger than `kind.cap_bytes`.
// `option`, when given ("--schedule-csv"), leads the message and the file is its value;
// otherwise the message starts with the file.
std::string read_input_file(const std::filesystem::path& file, const InputFileKind& kind,
                            const std::string& option = "");

// `text` from an input file, as a message quotes it: each control byte (below 0x20, and DEL) as
// \xHH. Raw, an ESC would drive the user's terminal, a NUL would cut the message where main
// prints it, a line break would split its one line. Escaping twice changes nothing.
std::string escape_control_bytes(const std::string& text);

// "a named pipe (FIFO)", "a character device", ... for a stat mode that is not a regular file;
// "" for a regular file.
std::string special_file_kind(unsigned mode);

}  // namespace braid::util
