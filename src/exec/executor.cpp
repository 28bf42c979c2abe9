#include "hfuse/executor.h"

#include "compose/composer.h"
#include "compose/position_view.h"
#include "exec/autoschedule.h"
#include "exec/buffer_plan.h"
#include "exec/concat_in_place.h"
#include "exec/content_hash.h"
#include "exec/group_lowering.h"
#include "exec/jit_allocator.h"
#include "exec/jit_runtime.h"
#include "exec/kernel_cache.h"
#include "exec/parallel_runtime.h"
#include "exec/statistics.h"
#include "exec/value_layout.h"
#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "hfuse/random.h"
#include "ops/halide_util.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace hfuse {

TensorBuffer make_tensor_buffer(const Shape &shape) {
    std::vector<int> extents(shape.rbegin(), shape.rend());
    return TensorBuffer(extents);
}

Shape shape_of(const TensorBuffer &buffer) {
    Shape s;
    for (int k = buffer.dimensions() - 1; k >= 0; k--) s.push_back(buffer.dim(k).extent());
    return s;
}

TensorBuffer tensor_from_data(const Shape &shape, const float *data) {
    TensorBuffer b = make_tensor_buffer(shape);
    std::memcpy(b.data(), data, sizeof(float) * num_elements(shape));
    return b;
}

uint64_t default_input_seed(size_t index) {
    return 1000 + index;
}

TensorBuffer generated_input(const GraphInput &input, size_t index) {
    const std::vector<float> data = uniform_values(num_elements(input.shape), -1.0, 1.0, default_input_seed(index));
    return tensor_from_data(input.shape, data.data());
}

int num_threads() {
    return exec::openmp_threads();
}

void set_num_threads(int n) {
    exec::set_openmp_threads(n);
    // Halide's runtime reads HL_NUM_THREADS when its thread pool starts, i.e. at the first parallel loop.
    if (n > 0) {
        setenv("HL_NUM_THREADS", std::to_string(n).c_str(), 1);
    } else {
        unsetenv("HL_NUM_THREADS");
    }
}

