// A stable 64-bit content hash (FNV-1a): the same bytes give the same hash in every process and build,
// which the kernel cache's file names and integrity checks rely on (std::hash promises neither).
// Not cryptographic: it guards against accidents (a truncated file, a collision of keys is checked
// against the full key), not against an attacker with write access to the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hfuse::exec {

inline uint64_t content_hash(const void *data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ULL) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    uint64_t h = seed;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// content_hash as 16 lowercase hex digits.
inline std::string hex_hash(const void *data, size_t bytes) {
    static const char digits[] = "0123456789abcdef";
    uint64_t h = content_hash(data, bytes);
    std::string s(16, '0');
    for (int i = 15; i >= 0; i--, h >>= 4) s[i] = digits[h & 15];
    return s;
}

inline std::string hex_hash(const std::string &s) {
    return hex_hash(s.data(), s.size());
}

}  // namespace hfuse::exec
