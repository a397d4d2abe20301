// SPDX-License-Identifier: MIT
// NetworkConfig: the JSON form (nlohmann_json, private to the library), reading a file and the
// validation shared by from_json() and NetworkConfigBuilder::build().
#include "ibv/net/network_config.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "detail/brief_quote.hpp"
#include "ibv/error.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kFromJson = "NetworkConfig::from_json";
constexpr std::string_view kFromFile = "NetworkConfig::from_file";
constexpr std::string_view kBuild = "NetworkConfigBuilder::build";

// A file larger than this is not a network configuration (65536 hosts take about 8 MiB).
constexpr std::size_t kMaxFileBytes = std::size_t{64} << 20;

constexpr std::array<std::string_view, 5> kHostFields = {"hostname", "port", "ibdev", "rankid",
                                                         "comment"};

// Where problems are reported: the operation, and a prefix naming the file, if any.
struct Context {
  std::string_view operation;
  std::string prefix;
};

[[noreturn]] void fail(const Context& context, std::string_view problem) {
  throw Error(ErrorKind::invalid_argument, context.operation, EINVAL,
              context.prefix + std::string(problem));
}

// A host before validation, with its position in the input for messages.
struct Entry {
  HostConfig host;
  std::size_t index = 0;
};

std::string entry_name(std::size_t index) { return "hosts[" + std::to_string(index) + "]"; }

std::string field_name(std::size_t index, std::string_view field) {
  return entry_name(index) + "." + std::string(field);
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

bool has_blank(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7F;
  });
}

// The longest host name DNS allows, and the longest device name the kernel gives
// (IB_DEVICE_NAME_MAX less its NUL): longer ones are refused before any message quotes them.
constexpr std::size_t kMaxHostname = 253;
constexpr std::size_t kMaxIbdev = 63;

void check_name(const Context& context, std::size_t index, std::string_view field,
                const std::string& value) {
  if (value.empty()) fail(context, field_name(index, field) + " is empty");
  const std::size_t most = field == "hostname" ? kMaxHostname : kMaxIbdev;
  if (value.size() > most) {
    fail(context, field_name(index, field) + " " + detail::quote_briefly(value) +
                      " is longer than " + std::to_string(most) + " bytes");
  }
  if (has_blank(value)) {
    fail(context, field_name(index, field) + " " + detail::quote_briefly(value) +
                      " contains a space or control character");
  }
}

void check_host(const Context& context, const Entry& entry) {
  check_name(context, entry.index, "hostname", entry.host.hostname);
  if (entry.host.port == 0)
    fail(context, field_name(entry.index, "port") + " is 0: it must be 1..65535");
  check_name(context, entry.index, "ibdev", entry.host.ibdev);
}

// Ranks exactly 0..N-1, each once; no two ranks on one host name and port.
void check_ranks(const Context& context, const std::vector<Entry>& sorted) {
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].host.rank == sorted[i - 1].host.rank) {
      fail(context, entry_name(sorted[i - 1].index) + " and " + entry_name(sorted[i].index) +
                        " both have rank " + std::to_string(sorted[i].host.rank) +
                        ": each rank must appear once");
    }
  }
  if (sorted.front().host.rank != 0) {
    fail(context, "the lowest rank is " + std::to_string(sorted.front().host.rank) +
                      ": ranks must start at 0");
  }
  const std::string expected = "ranks must be 0.." + std::to_string(sorted.size() - 1) + " for " +
                               std::to_string(sorted.size()) +
                               (sorted.size() == 1 ? " host" : " hosts");
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].host.rank != i) {
      fail(context, "rank " + std::to_string(i) + " is missing: " + expected + ", but " +
                        entry_name(sorted[i].index) + " has rank " +
                        std::to_string(sorted[i].host.rank));
    }
  }
}

void check_listeners(const Context& context, const std::vector<Entry>& sorted) {
  std::unordered_map<std::string, const Entry*> listeners;
  listeners.reserve(sorted.size());
  for (const Entry& entry : sorted) {
    const std::string key = lowercase(entry.host.hostname) + ":" + std::to_string(entry.host.port);
    const auto [it, inserted] = listeners.emplace(key, &entry);
    if (!inserted) {
      const Entry& first = *it->second;
      fail(context, "ranks " + std::to_string(first.host.rank) + " (" + entry_name(first.index) +
                        ") and " + std::to_string(entry.host.rank) + " (" +
                        entry_name(entry.index) + ") both use " + entry.host.hostname + ":" +
                        std::to_string(entry.host.port) + ": two ranks can not listen on one port");
    }
  }
}