namespace {

// A JIT-compiled pipeline, shared by every group with the same key (group_key).
struct CompiledPipeline {
    Halide::Pipeline pipeline;
    std::vector<Halide::ImageParam> params;  // bound to the running group's input values before each run
    // Bound to the running group's own constants (GroupRun::constants) before each run; empty where
    // the constants are compiled in.
    std::vector<Halide::ImageParam> constant_params;
    // Loaded from (or stored in) the kernel cache: run instead of `pipeline`, which is then not compiled.
    std::shared_ptr<exec::CachedKernel> kernel;
    bool from_cache = false;                                     // GroupInfo's
    double cold_compile_ms = 0;                                  // GroupInfo's
    std::string schedule, note;                                  // GroupInfo's
    std::string schedule_template;                               // GroupInfo's
    double compile_ms = 0;                                       // GroupInfo's
    ParallelRuntime parallel_runtime = ParallelRuntime::Halide;  // GroupInfo's
    // Compiled on the group's position view (compose/position_view.h): the shapes its parameters' and
    // outputs' buffers are reshaped to before each run (empty: none).
    std::vector<Shape> param_views, output_views;
};

// Records in `cp` the view shapes of a group lowered on `lowered_on` rather than the model's graph.
void record_views(CompiledPipeline &cp, const Graph &g, const Graph &lowered_on, const exec::LoweredGroup &lowered) {
    if (&lowered_on == &g) return;
    for (const std::string &v : lowered.input_values) cp.param_views.push_back(lowered_on.type_of(v).shape);
    for (const std::string &v : lowered.output_values) cp.output_views.push_back(lowered_on.type_of(v).shape);
}

// A group as it runs: its compiled pipeline and the values it reads and writes.
struct GroupRun {
    std::string name, master;
    int members = 0;
    std::vector<std::string> ops;  // GroupInfo's
    double flops = 0;              // GroupInfo's
    std::shared_ptr<CompiledPipeline> compiled;
    std::vector<TensorBuffer> constants;         // in the order of compiled->constant_params
    std::vector<std::string> input_values;       // in the order of compiled->params
    std::vector<std::string> output_values;      // in the order of the pipeline's outputs
    std::vector<int> input_slots, output_slots;  // the same values' places in Executor::Impl::slots
    bool in_place = false;                       // a Concat computed in place: nothing to run
    const exec::ConcatCopy *copy = nullptr;      // a Concat copied by memcpy rather than by a kernel
};

bool is_dense(const TensorBuffer &b) {
    int64_t stride = 1;
    for (int k = 0; k < b.dimensions(); k++) {
        if (b.dim(k).min() != 0 || b.dim(k).stride() != stride) return false;
        stride *= b.dim(k).extent();
    }
    return true;
}

// Everything the compiled code of a group depends on, names of its activations aside: the op, attributes,
// placement and output shapes of each member, how members are wired (an input is another member's
// output, the k-th activation entering the group with its shape, or a weight), which values leave the
// group, and the schedule, backend and target. Two groups with equal keys lower to the same Funcs in
// the same order, so they can share one compiled pipeline. A weight is keyed by its name where the
// group compiles its constants in; where it reads them through parameters (`constant_params`, the
// templates' groups), by its type, plus its values where ops may read them into the code while
// lowering (int64 weights, and any of at most kInlinedConstantElements elements: Clip's bounds, Pad's
// value, Resize's scales and roi); larger float weights reach the code only through ops::constant_func
// (src/ops/README.md). A conv's bias of 8 channels or fewer is keyed by value too: such groups do not
// share code, at no risk.
constexpr int64_t kInlinedConstantElements = 8;

std::string weight_key(const Graph &g, const std::string &v, bool constant_params) {
    if (!constant_params) return "w:" + v;
    const Constant &c = g.weights.at(v);
    std::string key = "w[" + to_string(c.type.shape) + "]" + (c.type.dtype == DType::Float32 ? "f" : "i");
    if (c.type.dtype != DType::Float32 || num_elements(c.type.shape) <= kInlinedConstantElements) {
        const void *data = c.type.dtype == DType::Float32 ? static_cast<const void *>(c.f32.data()) : c.i64.data();
        const size_t bytes = c.type.dtype == DType::Float32 ? c.f32.size() * 4 : c.i64.size() * 8;
        key += "=" + exec::hex_hash(data, bytes);
    }
    return key;
}

std::string group_key(const Graph &g, const FusedGroup &grp, const std::set<std::string> &live_out,
                      const ExecutorOptions &options, const exec::ValueLayouts &layouts, bool constant_params) {
    auto layout = [&](const std::string &v) {
        const exec::ValueLayout l = exec::layout_of(layouts, v);
        return l.dense() ? std::string() : " " + exec::to_string(l);
    };
    // A schedule's "why" explains it, naming nodes: it does not change the code, so it is not keyed.
    nlohmann::json schedule = grp.schedule;
    if (schedule.is_object()) schedule.erase("why");
    std::string key = options.target.to_string() + "|" + to_string(options.schedule) + "|" + grp.backend + "|" +
                      (options.schedule == ScheduleSource::Templates ? schedule.dump() : "") + "|" +
                      (constant_params ? "constant params" : "constants compiled in") + "\n";
    if (options.schedule != ScheduleSource::Templates) {
        key += exec::autoscheduler_inputs(options.schedule, options.parallelism) + "\n";
    }
    std::map<std::string, std::string> local;  // value -> "n<member>.<output>" or "i<k>"
    int member = 0, external = 0;
    for (const std::string &name : grp.nodes) {
        const Node *n = g.find_node(name);
        auto p = grp.placement.find(name);
        key += n->op + " " + n->attrs.dump() + " " + (p == grp.placement.end() ? "" : to_string(p->second)) + " (";
        for (const std::string &v : n->inputs) {
            if (v.empty()) {
                key += "-";
            } else if (auto it = local.find(v); it != local.end()) {
                key += it->second;
            } else if (g.is_weight(v)) {
                key += weight_key(g, v, constant_params);
            } else {
                local[v] = "i" + std::to_string(external++);
                key += local[v] + "[" + to_string(g.type_of(v).shape) + "]" + layout(v);
            }
            key += ",";
        }
        key += ") ->";
        for (size_t o = 0; o < n->outputs.size(); o++) {
            const std::string &v = n->outputs[o];
            local[v] = "n" + std::to_string(member) + "." + std::to_string(o);
            key += " [" + to_string(g.type_of(v).shape) + "]" + (live_out.count(v) ? "out" + layout(v) : "");
        }
        key += "\n";
        member++;
    }
    return key;
}

// The interior of the storage starting at `storage` (its first float) of a value of `shape` in
// `layout`, as the value's producer writes it.
TensorBuffer interior_view(float *storage, const Shape &shape, const exec::ValueLayout &layout) {
    std::vector<halide_dimension_t> dims = exec::interior_dims(shape, layout);
    return TensorBuffer(storage + exec::interior_offset(shape, layout), static_cast<int>(dims.size()), dims.data(),
                        "hfuse_interior");
}

// Whether `b` is laid out exactly as storage_dims(shape, layout) says.
bool has_storage_dims(const TensorBuffer &b, const Shape &shape, const exec::ValueLayout &layout) {
    const std::vector<halide_dimension_t> dims = exec::storage_dims(shape, layout);
    if (b.dimensions() != static_cast<int>(dims.size())) return false;
    for (int k = 0; k < b.dimensions(); k++) {
        if (b.dim(k).min() != dims[k].min || b.dim(k).extent() != dims[k].extent || b.dim(k).stride() != dims[k].stride)
            return false;
    }
    return true;
}

// The first non-zero float in the halo of blocked storage `b` (laid out as storage_dims says) of a
// value of `shape`, as "[n, c, y, x]" (NCHW coordinates, the halo's negative or past the end), or ""
// if the halo is all zeros. run() checks every stored input: a storage row is contiguous, so the halo
// is scanned as spans (whole rows above and below, both ends of the others), not element by element
// (3x3 at 128x128, outside the group's time: ~0.11 ms a run element by element, ~0.04 as spans).
std::string nonzero_halo(const TensorBuffer &b, const Shape &shape, const exec::ValueLayout &l) {
    const int64_t row = int64_t{shape[3] + 2 * l.halo_x} * l.block, side = int64_t{l.halo_x} * l.block;
    for (int n = 0; n < shape[0]; n++) {
        for (int cb = 0; cb < shape[1] / l.block; cb++) {
            for (int y = -l.halo_y; y < shape[2] + l.halo_y; y++) {
                const float *first = &b(0, -l.halo_x, y, cb, n);
                const bool row_in = y >= 0 && y < shape[2];
                for (auto [from, to] :
                     {std::pair<int64_t, int64_t>{0, row_in ? side : row}, {row_in ? row - side : row, row}}) {
                    const float *hit = std::find_if(first + from, first + to, [](float v) { return v != 0.0f; });
                    if (hit == first + to) continue;
                    const int64_t i = hit - first;
                    return "[" + std::to_string(n) + ", " + std::to_string(cb * l.block + i % l.block) + ", " +
                           std::to_string(y) + ", " + std::to_string(i / l.block - l.halo_x) + "]";
                }
            }
        }
    }
    return "";
}

}  // namespace

