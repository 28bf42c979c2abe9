// ModelPipeline: the groups of a plan lowered into one Halide pipeline (see hfuse/model_pipeline.h).
#include "hfuse/model_pipeline.h"

#include "compose/position_view.h"
#include "exec/autoschedule.h"
#include "exec/group_lowering.h"
#include "exec/jit_allocator.h"
#include "exec/jit_runtime.h"
#include "exec/model_lowering.h"
#include "exec/parallel_runtime.h"
#include "exec/runtime_header.h"
#include "exec/value_layout.h"
#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "ops/halide_util.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace hfuse {

bool is_c_identifier(const std::string &name) {
    static const std::set<std::string> keywords = {
        "auto",     "break",     "case",   "char",     "const",    "continue", "default",   "do",
        "double",   "else",      "enum",   "extern",   "float",    "for",      "goto",      "if",
        "inline",   "int",       "long",   "register", "restrict", "return",   "short",     "signed",
        "sizeof",   "static",    "struct", "switch",   "typedef",  "union",    "unsigned",  "void",
        "volatile", "while",     "bool",   "class",    "delete",   "new",      "namespace", "operator",
        "private",  "protected", "public", "template", "this",     "throw",    "try",       "typename",
        "using",    "virtual",   "catch",  "friend",   "mutable",  "true",     "false",     "nullptr"};
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    return !keywords.count(name);
}

