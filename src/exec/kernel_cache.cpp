#include "exec/kernel_cache.h"

#include "exec/content_hash.h"
#include "exec/jit_allocator.h"
#include "exec/parallel_runtime.h"
#include "hfuse/error.h"
#include "hfuse/kernel_cache.h"
#include "hfuse/target.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

extern char **environ;

namespace hfuse::exec {

namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

// What a kernel's user context points to during a call: the loop runtime it runs on, and where the
// runtime's error handler leaves Halide's message.
struct CallContext {
    bool openmp = false;
    std::string error;
};

using do_par_for_t = int (*)(void *, int (*)(void *, int, uint8_t *), int, int, uint8_t *);

// The Halide runtime the kernels share (one per process: its symbols are global).
struct AotRuntime {
    void *library = nullptr;
    do_par_for_t default_do_par_for = nullptr;
};

AotRuntime *active_runtime = nullptr;

int dispatch_do_par_for(void *user_context, int (*task)(void *, int, uint8_t *), int min, int extent,
                        uint8_t *closure) {
    const CallContext *c = static_cast<const CallContext *>(user_context);
    if (c && c->openmp) return openmp_do_par_for_aot(user_context, task, min, extent, closure);
    return active_runtime->default_do_par_for(user_context, task, min, extent, closure);
}

void record_error(void *user_context, const char *message) {
    if (CallContext *c = static_cast<CallContext *>(user_context)) c->error += message;
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const fs::path &path, const std::string &text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw Error("cannot write " + path.string());
}

// `s` without its trailing newline and spaces (a linker's log, Halide's message).
std::string without_trailing_space(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

// Runs `argv` (found on PATH), its stderr into `log`; the exit status, or -1 if it did not start.
int run_program(const std::vector<std::string> &argv, const fs::path &log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid;
    const int started = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (started != 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Links `object` into the shared library `library`; throws an Error with the linker's complaint.
// binutils' `ld` directly, else the C compiler driver ($CC, else cc) when $CC is set or there is no
// `ld` on PATH: through the driver's own processes (gcc, collect2) a kernel took 18 ms to link, 4 ms
// through `ld` (21 resnet18 kernels, 0.37 s against 0.09 s). Halide's objects need no C runtime
// start files.
void link_shared(const fs::path &object, const fs::path &library, const fs::path &log) {
    const char *cc_env = std::getenv("CC");
    const bool cc_set = cc_env && *cc_env;
    const std::string cc = cc_set ? cc_env : "cc";
    int status = -1;
    std::string command;
    if (!cc_set) {
        command = "ld -shared";
        status = run_program(
            {"ld", "-shared", "-Bsymbolic", "--as-needed", "-o", library.string(), object.string(), "-lm"}, log);
    }
    if (status < 0) {
        command = cc + " -shared";
        status = run_program({cc, "-shared", "-o", library.string(), object.string(), "-Wl,-Bsymbolic", "-lm"}, log);
    }
    if (status != 0) {
        const std::string why = without_trailing_space(read_file(log));
        throw Error("kernel cache: cannot link a kernel with `" + command + "`" +
                    (status < 0 ? " (not found: install binutils or a C compiler, or set CC)" : ": " + why));
    }
}

// A fresh directory under dir/tmp for one writer.
fs::path temp_dir(const fs::path &dir) {
    static std::atomic<int> counter{0};
    std::ostringstream name;
    name << getpid() << "-" << std::hash<std::thread::id>()(std::this_thread::get_id()) << "-" << counter++;
    fs::path t = dir / "tmp" / name.str();
    fs::create_directories(t);
    return t;
}

// The check written beside a library: its size and content hash.
std::string check_line(const std::string &code) {
    return std::to_string(code.size()) + " " + hex_hash(code) + "\n";
}

// Whether `library` is the file `check` (check_line of it, as written beside it) describes.
bool matches_check(const fs::path &library, const fs::path &check) {
    std::error_code ec;
    if (!fs::exists(library, ec) || !fs::exists(check, ec)) return false;
    return read_file(check) == check_line(read_file(library));
}

// Loads (compiling and storing it first if need be) the Halide runtime for `target` from `dir`, and
// installs hfuse's allocator, error handler and loop dispatch in it. Once per process. The library is
// checked against runtime-ID.check (its size and hash) before it is loaded; one that fails is built
// again, and `note` says so. `built_ms`: the milliseconds building it took (0 when it was loaded).
AotRuntime &load_runtime(const fs::path &dir, const Halide::Target &target, std::string *note, double *built_ms) {
    static std::mutex mutex;
    static std::map<std::string, AotRuntime> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    const std::string id = hex_hash(target.to_string() + "|" + source_hash());
    if (auto it = loaded.find(id); it != loaded.end()) return it->second;
    const fs::path path = dir / ("runtime-" + id + ".so"), check = dir / ("runtime-" + id + ".check");
    void *library = nullptr;
    if (matches_check(path, check)) {
        library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    } else if (fs::exists(path)) {
        *note = "kernel cache: the runtime library " + path.string() + " fails its check; built again";
    }
    if (!library) {
        const auto start = std::chrono::steady_clock::now();
        const fs::path t = temp_dir(dir);
        Halide::compile_standalone_runtime((t / "runtime.o").string(), target);
        link_shared(t / "runtime.o", t / "runtime.so", t / "link.log");
        write_file(t / "runtime.check", check_line(read_file(t / "runtime.so")));
        // Each rename is atomic; a concurrent writer's identical files may win. Loaded by the path
        // just written, from this process's own copy if the check was replaced meanwhile.
        fs::rename(t / "runtime.so", path);
        fs::rename(t / "runtime.check", check);
        fs::remove_all(t);
        library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (!library) throw Error(std::string("kernel cache: cannot load the Halide runtime: ") + dlerror());
        *built_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    AotRuntime rt;
    rt.library = library;
    auto symbol = [&](const char *name) {
        void *s = dlsym(library, name);
        if (!s) throw Error(std::string("kernel cache: the Halide runtime lacks ") + name + ": " + path.string());
        return s;
    };
    rt.default_do_par_for = reinterpret_cast<do_par_for_t>(symbol("halide_default_do_par_for"));
    using set_malloc_t = void *(*)(void *(*)(void *, size_t));
    using set_free_t = void *(*)(void (*)(void *, void *));
    using set_error_t = void *(*)(void (*)(void *, const char *));
    using set_par_for_t = void *(*)(do_par_for_t);
    reinterpret_cast<set_malloc_t>(symbol("halide_set_custom_malloc"))(aot_malloc);
    reinterpret_cast<set_free_t>(symbol("halide_set_custom_free"))(aot_free);
    reinterpret_cast<set_error_t>(symbol("halide_set_error_handler"))(record_error);
    reinterpret_cast<set_par_for_t>(symbol("halide_set_custom_do_par_for"))(dispatch_do_par_for);
    AotRuntime &stored = loaded[id] = rt;
    if (!active_runtime) active_runtime = &stored;
    return stored;
}

int64_t entry_bytes(const fs::path &entry) {
    int64_t bytes = 0;
    std::error_code ec;
    for (const auto &f : fs::directory_iterator(entry, ec)) {
        if (f.is_regular_file(ec)) bytes += static_cast<int64_t>(f.file_size(ec));
    }
    return bytes;
}

}  // namespace

std::string default_kernel_cache_dir() {
    if (const char *d = std::getenv("HFUSE_CACHE_DIR"); d && *d) return d;
    if (const char *d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/hfuse";
    if (const char *d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/hfuse";
    throw Error("no kernel cache directory: set HFUSE_CACHE_DIR (or HOME), or run with --no-cache");
}

CachedKernel::~CachedKernel() {
    if (library_) dlclose(library_);
}

void CachedKernel::run(const std::vector<halide_buffer_t *> &buffers, ParallelRuntime runtime) const {
    if (static_cast<int>(buffers.size()) != num_buffers_) {
        throw Error("internal: a cached kernel takes " + std::to_string(num_buffers_) + " buffers, got " +
                    std::to_string(buffers.size()));
    }
    CallContext context;
    context.openmp = runtime == ParallelRuntime::OpenMP;
    void *user_context = &context;
    std::vector<void *> args;
    args.reserve(buffers.size() + 1);
    args.push_back(&user_context);
    for (halide_buffer_t *b : buffers) args.push_back(b);
    if (argv_(args.data()) != 0) {
        const std::string why = without_trailing_space(context.error);
        throw Error(why.empty() ? std::string("(no message)") : why);
    }
}

KernelCache::KernelCache(std::string dir, const Halide::Target &target, int64_t max_bytes)
    : dir_(std::move(dir)), target_(target.without_feature(Halide::Target::JIT)), max_bytes_(max_bytes) {}

// What an entry is stored under: the executor's key, hfuse's sources and Halide's version.
std::string KernelCache::full_key(const std::string &key) {
    return std::string("hfuse sources ") + source_hash() + "\n" + key;
}

std::string KernelCache::entry_dir(const std::string &key) const {
    return (fs::path(dir_) / "k" / hex_hash(full_key(key))).string();
}

void KernelCache::note(const std::string &text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(notes_.begin(), notes_.end(), text) == notes_.end()) notes_.push_back(text);
}

std::vector<std::string> KernelCache::notes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return notes_;
}

double KernelCache::runtime_compile_ms() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return runtime_compile_ms_;
}

std::shared_ptr<CachedKernel> KernelCache::load(const std::string &key, double *runtime_ms) {
    const fs::path entry = entry_dir(key);
    std::error_code ec;
    if (!fs::exists(entry / "meta.json", ec)) return nullptr;
    // Everything is checked before the library is mapped: a bad one could crash dlopen.
    auto reject = [&](const std::string &why) -> std::shared_ptr<CachedKernel> {
        note("kernel cache: entry " + entry.string() + " " + why + "; removed, compiling the group again");
        fs::remove_all(entry, ec);
        return nullptr;
    };
    nlohmann::json meta;
    try {
        meta = nlohmann::json::parse(read_file(entry / "meta.json"));
    } catch (const std::exception &) {
        return reject("has an unreadable meta.json");
    }
    if (!meta.is_object() || meta.value("format", 0) != kFormat || !meta.contains("key") || !meta["key"].is_string() ||
        !meta.contains("bytes") || !meta["bytes"].is_number_integer() || !meta.contains("hash") ||
        !meta["hash"].is_string() || !meta.contains("function") || !meta["function"].is_string() ||
        !meta.contains("buffers") || !meta["buffers"].is_number_integer()) {
        return reject("is not an hfuse kernel cache entry of format " + std::to_string(kFormat));
    }
    if (meta["key"].get<std::string>() != full_key(key)) return reject("holds another key (a foreign entry)");
    const fs::path library = entry / "kernel.so";
    const std::string code = read_file(library);
    if (static_cast<int64_t>(code.size()) != meta["bytes"].get<int64_t>()) {
        return reject("is truncated (" + std::to_string(code.size()) + " of " +
                      std::to_string(meta["bytes"].get<int64_t>()) + " bytes)");
    }
    if (hex_hash(code) != meta["hash"].get<std::string>()) return reject("is corrupt (its content hash differs)");
    try {
        std::string runtime_note;
        double built_ms = 0;
        const auto start = std::chrono::steady_clock::now();
        load_runtime(entry.parent_path().parent_path(), target_, &runtime_note, &built_ms);  // the kernels' symbols
        if (runtime_ms) {
            *runtime_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        }
        if (!runtime_note.empty()) note(runtime_note);
        std::lock_guard<std::mutex> lock(mutex_);
        runtime_compile_ms_ += built_ms;
    } catch (const Halide::Error &e) {
        throw Error(std::string("kernel cache: Halide failed to compile its runtime: ") + e.what());
    }
    auto kernel = std::shared_ptr<CachedKernel>(new CachedKernel);
    kernel->library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!kernel->library_) return reject(std::string("does not load: ") + dlerror());
    const std::string fn = meta["function"].get<std::string>() + "_argv";
    kernel->argv_ = reinterpret_cast<int (*)(void **)>(dlsym(kernel->library_, fn.c_str()));
    if (!kernel->argv_) return reject("lacks its function " + fn);
    kernel->num_buffers_ = meta["buffers"].get<int>();
    kernel->meta_ = std::move(meta);
    fs::last_write_time(entry / "meta.json", fs::file_time_type::clock::now(), ec);  // recently used
    std::lock_guard<std::mutex> lock(mutex_);
    used_.push_back(entry.string());
    return kernel;
}

std::shared_ptr<CachedKernel> KernelCache::store(const std::string &key, Halide::Pipeline pipeline,
                                                 const std::vector<Halide::Argument> &args, nlohmann::json meta,
                                                 double *runtime_ms) {
    const fs::path dir(dir_);
    fs::create_directories(dir / "k");
    const std::string function = "hfuse_" + hex_hash(full_key(key));
    const Halide::Target kernel_target =
        target_.with_feature(Halide::Target::NoRuntime).with_feature(Halide::Target::UserContext);
    const auto start = std::chrono::steady_clock::now();
    const fs::path t = temp_dir(dir);
    try {
        Halide::Module module = pipeline.compile_to_module(args, function, kernel_target);
        module.compile({{Halide::OutputFileType::object, (t / "kernel.o").string()}});
        link_shared(t / "kernel.o", t / "kernel.so", t / "link.log");
    } catch (...) {
        std::error_code ec;
        fs::remove_all(t, ec);
        throw;
    }
    const std::string code = read_file(t / "kernel.so");
    meta["compile_ms"] = meta.value("compile_ms", 0.0) +
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    meta["format"] = kFormat;
    meta["key"] = full_key(key);
    meta["bytes"] = static_cast<int64_t>(code.size());
    meta["hash"] = hex_hash(code);
    meta["function"] = function;
    meta["buffers"] = static_cast<int>(args.size() + pipeline.outputs().size());
    meta["hfuse_sources"] = source_hash();
    meta["halide"] = halide_version();
    meta["target"] = kernel_target.to_string();
    std::error_code ec;
    fs::remove(t / "kernel.o", ec);
    fs::remove(t / "link.log", ec);
    write_file(t / "meta.json", meta.dump(1));
    // Whole entries appear at once; if another process stored this key meanwhile, its entry stays.
    // Loading it builds the shared runtime the first time, after this kernel was compiled and linked
    // (which need no runtime): the thread that builds it does not hold up the others' compiles.
    fs::rename(t, entry_dir(key), ec);
    if (ec) fs::remove_all(t, ec);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stored_++;
    }
    std::shared_ptr<CachedKernel> kernel = load(key, runtime_ms);
    if (!kernel) throw Error("kernel cache: an entry just stored in " + entry_dir(key) + " does not load");
    return kernel;
}

Eviction KernelCache::evict() {
    Eviction done;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stored_ == 0) return done;  // loads alone do not grow the cache
    }
    const fs::path k = fs::path(dir_) / "k";
    std::error_code ec;
    if (!fs::exists(k, ec)) return done;
    done.measured = true;
    struct Entry {
        fs::path path;
        fs::file_time_type used;
        int64_t bytes;
    };
    std::vector<Entry> entries;
    int64_t total = 0;
    for (const auto &e : fs::directory_iterator(k, ec)) {
        if (!e.is_directory(ec)) continue;
        const int64_t bytes = entry_bytes(e.path());
        total += bytes;
        auto used = fs::last_write_time(e.path() / "meta.json", ec);
        if (ec) used = fs::file_time_type::min();
        entries.push_back({e.path(), used, bytes});
    }
    if (total <= max_bytes_) return done;
    std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) { return a.used < b.used; });
    std::vector<std::string> used;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        used = used_;
    }
    for (const Entry &e : entries) {
        if (total <= max_bytes_) break;
        if (std::find(used.begin(), used.end(), e.path.string()) != used.end()) continue;
        fs::remove_all(e.path, ec);
        if (ec) continue;
        total -= e.bytes;
        done.removed++;
    }
    // Writers that died left their temporary directories: remove those a day old.
    const fs::path tmp = fs::path(dir_) / "tmp";
    for (const auto &e : fs::directory_iterator(tmp, ec)) {
        auto age = fs::file_time_type::clock::now() - fs::last_write_time(e.path(), ec);
        if (!ec && age > std::chrono::hours(24)) fs::remove_all(e.path(), ec);
    }
    return done;
}

