// Helpers shared by test suites: running the CLI, seeded model inputs, checking a plan against the
// independent reference evaluator.
#pragma once

#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/reference.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hfuse::test {

// hfuse's bundled models (models/, with the slash) and the conv+bias+relu+maxpool model among them.
inline const std::string kModels = std::string(HFUSE_SOURCE_DIR) + "/models/";
inline const std::string kCbrm = kModels + "conv_bias_relu_maxpool.json";
// The built-in rule sets' sources (with the slash).
inline const std::string kRulesDir = std::string(HFUSE_SOURCE_DIR) + "/src/planner/rules/";

// The target JIT compilation takes (HL_JIT_TARGET, else the host).
inline const Halide::Target kJitTarget = Halide::get_jit_target_from_environment();

// A path for `name` in the tests' scratch directory (testing::TempDir()), unique to this process and
// to the running test's suite.
std::string tmp_path(const std::string &name);

struct CommandResult {
    int code;         // exit code, -1 if the command did not exit normally
    std::string out;  // stdout and stderr together, or stderr alone
};

CommandResult run_command(const std::string &cmd, bool stderr_only = false);
// The whole file, "" if it cannot be read.
std::string read_file(const std::string &path);
bool contains(const std::string &haystack, const std::string &needle);
// Runs the hfuse CLI built with the tests (HFUSE_CLI) with `args`.
CommandResult run_cli(const std::string &args, bool stderr_only = false);

// A node of a JSON model (model_io.h's format): {"name", "op", "inputs"}, and "attrs" when given.
nlohmann::json model_node(const std::string &name, const std::string &op, const std::vector<std::string> &inputs,
                          const nlohmann::json &attrs = nlohmann::json::object());

// A model over one input `x` of `shape` from inline JSON nodes (and weights, as a model file gives
// them), parsed as if read from `name`.json and prepared (validated, shapes inferred).
Graph one_input_model(const std::string &name, const Shape &shape, const nlohmann::json &nodes,
                      const std::vector<std::string> &outputs,
                      const nlohmann::json &weights = nlohmann::json::object());

// A stem (3x3 conv + Relu) and `blocks` residual blocks of 8 channels at 10x10: conv, Relu, conv,
// Add of the block's input, Relu. Each block has its own weights, seeded from `seed` up.
Graph residual_net(int blocks, int seed = 10);

// Seeded uniform [-1, 1] data for every model input (seed + i for the i-th), in both forms.
struct ModelInputs {
    std::map<std::string, TensorBuffer> buffers;
    std::map<std::string, reference::RefTensor> reference;
};
ModelInputs make_inputs(const Graph &graph, uint64_t seed = 1000);

// Expects every output of `g` in `actual` (a run on `in`) within `tolerance` of the reference run on
// `in`, relative to the output's scale, and of the reference's shape.
void expect_outputs_match_reference(const Graph &g, const ModelInputs &in,
                                    const std::map<std::string, TensorBuffer> &actual, double tolerance = 1e-5);

// Runs `plan` and expects every output of `model` (the graph as loaded, which the reference runs;
// plan.graph when omitted) within `tolerance` of the reference, relative to the output's scale.
void expect_plan_matches_reference(const FusedGraph &plan, double tolerance, const Graph *model = nullptr);
// The same for `plan` as one whole-model pipeline (ModelPipeline, JIT-compiled here).
void expect_pipeline_matches_reference(const FusedGraph &plan, double tolerance, const Graph *model = nullptr);

}  // namespace hfuse::test