namespace {

std::string read_text(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The part of a compiled model's header that installs hfuse_runtime.h's block cache as Halide's
// allocator and, for a model run on OpenMP, its OpenMP loops, at start-up (before any thread of the
// program can be running a pipeline), unless the program asks to keep Halide's.
std::string runtime_installer(const std::string &name, ParallelRuntime runtime) {
    const bool openmp = runtime == ParallelRuntime::OpenMP;
    std::ostringstream s;
    s << "// hfuse: at start-up, the block cache of hfuse_runtime.h becomes Halide's allocator (buffers\n"
      << "// are reused run after run, not faulted in again)";
    if (openmp) {
        s << " and, in a program compiled with -fopenmp, the\n// parallel loops run on OpenMP's static "
             "schedule (threads: OMP_NUM_THREADS); define\n// HFUSE_HALIDE_THREAD_POOL to run them on "
             "Halide's thread pool (HL_NUM_THREADS) instead";
    } else {
        s << ";\n// its parallel loops run on Halide's thread pool (HL_NUM_THREADS; `hfuse compile "
             "--parallel-runtime`)";
    }
    s << ".\n// An allocator or loop runtime the program installed first is kept. Define\n"
      << "// HFUSE_KEEP_HALIDE_RUNTIME to install neither.\n"
      << "#include \"hfuse_runtime.h\"\n"
      << "#ifndef HFUSE_KEEP_HALIDE_RUNTIME\n";
    if (openmp) {
        s << "#if !defined(_OPENMP) && !defined(HFUSE_HALIDE_THREAD_POOL)\n"
          << "#warning \"" << name
          << " runs its parallel loops on OpenMP: compile with -fopenmp, or define HFUSE_HALIDE_THREAD_POOL "
             "to run them on Halide's thread pool\"\n"
          << "#endif\n";
    }
    s << "__attribute__((constructor)) static void " << name << "_install_runtime(void) {\n";
    if (openmp) {
        s << "#ifdef HFUSE_HALIDE_THREAD_POOL\n"
          << "    hfuse_runtime_install(0);\n"
          << "#else\n"
          << "    hfuse_runtime_install(1);\n"
          << "#endif\n";
    } else {
        s << "    hfuse_runtime_install(0);\n";
    }
    s << "}\n#endif\n\n";
    return s.str();
}

// "struct halide_buffer_t *x, ...": the arguments as C parameters, in order (NAME_pipeline's and NAME's).
std::string c_parameters(const std::vector<ModelArgument> &arguments) {
    std::string params;
    for (const ModelArgument &a : arguments) {
        params += std::string(params.empty() ? "" : ", ") + "struct halide_buffer_t *" + a.c_name;
    }
    return params;
}

// `text` as the body of a C string literal.
std::string c_string_body(const std::string &text) {
    std::string s;
    for (char c : text) {
        if (c == '"' || c == '\\') s += '\\';
        if (c == '\n') {
            s += "\\n";
            continue;
        }
        s += c;
    }
    return s;
}

// The model's entry points: NAME(inputs..., outputs...) and NAME_argv(args), which check every
// buffer's extents (NAME_check_extents) and call Halide's PIPELINE after making errors return codes
// (NAME_return_errors). An output PIPELINE takes as the row its group computes
// (ModelArgument::stored_shape) is the caller's dense buffer viewed so: a halide_buffer_t of the
// same memory with the first two dimensions (W, H) made (W * H, 1).
std::string entry_points(const std::string &name, const std::string &pipeline,
                         const std::vector<ModelArgument> &arguments) {
    std::ostringstream s;
    std::string args, argv;
    bool rows = false;
    for (size_t i = 0; i < arguments.size(); i++) {
        const ModelArgument &a = arguments[i];
        const bool row = a.stored_shape != a.shape;
        rows = rows || row;
        args += std::string(i ? ", " : "") + (row ? "hfuse_pass[" + std::to_string(i) + "]" : a.c_name);
        argv += std::string(i ? ", " : "") + "(struct halide_buffer_t *)args[" + std::to_string(i) + "]";
    }
    // Every argument's dimensions checked before the pipeline runs: an error names the argument, the
    // model's value and the extents it needs (Halide's own message names its internal Funcs).
    s << "#include <stdio.h>\n#include <string.h>\n\n"
      << "// hfuse: 0 if `b` has the `dimensions` extents the model needs from 0 (or is a bounds query);\n"
      << "// else an error naming the argument, printed and returned.\n"
      << "static inline int " << name << "_check_extents(const struct halide_buffer_t *b, const char *kind,\n"
      << "        const char *argument, const char *value, int dimensions, const int *extents) {\n"
      << "    char msg[512], have[160] = \"\", need[160] = \"\";\n"
      << "    int k, ok;\n"
      << "    if (b == NULL) {\n"
      << "        snprintf(msg, sizeof msg, \"" << name
      << ": the %s buffer %s ['%s'] is NULL\", kind, argument, value);\n"
      << "        halide_error(NULL, msg);\n"
      << "        return halide_error_code_buffer_argument_is_null;\n"
      << "    }\n"
      << "    if (b->host == NULL && b->device == 0) return 0; /* a bounds query */\n"
      << "    ok = b->dimensions == dimensions;\n"
      << "    for (k = 0; k < b->dimensions; k++) {\n"
      << "        if (k >= dimensions || b->dim[k].min != 0 || b->dim[k].extent != extents[k]) ok = 0;\n"
      << "        snprintf(have + strlen(have), sizeof have - strlen(have), \"%s%d\", k ? \", \" : \"\",\n"
      << "                 b->dim[k].extent);\n"
      << "        if (b->dim[k].min != 0)\n"
      << "            snprintf(have + strlen(have), sizeof have - strlen(have), \" from %d\", b->dim[k].min);\n"
      << "    }\n"
      << "    if (ok) return 0;\n"
      << "    for (k = 0; k < dimensions; k++)\n"
      << "        snprintf(need + strlen(need), sizeof need - strlen(need), \"%s%d\", k ? \", \" : \"\", extents[k]);\n"
      << "    snprintf(msg, sizeof msg,\n"
      << "             \"" << name << ": the %s buffer %s ['%s'] has extents (%s), but the model needs (%s) from 0 \"\n"
      << "             \"(its shape reversed: Halide's dimension 0 is the innermost)\",\n"
      << "             kind, argument, value, have, need);\n"
      << "    halide_error(NULL, msg);\n"
      << "    return halide_error_code_bad_dimensions;\n"
      << "}\n\n";
    if (rows) {
        s << "// hfuse: " << pipeline << " takes an output computed as a row of positions, (W, H, C, N) as\n"
          << "// (W * H, 1, C, N): the caller's buffer, which must be dense in W and H, is handed over viewed\n"
          << "// so (no copy). 0, or an error (printed) for a buffer of other extents or strides there.\n"
          << "static inline int " << name << "_view_as_row(struct halide_buffer_t *b, const char *buffer_name,\n"
          << "        int dimensions, int w, int h, struct halide_buffer_t *row, struct halide_dimension_t *dims,\n"
          << "        struct halide_buffer_t **pass) {\n"
          << "    char msg[320];\n"
          << "    int k;\n"
          << "    *pass = b;\n"
          << "    if (b == NULL || b->dimensions != dimensions) return 0; /* " << pipeline << " refuses it */\n"
          << "    if (b->host == NULL && b->device == 0) { /* a bounds query, answered dense */\n"
          << "        b->dim[0].min = 0, b->dim[0].extent = w, b->dim[0].stride = 1;\n"
          << "        b->dim[1].min = 0, b->dim[1].extent = h, b->dim[1].stride = w;\n"
          << "    }\n"
          << "    if (b->dim[0].min != 0 || b->dim[0].extent != w || b->dim[0].stride != 1 || b->dim[1].min != 0 ||\n"
          << "        b->dim[1].extent != h || b->dim[1].stride != w) {\n"
          << "        snprintf(msg, sizeof msg,\n"
          << "                 \"Output buffer %s has mins (%d, %d), extents (%d, %d) and strides (%d, %d) in \"\n"
          << "                 \"dimensions 0 and 1, but (0, 0), (%d, %d) and (1, %d) are required\",\n"
          << "                 buffer_name, b->dim[0].min, b->dim[1].min, b->dim[0].extent, b->dim[1].extent,\n"
          << "                 b->dim[0].stride, b->dim[1].stride, w, h, w);\n"
          << "        halide_error(NULL, msg);\n"
          << "        return halide_error_code_constraint_violated;\n"
          << "    }\n"
          << "    *row = *b;\n"
          << "    row->dim = dims;\n"
          << "    for (k = 2; k < dimensions; k++) dims[k] = b->dim[k];\n"
          << "    dims[0] = b->dim[0], dims[0].extent = w * h;\n"
          << "    dims[1] = b->dim[1], dims[1].extent = 1, dims[1].stride = w * h;\n"
          << "    *pass = row;\n"
          << "    return 0;\n"
          << "}\n\n"
          << "// hfuse: after the call, what " << pipeline << " wrote into the row's halide_buffer_t (its flags;\n"
          << "// in a bounds query the other dimensions) copied into the caller's.\n"
          << "static inline void " << name
          << "_row_written(struct halide_buffer_t *b, const struct halide_buffer_t *pass) {\n"
          << "    int k;\n"
          << "    if (pass == b) return;\n"
          << "    b->flags = pass->flags;\n"
          << "    for (k = 2; k < b->dimensions; k++) b->dim[k] = pass->dim[k];\n"
          << "}\n\n";
    }
    s << "HALIDE_MUST_USE_RESULT static inline int " << name << "(" << c_parameters(arguments) << ") {\n"
      << "    int rc;\n"
      << "    " << name << "_return_errors();\n";
    for (const ModelArgument &a : arguments) {
        s << "    {\n        static const int hfuse_extents[] = {";
        for (size_t k = a.shape.size(); k-- > 0;) s << a.shape[k] << (k ? ", " : "");
        s << "};\n"
          << "        rc = " << name << "_check_extents(" << a.c_name << ", \"" << (a.is_output ? "output" : "input")
          << "\", \"" << a.c_name << "\", \"" << c_string_body(a.value) << "\", " << a.shape.size()
          << ", hfuse_extents);\n"
          << "        if (rc != 0) return rc;\n    }\n";
    }
    if (rows) {
        // Locals named apart from every parameter (ModelPipeline reserves them in c_argument_names).
        size_t max_rank = 0;
        for (const ModelArgument &a : arguments) max_rank = std::max(max_rank, a.shape.size());
        s << "    struct halide_buffer_t hfuse_rows[" << arguments.size() << "], *hfuse_pass[" << arguments.size()
          << "];\n"
          << "    struct halide_dimension_t hfuse_dims[" << arguments.size() << "][" << max_rank << "];\n";
        for (size_t i = 0; i < arguments.size(); i++) {
            const ModelArgument &a = arguments[i];
            if (a.stored_shape == a.shape) continue;
            const size_t r = a.shape.size();
            s << "    rc = " << name << "_view_as_row(" << a.c_name << ", \"" << a.c_name << "\", " << r << ", "
              << a.shape[r - 1] << ", " << a.shape[r - 2] << ", &hfuse_rows[" << i << "], hfuse_dims[" << i
              << "], &hfuse_pass[" << i << "]);\n"
              << "    if (rc != 0) return rc;\n";
        }
        s << "    rc = " << pipeline << "(" << args << ");\n";
        for (size_t i = 0; i < arguments.size(); i++) {
            const ModelArgument &a = arguments[i];
            if (a.stored_shape != a.shape) {
                s << "    " << name << "_row_written(" << a.c_name << ", hfuse_pass[" << i << "]);\n";
            }
        }
        s << "    return rc;\n";
    } else {
        s << "    return " << pipeline << "(" << args << ");\n";
    }
    s << "}\n\n"
      << "HALIDE_MUST_USE_RESULT static inline int " << name << "_argv(void **args) {\n"
      << "    return " << name << "(" << argv << ");\n"
      << "}\n\n";
    return s.str();
}

}  // namespace

std::vector<std::string> c_argument_names(const Graph &graph, std::set<std::string> reserved) {
    auto name_for = [&](const std::string &value) {
        std::string s;
        for (char c : value) {
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
            if (c == '_' && !s.empty() && s.back() == '_') continue;
            s += c;
        }
        if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0])) || !is_c_identifier(s)) {
            s = (s.empty() || s[0] != '_') ? "v_" + s : "v" + s;
        }
        std::string name = s;
        for (int k = 2; !reserved.insert(name).second; k++) name = s + "_" + std::to_string(k);
        return name;
    };
    std::vector<std::string> names;
    for (const GraphInput &in : graph.inputs) names.push_back(name_for(in.name));
    for (const std::string &v : graph.outputs) names.push_back(name_for(v));
    return names;
}