std::vector<HostConfig> validate(const Context& context, std::vector<Entry> entries) {
  if (entries.empty()) fail(context, "the network has no hosts");
  if (entries.size() > NetworkConfig::kMaxHosts) {
    fail(context, "the network has " + std::to_string(entries.size()) +
                      " hosts, more than the maximum " + std::to_string(NetworkConfig::kMaxHosts));
  }
  for (const Entry& entry : entries) check_host(context, entry);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.host.rank != b.host.rank ? a.host.rank < b.host.rank : a.index < b.index;
  });
  check_ranks(context, entries);
  check_listeners(context, entries);
  std::vector<HostConfig> hosts;
  hosts.reserve(entries.size());
  for (Entry& entry : entries) hosts.push_back(std::move(entry.host));
  return hosts;
}

// --- JSON ------------------------------------------------------------------------------------

std::string kind_of(const nlohmann::json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number_float()) return "a fractional number";
  const std::string name = value.type_name();  // "null", "object", "array", "string", ...
  return (name == "object" || name == "array") ? "an " + name : "a " + name;
}

// The value of `name` in `entry`, or nullptr when absent.
const nlohmann::json* member(const nlohmann::json& entry, std::string_view name) {
  const auto it = entry.find(name);
  return it == entry.end() ? nullptr : &*it;
}

const nlohmann::json& required(const Context& context, const nlohmann::json& entry,
                               std::size_t index, std::string_view name) {
  const nlohmann::json* value = member(entry, name);
  if (value == nullptr) fail(context, field_name(index, name) + " is missing");
  return *value;
}

std::string string_field(const Context& context, const nlohmann::json& value, std::size_t index,
                         std::string_view name) {
  if (!value.is_string()) {
    fail(context, field_name(index, name) + " is " + kind_of(value) + ", not a string");
  }
  return value.get<std::string>();
}

// An integer field in min..max; `range` describes the allowed values for the message.
std::uint64_t integer_field(const Context& context, const nlohmann::json& value, std::size_t index,
                            std::string_view name, std::uint64_t min, std::uint64_t max,
                            std::string_view range) {
  const std::string field = field_name(index, name);
  if (!value.is_number_integer()) {
    const std::string shown = value.is_number_float() ? " (" + value.dump() + ")" : "";
    fail(context, field + " is " + kind_of(value) + shown + ", not an integer");
  }
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() < min ||
      value.get<std::uint64_t>() > max) {
    fail(context, field + " is " + value.dump() + ": it must be " + std::string(range));
  }
  return value.get<std::uint64_t>();
}

void reject_unknown_fields(const Context& context, const nlohmann::json& entry, std::size_t index) {
  for (const auto& [key, value] : entry.items()) {
    if (std::find(kHostFields.begin(), kHostFields.end(), key) != kHostFields.end()) continue;
    std::string problem = entry_name(index) + " has an unknown field " + detail::quote_briefly(key);
    const auto* const similar = std::find(kHostFields.begin(), kHostFields.end(), lowercase(key));
    if (similar != kHostFields.end()) {
      problem += " (did you mean \"" + std::string(*similar) + "\"?)";
    } else {
      problem += "; the fields are hostname, port, ibdev, rankid and comment";
    }
    fail(context, problem);
  }
}

Entry parse_entry(const Context& context, const nlohmann::json& entry, std::size_t index) {
  if (!entry.is_object()) {
    fail(context, entry_name(index) + " is " + kind_of(entry) + ", not an object");
  }
  reject_unknown_fields(context, entry, index);
  Entry parsed;
  parsed.index = index;
  parsed.host.hostname =
      string_field(context, required(context, entry, index, "hostname"), index, "hostname");
  parsed.host.port = static_cast<std::uint16_t>(integer_field(
      context, required(context, entry, index, "port"), index, "port", 1, 65535, "1..65535"));
  parsed.host.ibdev =
      string_field(context, required(context, entry, index, "ibdev"), index, "ibdev");
  const std::uint64_t max_rank = NetworkConfig::kMaxHosts - 1;
  parsed.host.rank = static_cast<std::uint32_t>(
      integer_field(context, required(context, entry, index, "rankid"), index, "rankid", 0,
                    max_rank, "a non-negative integer up to " + std::to_string(max_rank)));
  if (const nlohmann::json* comment = member(entry, "comment")) {
    parsed.host.comment = string_field(context, *comment, index, "comment");
  }
  return parsed;
}

