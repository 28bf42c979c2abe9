#include "hfuse/executor.h"

#include "compose/composer.h"
#include "compose/position_view.h"
#include "exec/autoschedule.h"
#include "exec/buffer_plan.h"
#include "exec/group_lowering.h"
#include "exec/jit_allocator.h"
#include "exec/jit_runtime.h"
#include "exec/parallel_runtime.h"
#include "exec/value_layout.h"
#include "hfuse/error.h"
#include "hfuse/op_registry.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

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
    std::string schedule, note;              // GroupInfo's
    std::string schedule_template;           // GroupInfo's
    double compile_ms = 0;                   // GroupInfo's
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
    std::vector<std::string> input_values;       // in the order of compiled->params
    std::vector<std::string> output_values;      // in the order of the pipeline's outputs
    std::vector<int> input_slots, output_slots;  // the same values' places in Executor::Impl::slots
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
// output, the k-th activation entering the group with its shape, or a weight by name: weights are baked
// into the code), which values leave the group, and the schedule, backend and target. Two groups with
// equal keys lower to the same Funcs in the same order, so they can share one compiled pipeline.
std::string group_key(const Graph &g, const FusedGroup &grp, const std::set<std::string> &live_out,
                      const ExecutorOptions &options, const exec::ValueLayouts &layouts) {
    auto layout = [&](const std::string &v) {
        const exec::ValueLayout l = exec::layout_of(layouts, v);
        return l.dense() ? std::string() : " " + exec::to_string(l);
    };
    std::string key = options.target.to_string() + "|" + to_string(options.schedule) + "|" + grp.backend + "|" +
                      (options.schedule == ScheduleSource::Templates ? grp.schedule.dump() : "") + "\n";
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
                key += "w:" + v;
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

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

struct Executor::Impl {
    Graph graph;
    ExecutorOptions options;
    exec::WeightBuffers weights;
    std::vector<GroupRun> groups;  // in execution order
    int num_compiled = 0;
    double runtime_compile_ms = 0;  // Halide's shared JIT runtime, when this executor compiled it
    exec::ValueLayouts layouts;     // values stored other than dense NCHW
    // Values passed between groups: views into arenas laid out by exec::plan_buffers (or a buffer each
    // without reuse), allocated once and reused by every run. Values stored with a halo share an arena
    // only with values of the same layout and shape, so every halo stays zero.
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

// Lowers a group as the op library (or its backend) defines it, unscheduled; for `schedule` by the
// templates, as the group's template needs it (conv_flat, conv_cv: the conv in their forms).
exec::LoweredGroup lower(const Graph &g, const FusedGroup &grp, const std::set<std::string> &live_out,
                         const exec::WeightBuffers &weights, ScheduleSource schedule, const Halide::Target &target,
                         const exec::ValueLayouts &layouts) {
    std::vector<const Node *> nodes;
    for (const std::string &name : grp.nodes) nodes.push_back(g.find_node(name));
    if (grp.backend.empty()) {
        OpLowerings forms;
        if (schedule == ScheduleSource::Templates) forms = compose::op_lowerings(g, grp, target);
        return exec::lower_group(g, nodes, live_out, weights, {}, forms, layouts);
    }
    const BackendPattern *pattern = find_backend_pattern(grp.backend);
    if (!pattern) {
        throw Error("group " + grp.name + " names backend pattern '" + grp.backend +
                    "', which this program has not registered")
            .in_file(g.source);
    }
    return exec::lower_backend_group(g, nodes, live_out, weights, *pattern);
}

// Schedules a lowered group (templates, or `autoscheduler` unless it is Templates) of `flops` FLOPs and
// JIT-compiles it.
std::shared_ptr<CompiledPipeline> schedule_and_compile(const Graph &g, const FusedGroup &grp,
                                                       exec::LoweredGroup &lowered, ScheduleSource autoscheduler,
                                                       double flops, const ExecutorOptions &options) {
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
    cp->pipeline = Halide::Pipeline(lowered.output_funcs);
    cp->pipeline.jit_handlers().custom_malloc = exec::jit_malloc;
    cp->pipeline.jit_handlers().custom_free = exec::jit_free;
    cp->parallel_runtime = exec::resolve_parallel_runtime(options.parallel_runtime, flops);
    exec::use_parallel_runtime(cp->pipeline, cp->parallel_runtime);
    if (!lowered.jit_externs.empty()) cp->pipeline.set_jit_externs(lowered.jit_externs);
    if (grp.backend.empty() && autoscheduler != ScheduleSource::Templates) {
        exec::autoschedule_group(g, lowered, cp->pipeline, autoscheduler, options.target, options.parallelism);
    }
    cp->pipeline.compile_jit(options.target);
    cp->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return cp;
}

}  // namespace

void Executor::Impl::compile(const FusedGraph &plan) {
    const Graph &g = graph;
    std::map<std::string, std::shared_ptr<CompiledPipeline>> cache;
    if (options.blocked_layouts && options.schedule == ScheduleSource::Templates) {
        layouts = exec::choose_value_layouts(plan, options.target, options.blocked_io);
    }
    for (const FusedGroup &grp : plan.groups) {  // check_plan ordered them
        std::set<std::string> live_out = handed_out_values(plan, grp);
        // A group whose values nobody reads (dead nodes of a graph run as written, or an owner every
        // reader recomputes) has nothing to compute.
        if (live_out.empty()) continue;
        // Templates lower and compose a group on its position view where its schedule says so.
        Graph view;
        const Graph *lowered_on = &g;
        if (options.schedule == ScheduleSource::Templates) {
            try {
                lowered_on = &compose::group_graph(g, grp, options.target, view);
            } catch (Error &e) {
                throw e.in_file(g.source);
            }
        }
        exec::LoweredGroup lowered =
            lower(*lowered_on, grp, live_out, weights, options.schedule, options.target, layouts);
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
                     lowered.input_values,
                     lowered.output_values,
                     {},
                     {}};
        std::shared_ptr<CompiledPipeline> &compiled = cache[group_key(g, grp, live_out, options, layouts)];
        if (!compiled) {
            const Node *master = g.find_node(grp.master);
            // Before the first group: the runtime's time is not the group's (exec/jit_runtime.h).
            runtime_compile_ms += exec::compile_jit_runtime(options.target);
            try {
                try {
                    compiled = schedule_and_compile(*lowered_on, grp, lowered, options.schedule, run.flops, options);
                    record_views(*compiled, g, *lowered_on, lowered);
                } catch (const Halide::Error &e) {
                    if (options.schedule == ScheduleSource::Templates || !options.fallback_to_templates) throw;
                    // The autoscheduler's Funcs are scheduled now: lower afresh for the templates.
                    const Graph &templates_on = compose::group_graph(g, grp, options.target, view);
                    exec::LoweredGroup again =
                        lower(templates_on, grp, live_out, weights, ScheduleSource::Templates, options.target, layouts);
                    compiled =
                        schedule_and_compile(templates_on, grp, again, ScheduleSource::Templates, run.flops, options);
                    record_views(*compiled, g, templates_on, again);
                    std::string why = e.what();
                    while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
                    compiled->note = std::string(to_string(options.schedule)) + "'s schedule failed in Halide (" + why +
                                     "); scheduled by the templates instead";
                }
            } catch (Error &e) {
                throw e.at_node(master->name, master->op).in_file(g.source);
            } catch (const Halide::Error &e) {
                std::string who = options.schedule == ScheduleSource::Templates
                                      ? "Halide failed to compile group "
                                      : "Halide's " + exec::autoscheduler_name(options.schedule) +
                                            " autoscheduler or compiler failed on group ";
                throw Error(who + grp.name + ": " + e.what()).at_node(master->name, master->op).in_file(g.source);
            }
            num_compiled++;
        }
        run.compiled = compiled;
        groups.push_back(std::move(run));
    }
}