struct ModelPipeline::Impl {
    Graph graph;
    ModelPipelineOptions options;
    exec::WeightBuffers weights;
    std::vector<ModelArgument> arguments;
    std::vector<Halide::ImageParam> params;  // one per model input, in model order
    std::vector<Halide::Func> outputs;       // one per model output, in model order
    exec::ValueLayouts layouts;              // values handed between groups stored blocked
    Halide::Pipeline pipeline;
    bool jit_compiled = false;

    void build(const FusedGraph &plan);
};

void ModelPipeline::Impl::build(const FusedGraph &plan) {
    const Graph &g = graph;
    // Not the names of entry_points()'s locals.
    const std::vector<std::string> names =
        c_argument_names(g, {"rc", "hfuse_rows", "hfuse_dims", "hfuse_pass", "hfuse_extents"});
    size_t k = 0;
    for (const GraphInput &in : g.inputs) {
        arguments.push_back({in.name, names[k++], in.shape, false, in.shape});
        params.emplace_back(Halide::Float(32), static_cast<int>(in.shape.size()), arguments.back().c_name);
    }
    const exec::BoundValues inputs = exec::bind_inputs(g, params);

    const bool templates = options.schedule == ScheduleSource::Templates;
    // An output computed as a row is returned as it is: the caller's buffer viewed as the row (by
    // NAME in the header, by run()), where a copy into planes cost compiled 1x1 128->256 at 28x28 8%.
    exec::LoweredModel model =
        exec::lower_model(plan, inputs, weights, options.target, templates, exec::RowOutputs::AsRows);
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const std::string &v = g.outputs[i];
        const Shape &shape = g.type_of(v).shape, &stored = model.output_shapes[i];
        // The header's NAME views a caller's [..., H, W] as [..., 1, H * W] and nothing else.
        if (stored != shape &&
            (shape.size() < 2 || stored != compose::as_position_row(shape, {shape.end() - 2, shape.end()}))) {
            throw Error("internal: model output '" + v + "' of shape [" + to_string(shape) + "] is stored as [" +
                        to_string(stored) + "], not as a row of its positions");
        }
        arguments.push_back({v, names[k++], shape, true, stored});
    }
    outputs = model.outputs;
    layouts = model.layouts;
    pipeline = Halide::Pipeline(outputs);
    if (!templates) {
        // The autoscheduler sees the whole model: inputs and outputs with their static shapes.
        exec::LoweredGroup whole;
        for (const GraphInput &in : g.inputs) whole.input_values.push_back(in.name);
        whole.params = params;
        whole.output_values = g.outputs;
        whole.output_funcs = outputs;
        exec::autoschedule_group(g, whole, pipeline, options.schedule, options.target, options.parallelism);
    }
}

