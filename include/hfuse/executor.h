// Runs a prepared graph (validated, shapes inferred) partitioned into groups: each group becomes one
// Halide pipeline, JIT-compiled once when the Executor is built, and run in topological order.
//
//   Graph g = load_model("models/conv_bias_relu_maxpool.json");
//   Executor ex(g, Executor::unfused_partition(g));
//   auto outputs = ex.run({{"input", input_buffer}});
//
// Tensors cross the API as TensorBuffers: dense Halide buffers whose extents are the ONNX dims
// reversed (NCHW (N, C, H, W) -> extents (W, H, C, N)), i.e. exactly the memory of a row-major NCHW array.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"

#include <Halide.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hfuse {

using TensorBuffer = Halide::Buffer<float>;

TensorBuffer make_tensor_buffer(const Shape &shape);
Shape shape_of(const TensorBuffer &buffer);
// Copies a row-major array of num_elements(shape) floats into a new buffer.
TensorBuffer tensor_from_data(const Shape &shape, const float *data);

struct ExecutorOptions {
    Halide::Target target = Halide::get_jit_target_from_environment();
};

class Executor {
public:
    // One group per node: the unfused baseline, every op its own root stage.
    static Partition unfused_partition(const Graph &graph);

    // Lowers and JIT-compiles every group; throws an Error if the partition or graph is unusable.
    Executor(const Graph &graph, const Partition &groups, ExecutorOptions options = {});
    // Runs a plan: each group one pipeline, members placed as the plan says, claimed groups lowered by
    // their backend.
    explicit Executor(const FusedGraph &plan, ExecutorOptions options = {});
    ~Executor();
    Executor(Executor &&) noexcept;
    Executor &operator=(Executor &&) noexcept;

    const Graph &graph() const;
    int num_groups() const;

    // Runs the model. `inputs` holds one buffer per model input, by name, shaped as the model says
    // (an Error names the input otherwise). Returns the model outputs by name. Buffers of
    // intermediates are kept and reused by later runs.
    std::map<std::string, TensorBuffer> run(const std::map<std::string, TensorBuffer> &inputs);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Number of worker threads Halide uses; n <= 0 means one per core. Call before the first run.
void set_num_threads(int n);

}  // namespace hfuse