struct Executor::Impl {
    Graph graph;
    ExecutorOptions options;
    exec::WeightBuffers weights;
    std::vector<GroupRun> groups;  // in execution order
    int num_compiled = 0;
    double runtime_compile_ms = 0;             // Halide's shared runtime(s), when this executor compiled it
    std::shared_ptr<exec::KernelCache> cache;  // with ExecutorOptions::kernel_cache
    KernelCacheStats cache_stats;
    exec::ValueLayouts layouts;     // values stored other than dense NCHW
    exec::InPlaceConcats in_place;  // values sharing a Concat's storage, and the Concats not run
    // Values passed between groups: views into arenas laid out by exec::plan_buffers (or a buffer each
    // without reuse), allocated once and reused by every run. Values stored with a halo share an arena
    // only with values of the same layout and shape, so every halo stays zero. (One arena for all, each
    // halo set to zero again before its producer runs, took RegNet-Y 800MF's intermediates from 14.6
    // to 5.7 MB and ResNeXt-50's from 26.1 to 8.0, but was no faster: Zen 4, 2 vCPUs, 6 alternating
    // processes, RegNet-Y 800MF, MobileNet-V2 and ResNet-18 1.01-1.03x, Inception-V3 and ResNeXt-50
    // 0.96-0.98x, and in a slower spell every one 0.89-0.97x; a value then mostly takes bytes the
    // other core has just written. Only halo-free blocked values in it: 0.99-1.01x.)
    std::vector<std::unique_ptr<float, decltype(&std::free)>> arenas;
    std::map<std::string, TensorBuffer> intermediates;  // the storage, halo included, as groups read it
    std::map<std::string, TensorBuffer> interiors;      // the same without the halo, as its group writes it
    int64_t intermediate_bytes = 0, unshared_bytes = 0;
    // Every value a run passes between groups, by index, so that a run looks nothing up by name
    // (at a few microseconds a model, maps of strings showed): model inputs first, then the values
    // groups write. Intermediates stay bound to their arena views; inputs and outputs are bound per run.
    // Groups read slots and write write_slots (the same buffer, but for a halo).
    std::vector<TensorBuffer> slots, write_slots;
    std::vector<int> output_slots;  // per model output (g.outputs order); -1 for an input returned as is

    void compile(const FusedGraph &plan);
    void run_kernel(GroupRun &gr, CompiledPipeline &cp);
    void allocate_intermediates();
    void assign_slots();
};

Partition Executor::unfused_partition(const Graph &graph) {
    Partition p;
    for (const Node &n : graph.nodes) p.push_back({n.name});
    return p;
}

namespace {

FusedGraph plan_of_partition(const Graph &graph, const Partition &partition) {
    FusedGraph f;
    f.graph = graph;
    for (const std::vector<std::string> &nodes : partition) {
        FusedGroup grp;
        grp.nodes = nodes;
        f.groups.push_back(grp);
    }
    return check_plan(std::move(f));
}

}  // namespace

Executor::Executor(const Graph &graph, const Partition &partition, ExecutorOptions options)
    : Executor(plan_of_partition(graph, partition), options) {}

Executor::Executor(const FusedGraph &plan, ExecutorOptions options) : impl_(new Impl) {
    impl_->graph = plan.graph;
    impl_->options = options;
    impl_->weights = exec::make_weight_buffers(impl_->graph);
    impl_->compile(plan);
    impl_->allocate_intermediates();
    impl_->assign_slots();
}