ModelPipeline::ModelPipeline(const FusedGraph &plan, ModelPipelineOptions options) : impl_(new Impl) {
    impl_->graph = plan.graph;
    impl_->options = options;
    impl_->weights = exec::make_weight_buffers(impl_->graph);
    try {
        impl_->build(plan);
    } catch (const Halide::Error &e) {
        throw Error(std::string("Halide rejected the model pipeline: ") + e.what()).in_file(plan.graph.source);
    }
}

ModelPipeline::~ModelPipeline() = default;
ModelPipeline::ModelPipeline(ModelPipeline &&) noexcept = default;
ModelPipeline &ModelPipeline::operator=(ModelPipeline &&) noexcept = default;

const Graph &ModelPipeline::graph() const {
    return impl_->graph;
}
const ModelPipelineOptions &ModelPipeline::options() const {
    return impl_->options;
}
const std::vector<ModelArgument> &ModelPipeline::arguments() const {
    return impl_->arguments;
}
Halide::Pipeline ModelPipeline::pipeline() const {
    return impl_->pipeline;
}
std::vector<Halide::Argument> ModelPipeline::halide_arguments() const {
    return std::vector<Halide::Argument>(impl_->params.begin(), impl_->params.end());
}

std::map<std::string, std::string> ModelPipeline::value_layouts() const {
    return exec::to_strings(impl_->layouts);
}

