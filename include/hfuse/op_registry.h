// The op library: every supported op type registers one OpSchema with
//  - its arity and allowed attributes (checked by validate()),
//  - shape inference (used by infer_shapes()),
//  - its Halide definition (used by every executor),
//  - its pattern kind (used by the fusion planner) and FLOP count (used by `hfuse info`).
//
// Op definitions live in src/ops/<family>_ops.cpp and register themselves through the
// register_*_ops() functions called by the registry; see src/ops/README.md for the conventions.
#pragma once

#include "hfuse/attributes.h"
#include "hfuse/graph.h"

#include <Halide.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hfuse {

// How an op composes with its neighbours under fusion, after TVM's OpPatternKind.
enum class PatternKind {
    Elementwise,        // out[i] = f(in[i]) with equal shapes (Relu, Sigmoid)
    Broadcast,          // elementwise with numpy broadcasting or per-channel operands (Add, BN)
    Injective,          // each output element reads one input element (Reshape, Transpose, Slice)
    Reduction,          // reduces over an axis (Softmax, GlobalAveragePool)
    ComplexOutFusable,  // heavy op whose output can take an elementwise epilogue (Conv, Gemm, MatMul)
    Window,             // reads a window of its input per output (MaxPool, AveragePool)
    Opaque,             // never fused
};

const char *to_string(PatternKind kind);

struct InferContext {
    const Node &node;
    Attributes attrs;
    std::vector<const TensorType *> inputs;   // nullptr where an optional input is left out
    std::vector<const Constant *> constants;  // non-null where the input is a weight
    int num_outputs;                          // node.outputs.size()

    // Convenience for required constant inputs (shape-like): throws naming the input otherwise.
    const Constant &constant(int i, const std::string &what) const;
    bool has_input(int i) const { return i < (int)inputs.size() && inputs[i] != nullptr; }
};

// How a Conv is lowered for the schedule template that will place it (compose::op_lowerings()
// says which): Direct is the plain definition; the others reshape the iteration for one template.
struct ConvLowering {
    enum class Form {
        Direct,
        // conv_flat: over the flattened rows of the padded input (2-D, stride 1, one group):
        // Lowered::parts["flat"] is the conv as (H*Wp, C, N), the output a view of it.
        Flat,
        // conv_cv: output channels in vector lanes, the input broadcast (2-D, constant weights):
        // Lowered::parts["blocked"] is the conv as (lanes, H*W, blocks, N) for blocks of `lanes`
        // output channels, its weights packed at lowering time for register tiles of `tile_blocks`
        // blocks (a grouped conv's block reducing over the input channels of the groups it spans,
        // ops::blocked_groups), and register tiles of `tile_positions` positions taken apart by
        // tiles where they divide a row (or every row padded to whole tiles: `rows_padded`); the
        // output (with the bias) a view of it. With `input_block`, the
        // conv reads its (padded) input through parts["padded_input"], a copy of it channel-blocked
        // as (input_block, W, H, C / input_block, N): consecutive input channels adjacent. With
        // `winograd_tile` m > 0 (a 3x3 conv, stride and dilation 1): Winograd F(m x m, 3x3)
        // instead, its parts "wino_input", "wino_product" and "wino_output" (see
        // lower_winograd_conv in conv_ops.cpp).
        ChannelBlocked,
    };
    Form form = Form::Direct;
    int lanes = 0;           // ChannelBlocked: output channels per block (one vector)
    int tile_blocks = 0;     // ChannelBlocked: blocks per register tile
    int tile_positions = 0;  // ChannelBlocked: output positions per register tile
    int input_block = 0;     // ChannelBlocked: input channels per block of the input copy; 0: planar
    int winograd_tile = 0;   // ChannelBlocked: Winograd F(m x m, 3x3) for m = 2 or 4 rather than direct (0)
    // ChannelBlocked, direct: each output row padded to whole register tiles of positions (positions
    // indexed y * W' + x, W' the row rounded up to tile_positions), so every tile lies within a row and
    // its positions' addresses are the tile's plus constants; the columns past the row are computed
    // from a zero-extended input and dropped.
    bool rows_padded = false;
    // Direct (conv_dw), > 0: the padded input built as the pad value everywhere, then the input's
    // rows written over it in whole vectors of this many lanes, a row's last vector shifted inwards
    // (overlapping the one before it), rather than as one select per element: no vector of the
    // padded plane straddles the input's edge (where a select reads its lanes through a gather of
    // clamped positions) or ends in a masked store. Lowered::parts["padded_input"] then has an update
    // definition, whose lanes are its first RVar, and the template must place it (it cannot be inlined).
    int padding_fill_lanes = 0;
    // Direct (conv_dw), with padding_fill_lanes and a stride s > 1 across: the filled plane's columns
    // taken apart by phase, Lowered::parts["phases"](u, phase, y, c, n) = padded(u * s + phase, ...),
    // and the conv reading phases(x + kx * d / s, kx * d % s, ...): each tap's vector one dense load
    // rather than every s-th column gathered by loads and shuffles.
    bool deinterleave_x = false;
};

