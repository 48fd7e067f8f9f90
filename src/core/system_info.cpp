#include "core/system_info.h"

#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace surogate {
namespace {

std::string read_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

uint64_t read_meminfo_kib(const std::string& key) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t value = 0;
  std::string unit;
  while (meminfo >> name >> value >> unit) {
    if (name == key + ":") return value;
  }
  return 0;
}

}  // namespace

HostInfo query_host_info() {
  HostInfo info;
  info.cpu_model = read_cpu_model();
  info.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  info.memory_total_bytes = read_meminfo_kib("MemTotal") * 1024;
  info.memory_available_bytes = read_meminfo_kib("MemAvailable") * 1024;
  return info;
}

}  // namespace surogate