std::vector<HostConfig> parse(const Context& context, std::string_view text) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    fail(context,
         "the text is not JSON: error at byte " + std::to_string(error.byte) + ": " + error.what());
  } catch (const nlohmann::json::exception& error) {
    fail(context, std::string("the text is not JSON: ") + error.what());
  }
  if (!document.is_object()) {
    fail(context, "the JSON is " + kind_of(document) + ", not an object with a \"hosts\" array");
  }
  for (const auto& [key, value] : document.items()) {
    if (key != "hosts") {
      fail(context, "the JSON has an unknown field \"" + key + R"("; the only field is "hosts")");
    }
  }
  const nlohmann::json* hosts = member(document, "hosts");
  if (hosts == nullptr) fail(context, "the JSON has no \"hosts\" field");
  if (!hosts->is_array()) fail(context, "\"hosts\" is " + kind_of(*hosts) + ", not an array");
  if (hosts->size() > NetworkConfig::kMaxHosts) {
    fail(context, "the network has " + std::to_string(hosts->size()) +
                      " hosts, more than the maximum " + std::to_string(NetworkConfig::kMaxHosts));
  }
  std::vector<Entry> entries;
  entries.reserve(hosts->size());
  for (std::size_t i = 0; i < hosts->size(); ++i)
    entries.push_back(parse_entry(context, (*hosts)[i], i));
  return validate(context, std::move(entries));
}

std::string quoted(const std::filesystem::path& path) { return "\"" + path.string() + "\""; }

std::string read_file(const std::filesystem::path& path) {
  std::error_code status;
  if (std::filesystem::is_directory(path, status)) {
    throw Error(ErrorKind::invalid_argument, kFromFile, EISDIR,
                quoted(path) + " is a directory, not a file");
  }
  errno = 0;
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    throw_verb_error(kFromFile, errno != 0 ? errno : EIO, "can not open " + quoted(path));
  }
  std::string text;
  std::array<char, 65536> buffer{};
  while (stream) {
    stream.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    text.append(buffer.data(), static_cast<std::size_t>(stream.gcount()));
    if (text.size() > kMaxFileBytes) {
      throw Error(ErrorKind::invalid_argument, kFromFile, EFBIG,
                  quoted(path) + " is larger than " + std::to_string(kMaxFileBytes >> 20) +
                      " MiB: not a network configuration");
    }
  }
  if (stream.bad()) {
    throw_verb_error(kFromFile, errno != 0 ? errno : EIO, "can not read " + quoted(path));
  }
  return text;
}

}  // namespace

NetworkConfig::NetworkConfig(std::vector<HostConfig> sorted_hosts) noexcept
    : hosts_(std::move(sorted_hosts)) {}

NetworkConfig NetworkConfig::from_json(std::string_view text) {
  return NetworkConfig(parse(Context{kFromJson, ""}, text));
}

NetworkConfig NetworkConfig::from_file(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  return NetworkConfig(parse(Context{kFromFile, quoted(path) + ": "}, text));
}

std::string NetworkConfig::to_json() const {
  nlohmann::ordered_json hosts = nlohmann::ordered_json::array();
  for (const HostConfig& host : hosts_) {
    nlohmann::ordered_json entry;
    entry["hostname"] = host.hostname;
    entry["port"] = host.port;
    entry["ibdev"] = host.ibdev;
    entry["rankid"] = host.rank;
    if (!host.comment.empty()) entry["comment"] = host.comment;
    hosts.push_back(std::move(entry));
  }
  nlohmann::ordered_json document;
  document["hosts"] = std::move(hosts);
  return document.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

const HostConfig& NetworkConfig::host(std::uint32_t rank) const {
  if (rank >= hosts_.size()) {
    throw_invalid_argument("NetworkConfig::host", "rank " + std::to_string(rank),
                           "is out of range: the world size is " + std::to_string(hosts_.size()) +
                               " (ranks 0.." + std::to_string(hosts_.size() - 1) + ")");
  }
  return hosts_[rank];
}

NetworkConfigBuilder& NetworkConfigBuilder::add_host(HostConfig host) {
  hosts_.push_back(std::move(host));
  return *this;
}

NetworkConfig NetworkConfigBuilder::build() const {
  std::vector<Entry> entries;
  entries.reserve(hosts_.size());
  for (std::size_t i = 0; i < hosts_.size(); ++i) entries.push_back(Entry{hosts_[i], i});
  return NetworkConfig(validate(Context{kBuild, ""}, std::move(entries)));
}

}  // namespace ibv::net