namespace {

// Whether a group reads its constants through parameters (ops::ConstantParams): groups the templates
// schedule, so that groups differing only in their weights share code. A backend's lowering and the
// autoschedulers (which want estimates on every input) see them compiled in.
bool constant_params_for(const FusedGroup &grp, ScheduleSource schedule) {
    return grp.backend.empty() && schedule == ScheduleSource::Templates;
}

// Lowers a group as the op library (or its backend) defines it, unscheduled; for `schedule` by the
// templates, as the group's template needs it (conv_flat, conv_cv: the conv in their forms); with
// `constant_params` (constant_params_for), its constants read through parameters.
exec::LoweredGroup lower(const Graph &g, const FusedGroup &grp, const std::set<std::string> &live_out,
                         const exec::WeightBuffers &weights, ScheduleSource schedule, const Halide::Target &target,
                         const exec::ValueLayouts &layouts, bool constant_params) {
    std::vector<const Node *> nodes;
    for (const std::string &name : grp.nodes) nodes.push_back(g.find_node(name));
    if (grp.backend.empty()) {
        OpLowerings forms;
        if (schedule == ScheduleSource::Templates) forms = compose::op_lowerings(g, grp, target);
        if (!constant_params) return exec::lower_group(g, nodes, live_out, weights, {}, forms, layouts);
        ops::ConstantParams constants;
        exec::LoweredGroup lowered = exec::lower_group(g, nodes, live_out, weights, {}, forms, layouts);
        lowered.constant_params = std::move(constants.params);
        lowered.constant_values = std::move(constants.values);
        return lowered;
    }
    const BackendPattern *pattern = find_backend_pattern(grp.backend);
    if (!pattern) {
        throw Error("group " + grp.name + " names backend pattern '" + grp.backend +
                    "', which this program has not registered")
            .in_file(g.source);
    }
    return exec::lower_backend_group(g, nodes, live_out, weights, *pattern);
}

// Schedules a lowered group (templates, or `autoscheduler` unless it is Templates) of a model of
// `model_flops` FLOPs (they resolve ParallelRuntime::Auto): everything but compiling it
// (compile_pipeline), which may then run on another thread.
std::shared_ptr<CompiledPipeline> schedule_pipeline(const Graph &g, const FusedGroup &grp, exec::LoweredGroup &lowered,
                                                    ScheduleSource autoscheduler, double model_flops,
                                                    const ExecutorOptions &options) {
    const auto start = std::chrono::steady_clock::now();
    auto cp = std::make_shared<CompiledPipeline>();
    if (!grp.backend.empty()) {
        cp->schedule = cp->schedule_template = "backend:" + grp.backend;
    } else if (autoscheduler == ScheduleSource::Templates) {
        compose::compose_group(g, grp, lowered, options.target);
        cp->schedule = to_string(ScheduleSource::Templates);
        // compose_group read the same parameters (and threw unless "template" is a string).
        const nlohmann::json params =
            grp.schedule.empty() ? default_schedule_params(g, grp, options.target) : grp.schedule;
        cp->schedule_template = params.value("template", "");
    } else {
        cp->schedule = cp->schedule_template = to_string(autoscheduler);
    }
    cp->params = lowered.params;
    cp->constant_params = lowered.constant_params;
    cp->pipeline = Halide::Pipeline(lowered.output_funcs);
    cp->pipeline.jit_handlers().custom_malloc = exec::jit_malloc;
    cp->pipeline.jit_handlers().custom_free = exec::jit_free;
    cp->parallel_runtime = exec::resolve_parallel_runtime(options.parallel_runtime, model_flops);
    exec::use_parallel_runtime(cp->pipeline, cp->parallel_runtime);
    if (!lowered.jit_externs.empty()) cp->pipeline.set_jit_externs(lowered.jit_externs);
    if (grp.backend.empty() && autoscheduler != ScheduleSource::Templates) {
        exec::autoschedule_group(g, lowered, cp->pipeline, autoscheduler, options.target, options.parallelism);
    }
    cp->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return cp;
}

// JIT-compiles a scheduled pipeline. Halide compiles independent pipelines on separate threads
// (its IR is reference-counted atomically and shares no mutable state between pipelines; its JIT
// runtime is built once, before, by exec::compile_jit_runtime).
void compile_pipeline(CompiledPipeline &cp, const ExecutorOptions &options) {
    const auto start = std::chrono::steady_clock::now();
    cp.pipeline.compile_jit(options.target);
    cp.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Runs work(i) for each i of `order`, in that order, on up to `threads` threads (<= 0: one per core),
// the calling thread among them. `work` must not throw.
void run_parallel(const std::vector<size_t> &order, int threads, const std::function<void(size_t)> &work) {
    const int n = static_cast<int>(order.size());
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min(threads, n);
    std::atomic<int> next{0};
    auto worker = [&] {
        for (int i = next++; i < n; i = next++) work(order[i]);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; t++) pool.emplace_back(worker);
    worker();
    for (std::thread &t : pool) t.join();
}

std::string trimmed(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

}  // namespace

void Executor::Impl::compile(const FusedGraph &plan) {
    const Graph &g = graph;
    // Auto: one runtime for every group, by the model's FLOPs (include/hfuse/executor.h).
    const double model_flops = graph_flops(g);
    if (options.blocked_layouts && options.schedule == ScheduleSource::Templates) {
        layouts = exec::choose_value_layouts(plan, options.target, options.blocked_io);
    }
    if (options.concat_in_place) in_place = exec::place_concats_in_place(plan, layouts);
    // A distinct pipeline: the first group with its key, lowered and scheduled here in plan order,
    // then compiled with the others on every core.
    struct Job {
        const FusedGroup *grp;
        std::set<std::string> live_out;
        std::unique_ptr<Graph> view;  // the group's position view, where it is lowered on one
        const Graph *lowered_on;
        exec::LoweredGroup lowered;
        double flops;
        std::shared_ptr<CompiledPipeline> compiled;
        std::exception_ptr failure;  // a Halide::Error from scheduling or compiling it
        std::string key;
        bool cacheable = false;  // compiled into the kernel cache rather than JIT-compiled
    };
    std::atomic<bool> jit_runtime_ready{false};
    std::vector<Job> jobs;
    std::map<std::string, size_t> job_of_key;
    if (options.kernel_cache) {
        cache = std::make_shared<exec::KernelCache>(
            options.kernel_cache_dir.empty() ? exec::default_kernel_cache_dir() : options.kernel_cache_dir,
            options.target, options.kernel_cache_max_bytes);
        cache_stats.enabled = true;
        cache_stats.dir = cache->dir();
    }
    std::atomic<bool> caching{static_cast<bool>(cache)};
    std::mutex note_mutex;
    std::vector<size_t> job_of_group;
    auto fail_at = [&](const FusedGroup &grp, Error &e) -> Error & { return in_group(e, plan, grp); };
    for (const FusedGroup &grp : plan.groups) {  // check_plan ordered them
        std::set<std::string> live_out = handed_out_values(plan, grp);
        // A group whose values nobody reads (dead nodes of a graph run as written, or an owner every
        // reader recomputes) has nothing to compute.
        if (live_out.empty()) continue;
        const bool in_place_concat = in_place.groups.count(grp.name) != 0;
        if (in_place_concat || in_place.copies.count(grp.name)) {
            // In place, its inputs were written where its output lies: nothing to lower, compile or
            // run. Else copied by memcpy.
            const Node *n = g.find_node(grp.nodes[0]);
            auto cp = std::make_shared<CompiledPipeline>();
            cp->schedule = cp->schedule_template = in_place_concat ? "in_place" : "memcpy";
            GroupRun run{grp.name, grp.master, 1, {n->op}, 0, cp, {}, n->inputs, n->outputs, {}, {}, in_place_concat};
            if (!in_place_concat) run.copy = &in_place.copies.at(grp.name);
            groups.push_back(std::move(run));
            job_of_group.push_back(std::numeric_limits<size_t>::max());
            continue;
        }
        // Templates lower and compose a group on its position view where its schedule says so.
        auto view = std::make_unique<Graph>();
        const Graph *lowered_on = &g;
        if (options.schedule == ScheduleSource::Templates) {
            try {
                lowered_on = &compose::group_graph(g, grp, options.target, *view);
            } catch (Error &e) {
                throw fail_at(grp, e);
            }
        }
        const bool constant_params = constant_params_for(grp, options.schedule);
        exec::LoweredGroup lowered;
        try {
            lowered =
                lower(*lowered_on, grp, live_out, weights, options.schedule, options.target, layouts, constant_params);
        } catch (Error &e) {
            if (!grp.backend.empty()) throw;  // a backend's errors name its group
            throw fail_at(grp, e);            // the templates' forms read the schedule (op_lowerings)
        }
        std::vector<std::string> ops;
        double flops = 0;
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            ops.push_back(n->op);
            flops += node_flops(g, *n);
        }
        GroupRun run{grp.name,
                     grp.master,
                     static_cast<int>(grp.nodes.size()),
                     std::move(ops),
                     flops,
                     nullptr,
                     lowered.constant_values,
                     lowered.input_values,
                     lowered.output_values,
                     {},
                     {}};
        const std::string key = group_key(g, grp, live_out, options, layouts, constant_params);
        auto [it, fresh] = job_of_key.emplace(key, jobs.size());
        job_of_group.push_back(it->second);
        groups.push_back(std::move(run));
        if (!fresh) continue;
        Job job{
            &grp, std::move(live_out), std::move(view), lowered_on, std::move(lowered), flops, nullptr, nullptr, key,
            false};
        job.cacheable = caching && job.lowered.jit_externs.empty();
        if (job.cacheable) {
            const auto start = std::chrono::steady_clock::now();
            std::shared_ptr<exec::CachedKernel> kernel;
            double runtime_ms = 0;  // loading (or building) the cache's shared runtime: not the group's
            try {
                kernel = cache->load(key, &runtime_ms);
            } catch (const std::exception &e) {  // the runtime cannot be built or loaded
                std::lock_guard<std::mutex> lock(note_mutex);
                cache_stats.notes.push_back(std::string(e.what()) + "; the kernel cache is off for this model");
                caching = false;
                job.cacheable = false;
            }
            if (kernel) {
                job.compiled = std::make_shared<CompiledPipeline>();
                CompiledPipeline &cp = *job.compiled;
                const nlohmann::json &meta = kernel->meta();
                cp.kernel = kernel;
                cp.from_cache = true;
                cp.params = job.lowered.params;
                cp.constant_params = job.lowered.constant_params;
                cp.schedule = meta.value("schedule", "");
                cp.schedule_template = meta.value("schedule_template", "");
                cp.note = meta.value("note", "");
                cp.cold_compile_ms = meta.value("compile_ms", 0.0);
                cp.parallel_runtime = exec::resolve_parallel_runtime(options.parallel_runtime, model_flops);
                record_views(cp, g, *job.lowered_on, job.lowered);
                cp.compile_ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() -
                    runtime_ms;
                cache_stats.hits++;
                cache_stats.hit_cold_compile_ms += cp.cold_compile_ms;
                jobs.push_back(std::move(job));
                continue;
            }
        }
        if (!job.cacheable && !jit_runtime_ready) {
            // Before the first group: the runtime's time is not the group's (exec/jit_runtime.h).
            runtime_compile_ms += exec::compile_jit_runtime(options.target);
            jit_runtime_ready = true;
        }
        try {
            job.compiled = schedule_pipeline(*job.lowered_on, grp, job.lowered, options.schedule, model_flops, options);
            record_views(*job.compiled, g, *job.lowered_on, job.lowered);
        } catch (Error &e) {
            throw fail_at(grp, e);
        } catch (const Halide::Error &) {
            job.failure = std::current_exception();
        }
        jobs.push_back(std::move(job));
    }
    // Compile every scheduled pipeline, the most FLOPs first (the longest compiles, roughly).
    std::vector<size_t> order;
    for (size_t j = 0; j < jobs.size(); j++) {
        if (!jobs[j].failure && !jobs[j].compiled->from_cache) order.push_back(j);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return jobs[a].flops > jobs[b].flops; });
    auto compile_jit_job = [&](Job &job) {
        if (!jit_runtime_ready) {
            static std::mutex runtime_mutex;  // the first JIT compile builds Halide's runtime: time it apart
            std::lock_guard<std::mutex> lock(runtime_mutex);
            if (!jit_runtime_ready) {
                runtime_compile_ms += exec::compile_jit_runtime(options.target);
                jit_runtime_ready = true;
            }
        }
        compile_pipeline(*job.compiled, options);
    };
    run_parallel(order, options.compile_threads, [&](size_t j) {
        Job &job = jobs[j];
        try {
            if (job.cacheable && caching) {
                CompiledPipeline &cp = *job.compiled;
                const auto start = std::chrono::steady_clock::now();
                std::vector<Halide::Argument> args(cp.params.begin(), cp.params.end());
                args.insert(args.end(), cp.constant_params.begin(), cp.constant_params.end());
                nlohmann::json meta = {{"schedule", cp.schedule},
                                       {"schedule_template", cp.schedule_template},
                                       {"note", cp.note},
                                       {"group", job.grp->name}};
                try {
                    meta["compile_ms"] = cp.compile_ms;  // the scheduling; store() adds the compile
                    // Loading the entry builds the cache's shared runtime in a cache without it (once
                    // per process), or waits for the thread that does: runtime_compile_ms, not the group's.
                    double runtime_ms = 0;
                    cp.kernel = cache->store(job.key, cp.pipeline, args, meta, &runtime_ms);
                    cp.compile_ms +=
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() -
                        runtime_ms;
                    cp.cold_compile_ms = cp.compile_ms;
                    std::lock_guard<std::mutex> lock(note_mutex);
                    cache_stats.stored++;
                    return;
                } catch (const Halide::Error &) {
                    throw;  // the group's own failure, reported below as without the cache
                } catch (const std::exception &e) {
                    // The cache cannot be written (no `cc` to link, a read-only directory): said once,
                    // and the rest of the model is JIT-compiled.
                    std::lock_guard<std::mutex> lock(note_mutex);
                    if (caching.exchange(false)) {
                        cache_stats.notes.push_back(std::string(e.what()) + "; the kernel cache is off for this model");
                    }
                }
            }
            compile_jit_job(job);
        } catch (...) {
            job.failure = std::current_exception();
        }
    });
    if (cache) {
        runtime_compile_ms += cache->runtime_compile_ms();
        const exec::Eviction eviction = cache->evict();
        cache_stats.bound_checked = eviction.measured;
        cache_stats.evicted = eviction.removed;
        for (const std::string &n : cache->notes()) cache_stats.notes.push_back(n);
    }
    // Failures in plan order: an autoscheduler's fall back to the templates (compiled here, one by
    // one: rare), anything else is the first group's error.
    for (Job &job : jobs) {
        if (!job.failure) continue;
        const FusedGroup &grp = *job.grp;
        try {
            try {
                std::rethrow_exception(job.failure);
            } catch (const Halide::Error &e) {
                if (options.schedule == ScheduleSource::Templates || !options.fallback_to_templates) throw;
                // The autoscheduler's Funcs are scheduled now: lower afresh for the templates (constants
                // compiled in, as its key says: the groups sharing it have the same weights).
                Graph view;
                const Graph &templates_on = compose::group_graph(g, grp, options.target, view);
                exec::LoweredGroup again = lower(templates_on, grp, job.live_out, weights, ScheduleSource::Templates,
                                                 options.target, layouts, false);
                job.compiled =
                    schedule_pipeline(templates_on, grp, again, ScheduleSource::Templates, model_flops, options);
                record_views(*job.compiled, g, templates_on, again);
                compile_jit_job(job);
                job.compiled->note = std::string(to_string(options.schedule)) + "'s schedule failed in Halide (" +
                                     trimmed(e.what()) + "); scheduled by the templates instead";
            }
        } catch (Error &e) {
            throw fail_at(grp, e);
        } catch (const Halide::Error &e) {
            std::string who = options.schedule == ScheduleSource::Templates
                                  ? "Halide failed to compile the group: "
                                  : "Halide's " + exec::autoscheduler_name(options.schedule) +
                                        " autoscheduler or compiler failed on the group: ";
            Error err(who + e.what());
            throw fail_at(grp, err);
        }
    }
    for (size_t i = 0; i < groups.size(); i++) {
        if (job_of_group[i] < jobs.size()) groups[i].compiled = jobs[job_of_group[i]].compiled;
    }
    num_compiled = static_cast<int>(jobs.size());
}

