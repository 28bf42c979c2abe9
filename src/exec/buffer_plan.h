// Lifetime-based storage for intermediates: values passed between groups share one arena, and a value
// may take the bytes of values that are dead by the time it is written.
//
// Each value lives from the group that writes it (first_use) to the last group that reads it
// (last_use), inclusive. Two values whose lifetimes overlap never overlap in memory; in particular a
// group's outputs never share storage with its inputs, so no group writes a buffer it also reads.
//
//   std::vector<BufferRequest> r = {{"a", 400, 0, 1}, {"b", 400, 1, 2}, {"c", 400, 2, 3}};
//   BufferPlan p = plan_buffers(r);   // "a" and "c" share offset 0, "b" is at 448: arena_bytes 896
//
// The layout is greedy by size (largest first, each at the best-fitting gap among the values alive at
// the same time), as TensorFlow Lite's arena planner does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hfuse::exec {

struct BufferRequest {
    std::string value;
    int64_t bytes = 0;
    int first_use = 0;  // index of the group that writes it
    int last_use = 0;   // index of the last group that reads it (>= first_use)
};

struct BufferPlan {
    std::map<std::string, int64_t> offsets;  // byte offset of each value, a multiple of the alignment
    int64_t arena_bytes = 0;                 // bytes the arena needs
};

// Lays out `requests` (distinct values) in one arena; every offset is a multiple of `alignment` bytes.
BufferPlan plan_buffers(const std::vector<BufferRequest> &requests, int64_t alignment = 64);

}  // namespace hfuse::exec