void Executor::Impl::allocate_intermediates() {
    const std::set<std::string> returned(graph.outputs.begin(), graph.outputs.end());
    // Requests by storage class: "" for dense values, else the layout and shape.
    std::map<std::string, std::vector<exec::BufferRequest>> classes;
    std::map<std::string, std::pair<std::string, size_t>> index;
    for (size_t i = 0; i < groups.size(); i++) {
        for (const std::string &v : groups[i].input_values) {
            if (auto it = index.find(v); it != index.end()) {
                classes[it->second.first][it->second.second].last_use = static_cast<int>(i);
            }
        }
        for (const std::string &v : groups[i].output_values) {
            if (returned.count(v)) continue;
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
        out.push_back({r.name, r.master, r.members, r.compiled->schedule, r.compiled->note, r.compiled->compile_ms,
                       r.compiled->parallel_runtime, r.compiled->schedule_template, r.ops, r.flops});
    }
    return out;
}
int Executor::num_compiled() const {
    return impl_->num_compiled;
}
double Executor::runtime_compile_ms() const {
    return impl_->runtime_compile_ms;
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
        CompiledPipeline &cp = *gr.compiled;
        for (size_t i = 0; i < cp.params.size(); i++) {
            const TensorBuffer &b = slots[gr.input_slots[i]];
            cp.params[i].set(cp.param_views.empty() ? b : compose::reshaped(b, cp.param_views[i]));
        }
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
    p.total_ms = median(totals);
    for (size_t i = 0; i < impl_->groups.size(); i++) {
        const GroupRun &gr = impl_->groups[i];
        p.groups.push_back({gr.name, gr.master, gr.members, median(per_group[i])});
    }
    return p;
}

}  // namespace hfuse
