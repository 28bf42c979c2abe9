// Concats computed in place: each input of a Concat is written by its producer straight into its
// slice of the Concat's output, so the Concat itself copies nothing and never runs.
//
//   g1: a = conv(x);  g2: b = conv(y);  g3: c = Concat(a, b, axis 1)   (g3 that Concat alone)
//
// becomes one storage for c, [N, Ca + Cb, H, W], with a the view of its channels [0, Ca) and b of
// [Ca, Ca + Cb): g1 and g2 write there (their kernels take the views' strides), and g3 is skipped.
// Chains share storage: DenseNet's layer k concatenates the block's input and the outputs of layers 1..k,
// so every layer's Concat is a view of one storage per dense block, and each layer's output is written
// once, where every later Concat reads it. Inception's and SqueezeNet's branches write their slices of
// the module's output.
//
// A Concat is placed so when it is a group of its own (the x86 rules keep Concats out of other groups:
// "opaque_ops"), every dim outside its axis has extent 1 (NCHW at batch 1, along the channels), so that
// each slice is a contiguous run of the storage, laid out as the dense value it holds (the kernels
// writing and reading it are the ones compiled for dense values), every input and its output are
// intermediates stored dense (not model inputs, outputs or weights, not channel-blocked or paged), no
// value appears twice among its inputs, and the placement agrees with the other Concats sharing
// those values (one offset in one storage per value; the values groups write never overlap). Other
// Concats that cannot be placed so but whose values are all dense floats (at batch 8, a model input
// among the inputs, ...) are copied with memcpy, a contiguous run of each input per index of the dims
// outside the axis, rather than by a kernel evaluating a select across the inputs per element.
#pragma once

#include "exec/value_layout.h"
#include "hfuse/fused_graph.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse::exec {

// Where a value lies in the storage it shares: `storage` names the storage (one of its values), of
// `elements` floats; the value starts `offset` floats into it.
struct SharedSlice {
    std::string storage;
    int64_t elements = 0;
    int64_t offset = 0;
};

// A Concat copied: for each of `outer` indices of the dims outside its axis, `runs[i]` floats of
// input i, one after the other.
struct ConcatCopy {
    int64_t outer = 1;
    std::vector<int64_t> runs;
};

struct InPlaceConcats {
    std::map<std::string, SharedSlice> slices;  // every value of a shared storage
    std::set<std::string> groups;               // the Concat groups that need not run
    std::map<std::string, ConcatCopy> copies;   // the other Concat groups of dense values, by group
};

// Runs a ConcatCopy: `inputs` (dense, one per run) into `output` (dense).
void copy_concat(const ConcatCopy &copy, const std::vector<const float *> &inputs, float *output);

// The Concats of `plan` that can be computed in place, given the values' storage `layouts`
// (choose_value_layouts').
InPlaceConcats place_concats_in_place(const FusedGraph &plan, const ValueLayouts &layouts);

}  // namespace hfuse::exec