void Executor::Impl::allocate_intermediates() {
    const std::set<std::string> returned(graph.outputs.begin(), graph.outputs.end());
    // Requests by storage class: "" for dense values, else the layout and shape.
    std::map<std::string, std::vector<exec::BufferRequest>> classes;
    std::map<std::string, std::pair<std::string, size_t>> index;
    // A value of a Concat computed in place lives in its storage (named by one of its values), which
    // lives from the first write of any of them to the last read.
    std::map<std::string, std::vector<std::string>> shared;  // storage -> its values
    for (const auto &[v, slice] : in_place.slices) shared[slice.storage].push_back(v);
    auto stored_as = [&](const std::string &v) -> const std::string & {
        auto it = in_place.slices.find(v);
        return it == in_place.slices.end() ? v : it->second.storage;
    };
    for (size_t i = 0; i < groups.size(); i++) {
        for (const std::string &v : groups[i].input_values) {
            if (auto it = index.find(stored_as(v)); it != index.end()) {
                classes[it->second.first][it->second.second].last_use = static_cast<int>(i);
            }
        }
        for (const std::string &written : groups[i].output_values) {
            if (returned.count(written)) continue;
            const std::string &v = stored_as(written);
            if (auto it = index.find(v); it != index.end()) {  // a shared storage written before
                classes[it->second.first][it->second.second].last_use = static_cast<int>(i);
                continue;
            }
            if (shared.count(v)) {
                index[v] = {"", classes[""].size()};
                const int64_t bytes = 4 * in_place.slices.at(v).elements;
                classes[""].push_back({v, bytes, static_cast<int>(i), static_cast<int>(i)});
                continue;
            }
            const Shape &shape = graph.type_of(v).shape;
            const exec::ValueLayout l = exec::layout_of(layouts, v);
            const std::string cls = l.dense() ? "" : exec::to_string(l) + " [" + to_string(shape) + "]";
            index[v] = {cls, classes[cls].size()};
            const int64_t bytes = 4 * exec::storage_elements(shape, l) + exec::storage_slack_bytes(l);
            classes[cls].push_back({v, bytes, static_cast<int>(i), static_cast<int>(i)});
        }
    }
    for (const auto &[cls, requests] : classes) {
        int64_t unshared = 0;
        for (const exec::BufferRequest &r : requests) unshared += r.bytes;
        std::map<std::string, int64_t> offsets;
        int64_t bytes = 0;
        if (options.reuse_buffers) {
            exec::BufferPlan plan = exec::plan_buffers(requests);
            offsets = plan.offsets;
            bytes = plan.arena_bytes;
        } else {
            for (const exec::BufferRequest &r : requests) {
                offsets[r.value] = bytes;  // a buffer each (aligned as plan_buffers aligns)
                bytes += (r.bytes + 63) / 64 * 64;
            }
        }
        unshared_bytes += unshared;
        intermediate_bytes += options.reuse_buffers ? bytes : unshared;
        if (bytes == 0) continue;
        float *arena = static_cast<float *>(std::aligned_alloc(64, bytes));  // offsets are multiples of 64
        if (!arena) {
            throw Error("cannot allocate " + std::to_string(bytes) + " bytes for intermediates").in_file(graph.source);
        }
        arenas.emplace_back(arena, &std::free);
        std::memset(arena, 0, bytes);  // the halos' zeros
        for (const exec::BufferRequest &r : requests) {
            if (auto it = shared.find(r.value); it != shared.end()) {
                // Each value of the storage dense where it lies (contiguous: concat_in_place.h).
                for (const std::string &v : it->second) {
                    float *at = arena + (offsets.at(r.value) / sizeof(float)) + in_place.slices.at(v).offset;
                    std::vector<halide_dimension_t> dims = exec::storage_dims(graph.type_of(v).shape, {});
                    intermediates[v] = interiors[v] = TensorBuffer(at, static_cast<int>(dims.size()), dims.data());
                }
                continue;
            }
            const Shape &shape = graph.type_of(r.value).shape;
            const exec::ValueLayout l = exec::layout_of(layouts, r.value);
            float *storage = exec::storage_start(arena + offsets.at(r.value) / sizeof(float), shape, l);
            std::vector<halide_dimension_t> dims = exec::storage_dims(shape, l);
            intermediates[r.value] = TensorBuffer(storage, static_cast<int>(dims.size()), dims.data());
            interiors[r.value] = interior_view(storage, shape, l);
        }
    }
}

