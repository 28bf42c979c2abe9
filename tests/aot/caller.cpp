// A plain C++ caller of a model compiled by `hfuse compile`: no hfuse, no Halide library, only the
// generated headers, the static library and Halide's HalideBuffer.h (copied beside them):
//
//   hfuse compile models/rnn_cell.json -o out --name rnn_cell
//   g++ -std=c++17 -O2 -fopenmp -I out -DMODEL_HEADER='"rnn_cell.h"' -DMODEL_ARGV=rnn_cell_argv
//       tests/aot/caller.cpp out/rnn_cell.a -ldl -lpthread -o caller
//   ./caller [--runs N] in:128,1:x.f32 in:128,1:h.f32 out:128,1:h_next.f32
//
// Each argument is one buffer of the compiled function, in its order: in/out, the extents (Halide
// order: the ONNX shape reversed), and a raw float32 file to read (in) or write (out). It calls the
// function through its _argv entry point, prints the return code and which allocator and parallel
// loops Halide ran it on ("runtime malloc hfuse|halide|other parallel openmp|halide|other"), and with
// --runs N the median time of N further calls and the page faults they took per call. With --query,
// it makes a bounds query instead (every buffer without memory, its dimensions zeroed) and prints
// what the function wrote into each: "query 0: min,extent,stride min,extent,stride ...". Exit code:
// 0 if the call succeeded, 1 if it returned an error, 2 on bad usage.
#include MODEL_HEADER

#include "HalideBuffer.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Arg {
    bool output = false;
    std::vector<int> extents;
    std::string file;
};

bool parse_arg(const std::string &s, Arg &a) {
    size_t c1 = s.find(':'), c2 = s.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) return false;
    std::string kind = s.substr(0, c1);
    if (kind != "in" && kind != "out") return false;
    a.output = kind == "out";
    std::stringstream extents(s.substr(c1 + 1, c2 - c1 - 1));
    for (std::string e; std::getline(extents, e, ',');) a.extents.push_back(std::atoi(e.c_str()));
    a.file = s.substr(c2 + 1);
    return !a.extents.empty() && !a.file.empty();
}

// Which allocator and parallel loops Halide's runtime has installed: swapped out and back (nothing
// else runs meanwhile). hfuse's are those of hfuse_runtime.h, which the model's header includes.
void report_runtime() {
    halide_malloc_t m = halide_set_custom_malloc(halide_default_malloc);
    halide_set_custom_malloc(m);
    halide_do_par_for_t p = halide_set_custom_do_par_for(halide_default_do_par_for);
    halide_set_custom_do_par_for(p);
    const char *parallel = p == halide_default_do_par_for ? "halide" : "other";
#ifdef _OPENMP
    if (p == hfuse_openmp_do_par_for) parallel = "openmp";
#endif
    std::printf("runtime malloc %s parallel %s\n",
                m == hfuse_cached_malloc     ? "hfuse"
                : m == halide_default_malloc ? "halide"
                                             : "other",
                parallel);
}

long minor_faults() {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

}  // namespace

int main(int argc, char **argv) {
    int runs = 0;
    bool query = false;
    std::vector<Arg> args;
    for (int i = 1; i < argc; i++) {
        std::string s = argv[i];
        if (s == "--query") {
            query = true;
            continue;
        }
        if (s == "--runs" && i + 1 < argc) {
            runs = std::atoi(argv[++i]);
            continue;
        }
        Arg a;
        if (!parse_arg(s, a)) {
            std::fprintf(stderr, "caller: bad argument '%s' (expected in|out:EXTENTS:FILE)\n", s.c_str());
            return 2;
        }
        args.push_back(a);
    }
    if (query) {
        std::vector<std::vector<halide_dimension_t>> dims;
        std::vector<halide_buffer_t> raw(args.size());
        std::vector<void *> ptrs;
        for (const Arg &a : args) dims.emplace_back(a.extents.size(), halide_dimension_t(0, 0, 0));
        for (size_t i = 0; i < args.size(); i++) {
            raw[i].type = halide_type_of<float>();
            raw[i].dimensions = static_cast<int32_t>(dims[i].size());
            raw[i].dim = dims[i].data();
            ptrs.push_back(&raw[i]);
        }
        int rc = MODEL_ARGV(ptrs.data());
        std::printf("rc %d\n", rc);
        for (size_t i = 0; i < args.size(); i++) {
            std::printf("query %zu:", i);
            for (const halide_dimension_t &d : dims[i]) std::printf(" %d,%d,%d", d.min, d.extent, d.stride);
            std::printf("\n");
        }
        return rc == 0 ? 0 : 1;
    }
    std::vector<Halide::Runtime::Buffer<float>> buffers;
    for (const Arg &a : args) {
        Halide::Runtime::Buffer<float> b(a.extents);
        if (!a.output) {
            std::ifstream in(a.file, std::ios::binary);
            in.read(reinterpret_cast<char *>(b.data()), sizeof(float) * b.number_of_elements());
            if (!in) {
                std::fprintf(stderr, "caller: cannot read %zu floats from %s\n", b.number_of_elements(),
                             a.file.c_str());
                return 2;
            }
        } else {
            b.fill(0.0f);
        }
        buffers.push_back(std::move(b));
    }
    std::vector<void *> argv_ptrs;
    for (auto &b : buffers) argv_ptrs.push_back(b.raw_buffer());
    int rc = MODEL_ARGV(argv_ptrs.data());
    std::printf("rc %d\n", rc);
    report_runtime();
    if (rc != 0) return 1;
    for (size_t i = 0; i < args.size(); i++) {
        if (!args[i].output) continue;
        std::ofstream out(args[i].file, std::ios::binary);
        out.write(reinterpret_cast<const char *>(buffers[i].data()), sizeof(float) * buffers[i].number_of_elements());
    }
    if (runs > 0) {
        const long faults_before = minor_faults();
        std::vector<double> ms;
        for (int r = 0; r < runs; r++) {
            auto t0 = std::chrono::steady_clock::now();
            if (MODEL_ARGV(argv_ptrs.data()) != 0) return 1;
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        const double faults = static_cast<double>(minor_faults() - faults_before) / runs;
        std::sort(ms.begin(), ms.end());
        std::printf("median_ms %.6f min_ms %.6f runs %d faults_per_run %.1f\n", ms[ms.size() / 2], ms[0], runs, faults);
    }
    return 0;
}
