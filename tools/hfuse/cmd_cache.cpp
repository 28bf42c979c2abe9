// hfuse cache info|clear: what the persistent kernel cache holds, and emptying it. The cache itself:
// ExecutorOptions::kernel_cache (on in `run`, `bench` and `explore` unless --no-cache).
#include "cli_common.h"
#include "hfuse/kernel_cache.h"

#include <cstdio>

namespace hfuse::cli {
namespace {

struct CacheOptions {
    std::string dir;
    bool json = false;
};

std::string cache_dir(const CacheOptions &o) {
    return o.dir.empty() ? default_kernel_cache_dir() : o.dir;
}

}  // namespace

Command add_cache(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "cache",
        "the persistent cache of compiled groups ($HFUSE_CACHE_DIR, else $XDG_CACHE_HOME/hfuse, else "
        "~/.cache/hfuse): info, clear");
    cmd->require_subcommand(1);
    auto o = std::make_shared<CacheOptions>();
    auto *info = cmd->add_subcommand("info", "where the cache is, its entries and their size on disk");
    auto *clear = cmd->add_subcommand("clear", "remove every entry");
    for (CLI::App *sub : {info, clear}) sub->add_option("--dir", o->dir, "the cache directory (default: as above)");
    info->add_flag("--json", o->json, "print one JSON object: dir, entries, bytes");
    return {cmd, [o, info, clear] {
                if (info->parsed()) {
                    const KernelCacheSummary s = kernel_cache_summary(cache_dir(*o));
                    if (o->json) {
                        std::printf(
                            "%s\n",
                            nlohmann::json{{"dir", s.dir}, {"entries", s.entries}, {"bytes", s.bytes}}.dump().c_str());
                    } else {
                        std::printf("kernel cache %s: %s, %.1f MiB\n", s.dir.c_str(),
                                    counted(s.entries, "compiled group").c_str(), s.bytes / 1048576.0);
                    }
                } else if (clear->parsed()) {
                    const std::string dir = cache_dir(*o);
                    const int n = clear_kernel_cache(dir);
                    std::printf("kernel cache %s: removed %s\n", dir.c_str(), counted(n, "compiled group").c_str());
                }
                return 0;
            }};
}

}  // namespace hfuse::cli