ParallelRuntime ModelPipeline::resolved_parallel_runtime() const {
    // The model's FLOPs decide Auto, in run() as in the compiled library.
    return exec::resolve_parallel_runtime(impl_->options.parallel_runtime, graph_flops(impl_->graph));
}

void ModelPipeline::compile_to_static_library(const std::string &dir, const std::string &name,
                                              const std::vector<std::string> &emit) const {
    const Graph &g = impl_->graph;
    if (!is_c_identifier(name)) {
        throw Error("--name '" + name + "' must be a C identifier (letters, digits, '_'; not a keyword)");
    }
    // Halide's function is NAME_pipeline; NAME itself is an inline wrapper in the header (below).
    const std::string prefix = dir + "/" + name, pipeline_fn = name + "_pipeline";
    // One compilation writes the library, its header and the views asked for.
    std::map<Halide::OutputFileType, std::string> outputs = {{Halide::OutputFileType::static_library, prefix + ".a"},
                                                             {Halide::OutputFileType::c_header, prefix + ".h"}};
    for (const std::string &e : emit) {
        if (e == "stmt") {
            outputs[Halide::OutputFileType::stmt] = prefix + ".stmt";
        } else if (e == "html") {
            outputs[Halide::OutputFileType::stmt_html] = prefix + ".stmt.html";
        } else if (e == "assembly") {
            outputs[Halide::OutputFileType::assembly] = prefix + ".s";
        } else if (e == "llvm") {
            outputs[Halide::OutputFileType::llvm_assembly] = prefix + ".ll";
        } else {
            throw Error("'" + e + "' is not one of stmt, html, assembly, llvm").at_field("emit");
        }
    }
    try {
        impl_->pipeline.compile_to(outputs, halide_arguments(), pipeline_fn, impl_->options.target);
    } catch (const Halide::Error &e) {
        throw Error(std::string("Halide failed to compile the model: ") + e.what()).in_file(g.source);
    }
    // Halide names the parameters after its Funcs; give them the model's names (parameter names in a
    // declaration do not change the ABI) and say what they hold.
    std::string header = read_text(prefix + ".h");
    const std::string decl = "int " + pipeline_fn + "(";
    size_t at = header.find(decl);
    size_t end = at == std::string::npos ? at : header.find(')', at);
    size_t guard_end = header.rfind("#endif");
    if (end == std::string::npos || guard_end == std::string::npos || guard_end < end) {
        throw Error("Halide wrote no declaration of " + pipeline_fn).in_file(prefix + ".h");
    }
    std::ostringstream doc;
    doc << "// " << name << ": model '" << g.name << "' compiled by hfuse for " << impl_->options.target.to_string()
        << ".\n//\n// int " << name << "(inputs..., outputs...) returns 0 on success, else a Halide error code\n"
        << "// (a buffer of the wrong shape is refused before anything is read or written, and the error\n"
        << "// printed). Each tensor is a dense float buffer whose extents are its ONNX shape reversed: NCHW\n"
        << "// (N, C, H, W) is a Halide::Runtime::Buffer<float> of extents (W, H, C, N), the memory of a\n"
        << "// row-major array.\n//\n";
    for (const ModelArgument &a : impl_->arguments) {
        doc << "//   " << (a.is_output ? "output " : "input  ") << a.c_name << " ['" << a.value << "'] shape ["
            << to_string(a.shape) << "]";
        if (a.stored_shape != a.shape)
            doc << " (" << pipeline_fn << " takes it as [" << to_string(a.stored_shape) << "])";
        doc << "\n";
    }
    // Halide's default error handler aborts the process; the wrappers make an error a return code
    // (unless the program installed its own handler with halide_set_error_handler, which is kept).
    std::ostringstream wrappers;
    wrappers << "\n// hfuse: the model's entry points, " << name << " and " << name << "_argv. They call "
             << pipeline_fn
             << "\n// after making sure an error is printed and returned rather than aborting the process. The\n"
             << "// handler is process-wide (the first compiled model called installs its own; each prints the\n"
             << "// same), and one the program installed with halide_set_error_handler() is kept.\n"
             << "static inline void " << name << "_report_error(void *user_context, const char *msg) {\n"
             << "    halide_print(user_context, \"Error: \");\n"
             << "    halide_print(user_context, msg);\n"
             << "    halide_print(user_context, \"\\n\");\n"
             << "}\n\n"
             << "static inline void " << name << "_return_errors(void) {\n"
             << "    halide_error_handler_t previous = halide_set_error_handler(" << name << "_report_error);\n"
             << "    if (previous != halide_default_error && previous != " << name << "_report_error) {\n"
             << "        halide_set_error_handler(previous);\n"
             << "    }\n"
             << "}\n\n"
             << runtime_installer(name, resolved_parallel_runtime())
             << entry_points(name, pipeline_fn, impl_->arguments);
    header = doc.str() + "\n" + header.substr(0, at + decl.size()) + c_parameters(impl_->arguments) +
             header.substr(end, guard_end - end) + wrappers.str() + header.substr(guard_end);
    for (const auto &[path, text] : {std::pair<std::string, std::string>{prefix + ".h", header},
                                     {dir + "/hfuse_runtime.h", exec::runtime_header_text()}}) {
        std::ofstream out(path);
        out << text;
        if (!out.flush()) throw Error("cannot write the compiled model's header").in_file(path);
    }
}

