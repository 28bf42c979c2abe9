#include "hfuse/version.h"

#include "exec/kernel_cache.h"
#include "hfuse/target.h"

#include <thread>

#ifndef HFUSE_VERSION
#error "HFUSE_VERSION is defined by CMakeLists.txt (the project's VERSION)"
#endif

namespace hfuse {

const char *hfuse_version() {
    return HFUSE_VERSION;
}

std::string version_report() {
    return std::string("hfuse ") + hfuse_version() + " (sources " + std::string(exec::source_hash()).substr(0, 12) +
           ")\nHalide " + exec::halide_version() + "\ndefault target: " + host_target().to_string() +
           "\nCPU: " + cpu_name() + ", " + std::to_string(std::thread::hardware_concurrency()) + " logical cores\n";
}

}  // namespace hfuse