void Executor::Impl::assign_slots() {
    std::map<std::string, int> slot_of;
    auto slot = [&](const std::string &v) {
        auto [it, added] = slot_of.emplace(v, static_cast<int>(slots.size()));
        if (added) {
            slots.push_back(intermediates.count(v) ? intermediates.at(v) : TensorBuffer());
            write_slots.push_back(interiors.count(v) ? interiors.at(v) : TensorBuffer());
        }
        return it->second;
    };
    for (const GraphInput &in : graph.inputs) slot(in.name);
    for (GroupRun &gr : groups) {
        for (const std::string &v : gr.input_values) gr.input_slots.push_back(slot(v));
        for (const std::string &v : gr.output_values) gr.output_slots.push_back(slot(v));
    }
    for (const std::string &v : graph.outputs) output_slots.push_back(graph.is_input(v) ? -1 : slot(v));
}

Executor::~Executor() = default;
Executor::Executor(Executor &&) noexcept = default;
Executor &Executor::operator=(Executor &&) noexcept = default;

const Graph &Executor::graph() const {
    return impl_->graph;
}
const ExecutorOptions &Executor::options() const {
    return impl_->options;
}
int Executor::num_groups() const {
    return static_cast<int>(impl_->groups.size());
}
std::vector<GroupInfo> Executor::groups() const {
    std::vector<GroupInfo> out;
    for (const GroupRun &r : impl_->groups) {
        const CompiledPipeline &c = *r.compiled;
        out.push_back({r.name, r.master, r.members, c.schedule, c.note, c.compile_ms, c.parallel_runtime,
                       c.schedule_template, r.ops, r.flops, c.from_cache,
                       c.from_cache ? c.cold_compile_ms : c.compile_ms});
    }
    return out;
}
int Executor::num_compiled() const {
    return impl_->num_compiled;
}
double Executor::runtime_compile_ms() const {
    return impl_->runtime_compile_ms;
}
KernelCacheStats Executor::kernel_cache_stats() const {
    return impl_->cache_stats;
}
int64_t Executor::intermediate_bytes() const {
    return impl_->intermediate_bytes;
}
int64_t Executor::intermediate_bytes_unshared() const {
    return impl_->unshared_bytes;
}
std::map<std::string, std::string> Executor::value_layouts() const {
    return exec::to_strings(impl_->layouts);
}