KernelCacheInfo KernelCache::info() const {
    KernelCacheInfo i;
    i.dir = dir_;
    i.max_bytes = max_bytes_;
    std::error_code ec;
    for (const auto &e : fs::directory_iterator(fs::path(dir_) / "k", ec)) {
        if (!e.is_directory(ec)) continue;
        i.entries++;
        i.bytes += entry_bytes(e.path());
    }
    i.bytes += entry_bytes(dir_);  // the runtime libraries
    return i;
}

int KernelCache::clear() {
    const int entries = info().entries;
    std::error_code ec;
    fs::remove_all(fs::path(dir_) / "k", ec);
    fs::remove_all(fs::path(dir_) / "tmp", ec);
    for (const auto &e : fs::directory_iterator(dir_, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("runtime-", 0) == 0) fs::remove(e.path(), ec);  // .so and .check
    }
    return entries;
}

}  // namespace hfuse::exec

namespace hfuse {

std::string default_kernel_cache_dir() {
    return exec::default_kernel_cache_dir();
}

KernelCacheSummary kernel_cache_summary(const std::string &dir) {
    const exec::KernelCacheInfo i = exec::KernelCache(dir, host_target()).info();
    return {i.dir, i.entries, i.bytes};
}

int clear_kernel_cache(const std::string &dir) {
    return exec::KernelCache(dir, host_target()).clear();
}

}  // namespace hfuse
