// The reading half of the verbs-leak check (resource_check.hpp): `rdma -j resource show` run and
// parsed. Compiled on its own, not in a unity batch: GCC's -Wnull-dereference misfires on
// nlohmann::json's iterators when this is inlined into a large translation unit.
#include "resource_check.hpp"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ibv::test {
namespace {

/// What `command` prints on stdout and stderr, or nullopt if it can not be started.
std::optional<std::string> command_output(const std::string& command) {
  const std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return std::nullopt;
  std::string text;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) {
    text.append(buffer.data(), n);
  }
  return text;
}

/// The start of a command's output for a message: at most 200 characters, no trailing newline.
std::string output_excerpt(const std::string& text) {
  std::string excerpt = text.substr(0, 200);
  while (!excerpt.empty() && std::isspace(static_cast<unsigned char>(excerpt.back())) != 0) {
    excerpt.pop_back();
  }
  return excerpt;
}

/// The string member `key` of a JSON object ("?" if it has none).
std::string string_member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ref<const std::string&>()
                                               : std::string("?");
}

}  // namespace

/// Every process's (and the kernel's) objects per device and kind, as `rdma -j resource show`
/// sums them up: one quick look, or nullopt (with `why`) if it can not be read.
std::optional<ResourceCounts> total_resource_counts(std::string& why) {
  const auto text = command_output("rdma -j resource show 2>&1");
  const auto list = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!list.is_array()) {
    why = text ? "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text)
               : "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  ResourceCounts counts;
  for (const auto& device : list) {
    if (!device.is_object()) continue;
    for (const auto& [kind, value] : device.items()) {
      if (kind != "ifindex" && kind != "ifname" && value.is_number_integer()) {
        counts[{string_member(device, "ifname"), kind}] = value.get<long long>();
      }
    }
  }
  return counts;
}

/// This process's objects as `rdma -j resource show KIND` lists them (only those it owns:
/// kernel objects and other processes' do not count), or nullopt (with `why`) if they can not
/// be read.
std::optional<ResourceCounts> own_resource_counts(std::string& why) {
  std::string command = "for kind in";
  for (const char* kind : kResourceKinds) command += std::string(" ") + kind;
  command += "; do rdma -j resource show $kind || echo failed; echo; done 2>&1";
  const auto text = command_output(command);
  if (!text) {
    why = "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  const long long self = ::getpid();
  ResourceCounts counts;
  std::istringstream lines(*text);
  std::string line;
  std::size_t kind = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto list = nlohmann::json::parse(line, nullptr, false);
    if (!list.is_array() || kind >= kResourceKinds.size()) {
      why = "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text);
      return std::nullopt;
    }
    for (const auto& object : list) {
      if (!object.is_object()) continue;
      const auto pid = object.find("pid");
      if (pid != object.end() && pid->is_number_integer() && pid->get<long long>() == self) {
        ++counts[{string_member(object, "ifname"), kResourceKinds[kind]}];
      }
    }
    ++kind;
  }
  if (kind != kResourceKinds.size()) {
    why = "'rdma -j resource show' printed " + std::to_string(kind) + " lists, not " +
          std::to_string(kResourceKinds.size()) + ": " + output_excerpt(*text);
    return std::nullopt;
  }
  return counts;
}
}  // namespace ibv::test