std::map<std::string, std::string> Executor::stored_io() const {
    const Graph &g = impl_->graph;
    std::map<std::string, std::string> out;
    for (const auto &[value, layout] : value_layouts()) {
        if (g.is_input(value) || std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end())
            out[value] = layout;
    }
    return out;
}

TensorBuffer Executor::pack_input(const std::string &name, const TensorBuffer &nchw) const {
    const Graph &g = impl_->graph;
    if (!g.is_input(name)) throw Error("'" + name + "' is not an input of the model").in_file(g.source);
    const Shape &shape = g.type_of(name).shape;
    if (shape_of(nchw) != shape) {
        throw Error("pack_input: model input '" + name + "' has shape [" + to_string(shape) + "], got [" +
                    to_string(shape_of(nchw)) + "]")
            .in_file(g.source);
    }
    const exec::ValueLayout l = exec::layout_of(impl_->layouts, name);
    if (l.planar()) return nchw;
    TensorBuffer stored = exec::make_storage(shape, l);
    for (int n = 0; n < shape[0]; n++)
        for (int c = 0; c < shape[1]; c++)
            for (int y = 0; y < shape[2]; y++)
                for (int x = 0; x < shape[3]; x++) stored(c % l.block, x, y, c / l.block, n) = nchw(x, y, c, n);
    return stored;
}

TensorBuffer Executor::unpack_output(const std::string &name, const TensorBuffer &stored) const {
    const Graph &g = impl_->graph;
    if (std::find(g.outputs.begin(), g.outputs.end(), name) == g.outputs.end()) {
        throw Error("'" + name + "' is not an output of the model").in_file(g.source);
    }
    const Shape &shape = g.type_of(name).shape;
    const exec::ValueLayout l = exec::layout_of(impl_->layouts, name);
    if (l.planar()) return stored;
    if (!has_storage_dims(stored, shape, l)) {
        throw Error("unpack_output: model output '" + name + "' is returned stored " + exec::to_string(l) +
                    "; the buffer given is not laid out so")
            .in_file(g.source);
    }
    TensorBuffer nchw = make_tensor_buffer(shape);
    for (int n = 0; n < shape[0]; n++)
        for (int c = 0; c < shape[1]; c++)
            for (int y = 0; y < shape[2]; y++)
                for (int x = 0; x < shape[3]; x++) nchw(x, y, c, n) = stored(c % l.block, x, y, c / l.block, n);
    return nchw;
}

void Executor::Impl::run_kernel(GroupRun &gr, CompiledPipeline &cp) {
    // The buffers as the kernel takes them: inputs (reshaped to its views), constants, outputs.
    std::vector<TensorBuffer> views;
    views.reserve(gr.input_slots.size() + gr.output_slots.size());
    std::vector<halide_buffer_t *> buffers;
    for (size_t i = 0; i < gr.input_slots.size(); i++) {
        const TensorBuffer &b = slots[gr.input_slots[i]];
        views.push_back(cp.param_views.empty() ? b : compose::reshaped(b, cp.param_views[i]));
        buffers.push_back(views.back().raw_buffer());
    }
    for (TensorBuffer &c : gr.constants) buffers.push_back(c.raw_buffer());
    for (size_t i = 0; i < gr.output_slots.size(); i++) {
        const TensorBuffer &b = write_slots[gr.output_slots[i]];
        views.push_back(cp.output_views.empty() ? b : compose::reshaped(b, cp.output_views[i]));
        buffers.push_back(views.back().raw_buffer());
    }
    try {
        cp.kernel->run(buffers, cp.parallel_runtime);
    } catch (Error &e) {
        throw Error(std::string("Halide runtime error in group ") + gr.name + ": " + e.what()).in_file(graph.source);
    }
}

