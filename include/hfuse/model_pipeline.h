// A whole plan as one Halide pipeline: the ahead-of-time form of a model (`hfuse compile`, the model
// generator, hfuse_add_model in CMake).
//
// Each group is lowered and scheduled exactly as the executor does it (the same composer and
// templates), except that it reads the values of earlier groups as their Funcs instead of through
// ImageParams; every value handed from one group to another is computed at root, so the groups keep
// their boundaries. The model's inputs are the pipeline's ImageParams and its outputs the pipeline's
// outputs, in model order, each pinned to its static shape (dense, row-major): the compiled code
// refuses a buffer of another shape with an error code. Weights are baked in as constants.
//
//   FusedGraph plan = with_default_schedules(plan_fusion(simplify(g), {load_rules("x86")}), target);
//   ModelPipeline mp(plan, {target});
//   mp.compile_to_static_library("out", "my_model");   // out/my_model.a (Halide runtime included),
//                                                      // out/my_model.h: int my_model(in..., out...)
//   auto outputs = mp.run(inputs);                     // or JIT-compile and run it here
#pragma once

#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/target.h"

#include <Halide.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace hfuse {

struct ModelPipelineOptions {
    Halide::Target target = host_target();
    // Templates: every group scheduled by the composer. An autoscheduler: the groups are lowered
    // unscheduled and the whole pipeline is handed to it (with estimates from the static shapes).
    ScheduleSource schedule = ScheduleSource::Templates;
    int parallelism = 0;  // cores an autoscheduler plans for (see ExecutorOptions)
    // Who runs the parallel loops (see ExecutorOptions; Auto by the whole model's FLOPs), in run() and
    // in a compiled library: its header installs hfuse_runtime.h's OpenMP loops at start-up in a
    // program compiled with -fopenmp.
    ParallelRuntime parallel_runtime = ParallelRuntime::Auto;
};

// One argument of the compiled function, in call order (inputs, then outputs).
struct ModelArgument {
    std::string value;   // the model's input or output name
    std::string c_name;  // the parameter name in the generated header (a C identifier)
    Shape shape;         // ONNX order; the buffer's extents are these reversed
    bool is_output = false;
    // The shape NAME_pipeline (Halide's function) takes the buffer in: `shape`, or for an output that
    // its group computes on its position view (compose/position_view.h), the row [N, C, 1, H * W]
    // of [N, C, H, W]. NAME and run() hand the caller's dense buffer over reshaped so.
    Shape stored_shape;
};

class ModelPipeline {
public:
    // Throws an Error if a group cannot be part of one pipeline (a backend-claimed group, whose
    // extern functions exist only in this process) or a schedule does not fit.
    ModelPipeline(const FusedGraph &plan, ModelPipelineOptions options = {});
    ~ModelPipeline();
    ModelPipeline(ModelPipeline &&) noexcept;
    ModelPipeline &operator=(ModelPipeline &&) noexcept;

    const Graph &graph() const;
    const ModelPipelineOptions &options() const;
    // Model inputs then model outputs, in model order: the signature of the compiled function.
    const std::vector<ModelArgument> &arguments() const;
    Halide::Pipeline pipeline() const;
    // The pipeline's input parameters, in model input order.
    std::vector<Halide::Argument> halide_arguments() const;

    // Writes DIR/NAME.a (with the Halide runtime, unless the target says no_runtime), DIR/NAME.h
    // declaring int NAME(halide_buffer_t *<input>..., halide_buffer_t *<output>...) in model order,
    // with a comment listing each argument's shape, and DIR/hfuse_runtime.h, which NAME.h includes and
    // installs at start-up (include/hfuse/hfuse_runtime.h: a block cache as Halide's allocator, and
    // with resolved_parallel_runtime() OpenMP, OpenMP's loops). `name` must be a C identifier.
    // `emit` adds Halide's own views of the same compilation beside them, as a generator's -e does:
    // "stmt" (DIR/NAME.stmt, the lowered statement), "html" (DIR/NAME.stmt.html), "assembly"
    // (DIR/NAME.s) and "llvm" (DIR/NAME.ll, LLVM IR).
    void compile_to_static_library(const std::string &dir, const std::string &name,
                                   const std::vector<std::string> &emit = {}) const;
    // The values handed from group to group other than dense NCHW, as Executor::value_layouts() names
    // them: {"relu_3", "blocked 8, halo 0x0"}. Those the executor stores channel-blocked, but with no
    // halo: a padded reader copies them block for block.
    std::map<std::string, std::string> value_layouts() const;

    // options().parallel_runtime with Auto resolved by the model's FLOPs.
    ParallelRuntime resolved_parallel_runtime() const;

    // JIT-compiles (once) and runs the pipeline in this process, like Executor::run.
    std::map<std::string, TensorBuffer> run(const std::map<std::string, TensorBuffer> &inputs);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Whether `name` can name the compiled function: a C identifier that is not a C/C++ keyword.
bool is_c_identifier(const std::string &name);

// The C parameter names of a compiled model (ModelPipeline, the generators): the graph's inputs then
// its outputs, each value's name with every character outside [A-Za-z0-9_] replaced by '_' and runs
// of '_' collapsed (Halide rejects "__"), prefixed "v_" unless it starts with a letter and is no
// keyword, and suffixed "_2", "_3", ... where it would clash with an earlier one or with `reserved`.
//   inputs "x.0", "int"; outputs "a", "a"  ->  x_0, v_int, a, a_2
std::vector<std::string> c_argument_names(const Graph &graph, std::set<std::string> reserved = {});

}  // namespace hfuse
