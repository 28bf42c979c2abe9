#include "test_util.h"

#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/random.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hfuse::test {

std::string tmp_path(const std::string &name) {
    const testing::TestInfo *info = testing::UnitTest::GetInstance()->current_test_info();
    std::string suite = info ? info->test_suite_name() : "hfuse";
    for (char &c : suite) {
        if (c == '/') c = '_';  // a parameterised suite's prefix
    }
    return testing::TempDir() + "/hfuse_" + suite + "_" + std::to_string(getpid()) + "_" + name;
}

nlohmann::json model_node(const std::string &name, const std::string &op, const std::vector<std::string> &inputs,
                          const nlohmann::json &attrs) {
    nlohmann::json n = {{"name", name}, {"op", op}, {"inputs", inputs}};
    if (!attrs.empty()) n["attrs"] = attrs;
    return n;
}

Graph one_input_model(const std::string &name, const Shape &shape, const nlohmann::json &nodes,
                      const std::vector<std::string> &outputs, const nlohmann::json &weights) {
    const nlohmann::json m = {{"format", "hfuse-model"},
                              {"version", 1},
                              {"name", name},
                              {"inputs", {{{"name", "x"}, {"shape", shape}}}},
                              {"weights", weights},
                              {"nodes", nodes},
                              {"outputs", outputs}};
    return prepare(parse_model(m, ".", name + ".json"));
}

Graph residual_net(int blocks, int seed) {
    auto conv_weight = [](int cout, int cin, int k, int wseed) {
        return nlohmann::json{{"shape", {cout, cin, k, k}}, {"uniform", {-0.3, 0.3}}, {"seed", wseed}};
    };
    nlohmann::json nodes = nlohmann::json::array(), weights = nlohmann::json::object();
    weights["stem.w"] = conv_weight(8, 3, 3, seed - 9);
    const nlohmann::json pad = {{"pads", {1, 1, 1, 1}}};
    nodes.push_back(model_node("stem", "Conv", {"x", "stem.w"}, pad));
    nodes.push_back(model_node("stem_relu", "Relu", {"stem"}));
    std::string in = "stem_relu";
    for (int b = 0; b < blocks; b++) {
        const std::string p = "b" + std::to_string(b) + "_";
        weights[p + "w1"] = conv_weight(8, 8, 3, seed + 2 * b);
        weights[p + "w2"] = conv_weight(8, 8, 3, seed + 1 + 2 * b);
        nodes.push_back(model_node(p + "c1", "Conv", {in, p + "w1"}, pad));
        nodes.push_back(model_node(p + "r1", "Relu", {p + "c1"}));
        nodes.push_back(model_node(p + "c2", "Conv", {p + "r1", p + "w2"}, pad));
        nodes.push_back(model_node(p + "add", "Add", {p + "c2", in}));
        nodes.push_back(model_node(p + "out", "Relu", {p + "add"}));
        in = p + "out";
    }
    return one_input_model("residual", {1, 3, 10, 10}, nodes, {in}, weights);
}

namespace {
// The kernel cache of the CLI commands the tests run (tests/CMakeLists.txt), unless one is set.
const bool kernel_cache_dir_set = [] {
    return setenv("HFUSE_CACHE_DIR", HFUSE_TEST_KERNEL_CACHE, /*overwrite=*/0) == 0;
}();
}  // namespace

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

bool contains(const std::string &haystack, const std::string &needle) {
    return haystack.find(needle) != std::string::npos;
}

CommandResult run_command(const std::string &cmd, bool stderr_only) {
    FILE *p = popen((cmd + (stderr_only ? " 2>&1 >/dev/null" : " 2>&1")).c_str(), "r");
    CommandResult r{-1, ""};
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

CommandResult run_cli(const std::string &args, bool stderr_only) {
    return run_command(std::string(HFUSE_CLI) + " " + args, stderr_only);
}

ModelInputs make_inputs(const Graph &graph, uint64_t seed) {
    ModelInputs in;
    for (size_t i = 0; i < graph.inputs.size(); i++) {
        const GraphInput &gi = graph.inputs[i];
        std::vector<float> values = uniform_values(num_elements(gi.shape), -1, 1, seed + i);
        in.buffers[gi.name] = tensor_from_data(gi.shape, values.data());
        in.reference[gi.name] = {gi.shape, values};
    }
    return in;
}

void expect_outputs_match_reference(const Graph &g, const ModelInputs &in,
                                    const std::map<std::string, TensorBuffer> &actual, double tolerance) {
    std::map<std::string, reference::RefTensor> expected = reference::run(g, in.reference);
    for (const std::string &out : g.outputs) {
        const reference::RefTensor &e = expected.at(out);
        ASSERT_EQ(shape_of(actual.at(out)), e.shape) << "output " << out;
        reference::Comparison cmp = reference::compare(actual.at(out).data(), e.data.data(), e.data.size());
        EXPECT_LE(cmp.relative(), tolerance)
            << "output " << out << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
    }
}

void expect_plan_matches_reference(const FusedGraph &plan, double tolerance, const Graph *model) {
    const Graph &g = model ? *model : plan.graph;
    ModelInputs in = make_inputs(g);
    Executor ex(plan);
    expect_outputs_match_reference(g, in, ex.run(in.buffers), tolerance);
}

void expect_pipeline_matches_reference(const FusedGraph &plan, double tolerance, const Graph *model) {
    const Graph &g = model ? *model : plan.graph;
    ModelInputs in = make_inputs(g);
    expect_outputs_match_reference(g, in, ModelPipeline(plan).run(in.buffers), tolerance);
}

}  // namespace hfuse::test