std::map<std::string, TensorBuffer> Executor::run(const std::map<std::string, TensorBuffer> &inputs,
                                                  std::vector<double> *group_ms) {
    using clock = std::chrono::steady_clock;
    const Graph &g = impl_->graph;
    std::vector<TensorBuffer> &slots = impl_->slots;
    for (const auto &kv : inputs) {
        if (!g.is_input(kv.first)) throw Error("'" + kv.first + "' is not an input of the model").in_file(g.source);
    }
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const GraphInput &in = g.inputs[i];
        auto it = inputs.find(in.name);
        if (it == inputs.end()) throw Error("no data given for model input '" + in.name + "'").in_file(g.source);
        const TensorBuffer &b = it->second;
        const exec::ValueLayout l = exec::layout_of(impl_->layouts, in.name);
        auto taken = [&] {
            return "model input '" + in.name + "' [" + to_string(in.shape) + "] is taken stored " + exec::to_string(l) +
                   " (ExecutorOptions::blocked_io): ";
        };
        if (!has_storage_dims(b, in.shape, l)) {
            if (l.planar()) {
                throw Error("model input '" + in.name + "' must be a dense tensor of shape [" + to_string(in.shape) +
                            "], got [" + to_string(shape_of(b)) + "]" + (is_dense(b) ? "" : " (strided)"))
                    .in_file(g.source);
            }
            throw Error(taken() + "make it with Executor::pack_input(); got a buffer of " +
                        std::to_string(b.dimensions()) + " dimensions, extents [" + to_string(shape_of(b)) + "]")
                .in_file(g.source);
        }
        if (std::string at = l.planar() ? "" : nonzero_halo(b, in.shape, l); !at.empty()) {
            throw Error(taken() + "its halo must be zero, but is not at " + at).in_file(g.source);
        }
        slots[i] = b;
    }
    // Model outputs get fresh buffers each run, so results stay valid after the next run.
    std::map<std::string, TensorBuffer> outputs;
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const std::string &v = g.outputs[i];
        if (outputs.count(v)) continue;
        const int s = impl_->output_slots[i];
        if (s < 0) {
            outputs[v] = inputs.at(v).copy();
            continue;
        }
        const Shape &shape = g.type_of(v).shape;
        const exec::ValueLayout l = exec::layout_of(impl_->layouts, v);
        outputs[v] = slots[s] = exec::make_storage(shape, l);
        impl_->write_slots[s] = l.planar() ? slots[s] : interior_view(slots[s].data(), shape, l);
    }
    if (group_ms) group_ms->clear();
    std::vector<Halide::Buffer<void>> results;
    for (GroupRun &gr : impl_->groups) {
        auto start = clock::now();
        if (gr.in_place || gr.copy) {
            if (gr.copy) {
                std::vector<const float *> in;
                for (int k : gr.input_slots) in.push_back(slots[k].data());
                exec::copy_concat(*gr.copy, in, impl_->write_slots[gr.output_slots[0]].data());
            }
            if (group_ms) group_ms->push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
            continue;
        }
        CompiledPipeline &cp = *gr.compiled;
        if (cp.kernel) {
            impl_->run_kernel(gr, cp);
            if (group_ms) group_ms->push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
            continue;
        }
        for (size_t i = 0; i < cp.params.size(); i++) {
            const TensorBuffer &b = slots[gr.input_slots[i]];
            cp.params[i].set(cp.param_views.empty() ? b : compose::reshaped(b, cp.param_views[i]));
        }
        for (size_t i = 0; i < cp.constant_params.size(); i++) cp.constant_params[i].set(gr.constants[i]);
        results.clear();
        for (size_t i = 0; i < gr.output_slots.size(); i++) {
            const TensorBuffer &b = impl_->write_slots[gr.output_slots[i]];
            results.push_back(cp.output_views.empty() ? b : compose::reshaped(b, cp.output_views[i]));
        }
        Halide::Realization realization(results);
        try {
            cp.pipeline.realize(realization, impl_->options.target);
        } catch (const Halide::Error &e) {
            throw Error(std::string("Halide runtime error in group ") + gr.name + ": " + e.what()).in_file(g.source);
        }
        if (group_ms) group_ms->push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
    }
    // Do not keep the caller's buffers alive (or writable through the slots) past the run.
    for (size_t i = 0; i < g.inputs.size(); i++) slots[i] = TensorBuffer();
    for (int s : impl_->output_slots) {
        if (s >= 0) slots[s] = impl_->write_slots[s] = TensorBuffer();
    }
    return outputs;
}

Profile Executor::profile(const std::map<std::string, TensorBuffer> &inputs, int runs) {
    using clock = std::chrono::steady_clock;
    if (runs < 1) throw Error("profile needs at least one run, got " + std::to_string(runs));
    run(inputs);  // warm-up: first-touch of buffers, thread pool start
    std::vector<std::vector<double>> per_group(impl_->groups.size());
    std::vector<double> totals, ms;
    for (int r = 0; r < runs; r++) {
        auto start = clock::now();
        run(inputs, &ms);
        totals.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
        for (size_t i = 0; i < ms.size(); i++) per_group[i].push_back(ms[i]);
    }
    Profile p;
    p.runs = runs;
    p.total_ms = exec::median(totals);
    for (size_t i = 0; i < impl_->groups.size(); i++) {
        const GroupRun &gr = impl_->groups[i];
        p.groups.push_back({gr.name, gr.master, gr.members, exec::median(per_group[i])});
    }
    return p;
}

}  // namespace hfuse
