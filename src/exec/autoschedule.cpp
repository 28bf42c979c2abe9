#include "exec/autoschedule.h"

#include "hfuse/error.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

namespace hfuse {

const char *to_string(ScheduleSource s) {
    switch (s) {
    case ScheduleSource::Templates: return "templates";
    case ScheduleSource::Mullapudi2016: return "mullapudi2016";
    case ScheduleSource::Adams2019: return "adams2019";
    case ScheduleSource::Li2018: return "li2018";
    }
    return "?";
}

ScheduleSource parse_schedule_source(const std::string &name) {
    for (ScheduleSource s : {ScheduleSource::Templates, ScheduleSource::Mullapudi2016, ScheduleSource::Adams2019,
                             ScheduleSource::Li2018}) {
        if (name == to_string(s)) return s;
    }
    throw Error("unknown schedule source '" + name + "': expected templates, mullapudi2016, adams2019 or li2018");
}

}  // namespace hfuse

namespace hfuse::exec {
namespace {

// Paths the build recorded from the Halide CMake package (CMakeLists.txt), empty when it had none.
#ifndef HFUSE_AUTOSCHEDULER_MULLAPUDI2016
#define HFUSE_AUTOSCHEDULER_MULLAPUDI2016 ""
#endif
#ifndef HFUSE_AUTOSCHEDULER_ADAMS2019
#define HFUSE_AUTOSCHEDULER_ADAMS2019 ""
#endif
#ifndef HFUSE_AUTOSCHEDULER_LI2018
#define HFUSE_AUTOSCHEDULER_LI2018 ""
#endif

const char *configured_path(ScheduleSource s) {
    switch (s) {
    case ScheduleSource::Mullapudi2016: return HFUSE_AUTOSCHEDULER_MULLAPUDI2016;
    case ScheduleSource::Adams2019: return HFUSE_AUTOSCHEDULER_ADAMS2019;
    case ScheduleSource::Li2018: return HFUSE_AUTOSCHEDULER_LI2018;
    default: return "";
    }
}

bool is_file(const std::string &path) {
    struct stat st;
    return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The directory of the libHalide this process runs, or "" if the loader does not say.
std::string halide_library_dir() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&Halide::load_plugin), &info) == 0 || !info.dli_fname) return "";
    std::string file = info.dli_fname;
    auto slash = file.rfind('/');
    return slash == std::string::npos ? "" : file.substr(0, slash);
}

}  // namespace

std::string autoscheduler_name(ScheduleSource source) {
    switch (source) {
    case ScheduleSource::Mullapudi2016: return "Mullapudi2016";
    case ScheduleSource::Adams2019: return "Adams2019";
    case ScheduleSource::Li2018: return "Li2018";
    default: throw Error("the schedule templates are not an autoscheduler");
    }
}

std::string autoscheduler_plugin_path(ScheduleSource source) {
    const std::string file = std::string("libautoschedule_") + to_string(source) + ".so";
    std::vector<std::string> tried;
    if (*configured_path(source)) tried.push_back(configured_path(source));
    if (std::string dir = halide_library_dir(); !dir.empty()) {
        tried.push_back(dir + "/halide14/" + file);  // Debian's layout (libhalide14-0-dev)
        tried.push_back(dir + "/" + file);
    }
    for (const std::string &p : tried) {
        if (is_file(p)) return p;
    }
    std::string list;
    for (const std::string &p : tried) list += (list.empty() ? "" : ", ") + p;
    throw Error("the " + autoscheduler_name(source) + " autoscheduler plugin (" + file + ") is not installed" +
                (list.empty() ? "" : "; looked for " + list) + " (Debian: apt-get install libhalide14-0-dev)");
}

void load_autoscheduler(ScheduleSource source) {
    static std::mutex mutex;
    static std::set<ScheduleSource> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (loaded.count(source)) return;
    const std::string path = autoscheduler_plugin_path(source);
    if (source == ScheduleSource::Adams2019) {
        // Adams2019 searches its beam (32 states) in 5 coarse-to-fine passes by default: on
        // conv_bn_relu's single conv group that took 96 s and 4 GB for a cost 3% lower than pass 0
        // alone, which takes 2 s. One pass unless the user says otherwise (HL_NUM_PASSES, read by the
        // plugin; overwrite = 0 keeps a value already set). The v14 API has no other way to say it.
        setenv("HL_NUM_PASSES", "1", 0);
    }
    try {
        Halide::load_plugin(path);
    } catch (const Halide::Error &e) {
        throw Error("cannot load the " + autoscheduler_name(source) + " autoscheduler: " + e.what()).in_file(path);
    }
    loaded.insert(source);
}

int autoscheduler_parallelism(int requested) {
    if (requested > 0) return requested;
    if (const char *env = std::getenv("HL_NUM_THREADS")) {
        int n = std::atoi(env);
        if (n > 0) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

std::string autoscheduler_inputs(ScheduleSource source, int requested) {
    std::string s = "parallelism " + std::to_string(autoscheduler_parallelism(requested));
    for (const char *var :
         {"HL_BEAM_SIZE", "HL_NUM_PASSES", "HL_RANDOM_DROPOUT", "HL_SEED", "HL_WEIGHTS_DIR", "HL_NO_SUBTILING",
          "HL_AUTO_FOLDED_FUSION", "HL_PERMIT_FAILED_UNROLL", "HL_USE_MANUAL_SCHEDULE", "HL_MACHINE_PARAMS"}) {
        const char *v = std::getenv(var);
        if (!v && source == ScheduleSource::Adams2019 && std::string(var) == "HL_NUM_PASSES") v = "1";
        if (v) s += std::string(" ") + var + "=" + v;
    }
    return s;
}

void autoschedule_group(const Graph &graph, const LoweredGroup &lowered, Halide::Pipeline &pipeline,
                        ScheduleSource source, const Halide::Target &target, int parallelism) {
    auto region = [](const Shape &shape) {
        Halide::Region r;
        for (auto it = shape.rbegin(); it != shape.rend(); ++it) r.emplace_back(0, static_cast<int>(*it));
        return r;
    };
    for (size_t i = 0; i < lowered.params.size(); i++) {
        Halide::ImageParam p = lowered.params[i];
        p.set_estimates(region(graph.type_of(lowered.input_values[i]).shape));
    }
    for (size_t i = 0; i < lowered.output_funcs.size(); i++) {
        Halide::Func f = lowered.output_funcs[i];
        f.set_estimates(region(graph.type_of(lowered.output_values[i]).shape));
    }
    load_autoscheduler(source);
    const Halide::MachineParams machine(autoscheduler_parallelism(parallelism), 16 * 1024 * 1024, 40);
    pipeline.auto_schedule(autoscheduler_name(source), target, machine);
}

}  // namespace hfuse::exec
