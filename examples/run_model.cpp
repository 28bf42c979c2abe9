// The hfuse C++ API end to end: load a model, plan fusion, compile every group once, run it on
// Halide buffers, and check the fused result against the unfused graph.
//
//   build/bin/hfuse_example_run_model [MODEL.json] [RULES]     (defaults: the bundled conv+bias+relu+maxpool, x86)
//
// Tensors are Halide buffers whose extents are the ONNX dims reversed: an NCHW (N, C, H, W) tensor is
// a buffer of extents (W, H, C, N) — the same memory as a row-major NCHW array — so data from any
// NCHW source can be wrapped without copying.
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    const std::string model = argc > 1 ? argv[1] : HFUSE_EXAMPLE_MODEL;
    const std::string rules = argc > 2 ? argv[2] : "x86";
    try {
        // 1. Load: parse, validate, infer shapes.
        hfuse::Graph graph = hfuse::load_model(model);

        // 2. Plan: simplify (fold BatchNorm, ...) and group ops under a rule set; print the plan.
        hfuse::FusedGraph plan = hfuse::plan_fusion(graph, {hfuse::load_rules(rules)});
        std::printf("%s\n", hfuse::plan_table(plan).c_str());

        // 3. Compile: one JIT pipeline per group, scheduled by the composer's templates.
        auto t0 = std::chrono::steady_clock::now();
        hfuse::Executor fused(plan);
        auto t1 = std::chrono::steady_clock::now();
        std::printf("compiled %d groups in %.0f ms\n", fused.num_groups(),
                    std::chrono::duration<double, std::milli>(t1 - t0).count());

        // 4. Inputs: plain row-major NCHW arrays wrapped as Halide buffers (extents reversed, no copy).
        std::vector<std::vector<float>> storage;
        std::map<std::string, hfuse::TensorBuffer> inputs;
        for (const hfuse::GraphInput &in : graph.inputs) {
            storage.emplace_back(hfuse::num_elements(in.shape));
            std::vector<float> &data = storage.back();
            for (size_t i = 0; i < data.size(); i++) data[i] = std::sin(0.001f * static_cast<float>(i));
            std::vector<int> extents(in.shape.rbegin(), in.shape.rend());
            inputs[in.name] = hfuse::TensorBuffer(data.data(), extents);
        }

        // 5. Run (repeatable: buffers and compiled code are reused) and compare with the unfused graph.
        std::map<std::string, hfuse::TensorBuffer> outputs = fused.run(inputs);
        hfuse::Executor unfused(graph, hfuse::Executor::unfused_partition(graph));
        std::map<std::string, hfuse::TensorBuffer> expected = unfused.run(inputs);
        bool ok = true;
        for (const auto &[name, out] : outputs) {
            const hfuse::TensorBuffer &ref = expected.at(name);
            double max_err = 0, scale = 0;
            for (size_t i = 0; i < out.number_of_elements(); i++) {
                max_err = std::max(max_err, (double)std::fabs(out.data()[i] - ref.data()[i]));
                scale = std::max(scale, (double)std::fabs(ref.data()[i]));
            }
            const bool match = max_err <= 1e-4 * std::max(scale, 1e-30);
            ok = ok && match;
            std::printf("output '%s' [%s]: max |fused - unfused| = %.3g (scale %.3g) %s\n", name.c_str(),
                        hfuse::to_string(hfuse::shape_of(out)).c_str(), max_err, scale, match ? "OK" : "MISMATCH");
        }
        return ok ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