// How a Gemm packs a constant B stored [N, K] (transB=1) for the template that will place it
// (compose::op_lowerings()): [K, N] in panels of `panel` columns, B'(x % panel, k, x / panel), so that
// a register tile of `panel` columns streams one contiguous panel; 0: one panel of all N columns.
struct GemmLowering {
    int panel = 0;
};

// The forms a group's schedule needs its ops lowered in, by node name; ops not named are lowered
// directly (ConvLowering::Form::Direct, GemmLowering's one panel).
// An attention's two products lowered as one (compose::op_lowerings() for a group on the attention
// template; src/ops/attention_lowering.h): its scores product reads K^T through a copy clamped to
// the keys, and its output product is computed from the Softmax's input, block by block of
// `key_block` keys, with an online softmax; the Softmax itself is then not computed.
struct AttentionLowering {
    enum class Role { Scores, Output };
    Role role = Role::Scores;
    int key_block = 0;          // keys per block (a multiple of the vector width)
    std::string softmax_input;  // Output: the value the Softmax reads (the scores after scale, mask)
};

struct OpLowerings {
    std::map<std::string, ConvLowering> conv;
    std::map<std::string, GemmLowering> gemm;
    std::map<std::string, AttentionLowering> attention;
};

// An input stored channel-blocked with a zero halo (a value handed between groups that way, see
// src/exec/value_layout.h): func(bi, x, y, cb, n) is channel cb * block + bi at (x, y) for x in
// [-halo_x, W + halo_x) and y in [-halo_y, H + halo_y), zero outside the tensor. An op may read it in
// place of the input's Func (a conv_cv conv then needs no padded, blocked copy of its input; where its
// windows reach past the halo, a whole-model pipeline's values having none, it copies the blocks).
struct BlockedInput {
    Halide::Func func;  // undefined: the input is not stored so
    int block = 0, halo_x = 0, halo_y = 0;
};

// A tensor of ONNX shape (d0, ..., d_{r-1}) is a Func of r pure Vars in reversed order:
// f(x_{r-1}, ..., x_0), so the first Var indexes the innermost (contiguous) ONNX dim.
struct LowerContext {
    const Node &node;
    Attributes attrs;
    std::vector<Halide::Func> inputs;  // undefined Func where an optional input is left out
    std::vector<const TensorType *> input_types;
    std::vector<const Constant *> constants;  // non-null where the input is a weight
    std::vector<TensorType> output_types;
    ConvLowering conv_lowering;                // for a Conv: the form its schedule template needs
    GemmLowering gemm_lowering;                // for a Gemm: how its template wants a constant B packed
    std::vector<BlockedInput> blocked_inputs;  // per input (may be shorter: the rest are not stored so)

    bool has_input(int i) const { return i < (int)inputs.size() && inputs[i].defined(); }
    const BlockedInput *blocked_input(int i) const {
        return i < (int)blocked_inputs.size() && blocked_inputs[i].func.defined() ? &blocked_inputs[i] : nullptr;
    }
};

struct Lowered {
    std::vector<Halide::Func> outputs;  // one per node output
    // Intermediate Funcs the op needs materialised (e.g. Softmax's max and sum). Executors schedule
    // them (at least compute_root); everything else the op creates may be inlined.
    std::vector<Halide::Func> stages;
    // Named internal Funcs a schedule template may place, inlined otherwise: Conv's and the pools'
    // "padded_input" (present only when some window reaches outside the input) and, lowered in another form (see
    // ConvLowering), its "flat" or "blocked" (reductions: the template must place them).
    std::map<std::string, Halide::Func> parts;
};

struct OpSchema {
    std::string name;
    PatternKind kind = PatternKind::Opaque;
    int min_inputs = 1, max_inputs = 1;    // max_inputs = -1: variadic (Concat)
    int min_outputs = 1, max_outputs = 1;  // max_outputs = -1: any number (Split)
    std::vector<std::string> attributes;   // the attribute names the op accepts
    std::vector<int> constant_inputs;      // inputs that must be weights (shape-like, int64 or float)

    std::function<std::vector<TensorType>(const InferContext &)> infer;
    std::function<Lowered(const LowerContext &)> lower;
    // Floating-point operations per run, counting a multiply-add as 2.
    std::function<double(const InferContext &, const std::vector<TensorType> &outputs)> flops;
};

// The context an op's infer/flops functions see for a node of a graph whose input types are known
// (graph.types filled for every input of the node). Throws an Error for an unknown op.
InferContext make_infer_context(const Graph &graph, const Node &node);

// FLOPs of one node of a shape-inferred graph.
double node_flops(const Graph &graph, const Node &node);
// FLOPs of all its nodes (what a run of the model computes).
double graph_flops(const Graph &graph);

// nullptr if the op is not supported.
const OpSchema *find_op(const std::string &op);
// Every registered op, sorted by name.
std::vector<const OpSchema *> all_ops();

}  // namespace hfuse