std::map<std::string, TensorBuffer> ModelPipeline::run(const std::map<std::string, TensorBuffer> &inputs) {
    Impl &m = *impl_;
    if (!m.jit_compiled) {
        // As the executor's pipelines: root buffers and outputs reused run after run.
        m.pipeline.jit_handlers().custom_malloc = exec::jit_malloc;
        m.pipeline.jit_handlers().custom_free = exec::jit_free;
        exec::use_parallel_runtime(m.pipeline, resolved_parallel_runtime());
        // First, as the executor does: a later executor in this process then finds the runtime there.
        exec::compile_jit_runtime(m.options.target);
        m.pipeline.compile_jit(m.options.target);
        m.jit_compiled = true;
    }
    for (const auto &kv : inputs) {
        if (!m.graph.is_input(kv.first)) throw Error("'" + kv.first + "' is not an input of the model");
    }
    std::vector<Halide::Buffer<void>> results;
    std::map<std::string, TensorBuffer> outputs;
    size_t param = 0;
    for (const ModelArgument &a : m.arguments) {
        if (a.is_output) {
            TensorBuffer b = exec::make_storage(a.shape, exec::ValueLayout{});  // dense NCHW
            outputs[a.value] = b;
            results.push_back(a.stored_shape == a.shape ? b : compose::reshaped(b, a.stored_shape));
            continue;
        }
        auto it = inputs.find(a.value);
        if (it == inputs.end()) throw Error("no data given for model input '" + a.value + "'");
        if (shape_of(it->second) != a.shape) {
            throw Error("model input '" + a.value + "' must be of shape [" + to_string(a.shape) + "], got [" +
                        to_string(shape_of(it->second)) + "]");
        }
        m.params[param++].set(it->second);
    }
    Halide::Realization realization(results);
    try {
        m.pipeline.realize(realization, m.options.target);
    } catch (const Halide::Error &e) {
        throw Error(std::string("Halide runtime error in the model pipeline: ") + e.what()).in_file(m.graph.source);
    }
    return outputs;
}

}  // namespace hfuse
