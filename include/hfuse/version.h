// What a bug report needs first: hfuse's version and the hash of the sources it was built from,
// Halide's version, and the target hfuse compiles for by default on this machine.
#pragma once

#include <string>

namespace hfuse {

const char *hfuse_version();  // the project's version, "0.1"

// Several lines: "hfuse 0.1 (sources 3f2a...)", "Halide 14.0.0", the default target (host_target())
// and the CPU with its core count.
std::string version_report();

}  // namespace hfuse
