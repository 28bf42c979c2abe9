// Harness for op tests: builds a one-node graph, runs it through the unfused Halide executor and the
// independent reference evaluator, and compares every output.
//
//   OpCase c{"Conv", {{"kernel_shape", {3, 3}}, {"pads", {1, 0, 2, 1}}},
//            {activation({1, 3, 9, 7}), weight({4, 3, 3, 3}), weight({4})}};
//   check_op(c);   // EXPECTs every output within tolerance; reports the case on failure
#pragma once

#include "hfuse/graph.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace hfuse::test {

struct InputSpec {
    enum Kind { Activation, Weight, Missing } kind = Activation;
    Shape shape;
    DType dtype = DType::Float32;
    std::vector<float> f32;    // explicit values (weights); random when empty
    std::vector<int64_t> i64;  // int64 weights
};

// A model input filled with seeded uniform values in [-1, 1].
InputSpec activation(Shape shape);
// A float weight: random in [lo, hi] unless values are given.
InputSpec weight(Shape shape, double lo = -1.0, double hi = 1.0);
InputSpec weight_values(Shape shape, std::vector<float> values);
// An int64 weight (shape-like input), shape [values.size()].
InputSpec ints(std::vector<int64_t> values);
// An optional input left out ("" in the node's inputs).
InputSpec missing();

struct OpCase {
    std::string op;
    nlohmann::json attrs = nlohmann::json::object();
    std::vector<InputSpec> inputs;
    int num_outputs = 1;
};

Graph make_single_op_graph(const OpCase &c, uint64_t seed = 1);

// Runs the case through both evaluators. `tolerance` is relative to the largest |reference| value.
void check_op(const OpCase &c, double tolerance = 1e-4, uint64_t seed = 1);

// Expects building/preparing the graph to throw an hfuse::Error whose message contains `needle`.
void expect_op_error(const OpCase &c, const std::string &needle);

// A small reproducible RNG for randomized shapes.
class Rng {
public:
    explicit Rng(uint32_t seed) : gen_(seed) {}
    int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
    bool coin() { return uniform_int(0, 1) == 1; }

private:
    std::mt19937 gen_;
};

std::string describe(const OpCase &c);

}  // namespace hfuse::test
