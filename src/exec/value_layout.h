// How a value handed from one group to another is stored between them. Planar: dense NCHW, as the API
// hands tensors over. ChannelBlocked: oneDNN's nChw8c with a zero halo, the form conv_cv reads its input
// in and writes its output tiles in, so that neither the padded, channel-blocked input copy of a conv_cv
// consumer nor the transpose of its producer's epilogue is needed (3x3 64->64 at 56x56, 2 threads: the
// copy is ~0.06 ms of 1.29):
//
//   storage(bi, x, y, cb, n) = value[n][cb * block + bi][y][x]    x in [-halo_x, W + halo_x), etc.
//                            = 0                                  in the halo
//
// The halo is zero for the storage's whole life: the producer writes only the interior, and storage
// holding a halo is shared only between values of the same layout and shape.
//
// Paged planar: NCHW with each band of each plane on whole 4 KiB pages of its own (row `page_row`, the
// second band's first, starting a page; the channel stride both bands rounded up to pages), for a value
// whose producer's tasks split each image's rows into two bands there (conv_dw's "row_bands": 2; its
// consumer's row tasks split the same way on OpenMP's static schedule). A core's hardware prefetcher,
// streaming through its band, stops at a page boundary (x86 prefetchers do not cross pages), so it no
// longer pulls the first lines of the other core's band, which that core then has to take back before
// writing them. Dense planes put a band boundary inside a page on every plane. Two threads writing
// halves of 144 planes of 56x56 floats, pass after pass (a standalone test): 17-18 us a pass dense,
// 10-11 paged, as whole planes a thread, with the two vCPUs on one core complex; 52-57 us dense, 11-12
// paged on two. MobileNet-V2's block at 56x56 (Zen 4, 2 vCPUs, 60 alternations of medians over 300
// runs): the expand + depthwise group 0.245-0.253 -> 0.219-0.222 ms and the project group 0.117 ->
// 0.105 with the vCPUs on two core complexes (a round trip of ~320 ns between them), no change on one
// (~52 ns: 0.171-0.176, 0.100-0.103); the block, 40 alternations with `--planar`: 0.367-0.373 ->
// 0.323-0.330 ms on two complexes (oneDNN 0.347-0.354), 0.272-0.276 -> 0.269-0.273 on one. It costs 31%
// more memory for that value there; a value whose planes would grow by more than half stays dense
// (28x28: two bands of 1,568 bytes, a page each). With planes merely rounded up to a page at 28x28, a
// page held the second band of one plane and the first of the next: 0.170 -> 0.174 ms near, 0.298 ->
// 0.348 far (the block with 32 -> 192 -> 32 channels).
//
// choose_value_layouts() stores a value blocked when every group touching it can use that directly:
//
//   conv_cv group P --V--> conv_cv group C1 (V is its conv's input, input_block = block)
//                      \-> conv_cv group C2 (V feeds its epilogue: a residual Add)
//
// and planar otherwise. Model inputs and outputs are planar unless the caller takes them stored
// (`model_io`, ExecutorOptions::blocked_io): then an output whose producer could hand it out blocked
// is (no halo unless a group reads it), and an input is where a padded reader would copy it blocked
// (the block that reader names). A plan controls it through the groups' schedules: a padded consumer
// with "input_block": 0 keeps the value planar. The Executor stores values
// so (ExecutorOptions::blocked_layouts). A whole-model pipeline (ModelPipeline, the generators) hands
// the same values channel-blocked but with no halo (exec::lower_model): a Func computed at root is
// computed wherever it is read, halo included, so a padded reader copies its input block for block
// (dense vectors) instead of reading it in place; the producer's transpose and the reader's gathers
// are gone all the same (compiled resnet_block, 2 threads, 8 alternations: 1.34 -> 1.30 ms).
//
// Measured (2 threads, 3x3 conv + ReLU groups in a chain, the middle group): 64->64 at 56x56 1.29 ->
// 1.22 ms, 128->128 at 28x28 1.31 -> 1.24 ms; at 14x14 and 7x7 (weights, not the copy, bound) ~1%.
// ResNet-18: 22.0-22.2 -> 21.6-21.7 ms.
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

namespace hfuse::exec {

struct ValueLayout {
    int block = 0;  // channels per block; 0: planar
    int halo_x = 0, halo_y = 0;
    int page_row = 0;  // planar: the row of each plane that starts a page (paged); 0: dense NCHW

    bool planar() const { return block == 0; }
    bool dense() const { return block == 0 && page_row == 0; }
    bool operator==(const ValueLayout &o) const {
        return block == o.block && halo_x == o.halo_x && halo_y == o.halo_y && page_row == o.page_row;
    }
    bool operator!=(const ValueLayout &o) const { return !(*this == o); }
};

// "planar", "planar, paged at row 28", or "blocked 8, halo 1x1" (x then y).
std::string to_string(const ValueLayout &layout);

// The page paged planar storage aligns its planes' row `page_row` to (x86's small pages).
constexpr int64_t kPageBytes = 4096;
// The paged layout for a value of `shape` whose producer's two bands of rows meet at `row`, or dense
// (planar, page_row 0) when its planes would grow by more than half on whole pages.
ValueLayout paged_planar(const Shape &shape, int64_t row);
// The first float of `layout`'s storage in a block starting at `block` (64-byte aligned, with
// storage_slack_bytes() more than storage_elements() floats): `block` itself unless paged.
float *storage_start(float *block, const Shape &shape, const ValueLayout &layout);
int64_t storage_slack_bytes(const ValueLayout &layout);

// Each value's layout as to_string() names it (Executor::value_layouts(), ModelPipeline's).
using ValueLayouts = std::map<std::string, ValueLayout>;
std::map<std::string, std::string> to_strings(const ValueLayouts &layouts);

// The values stored channel-blocked or paged (absent: dense), for the plan's groups scheduled by the
// templates with their schedules (the plan's, else the defaults for `target`). Paged only intermediates
// (values passed between groups that the model does not return) that are not stored blocked.
ValueLayouts choose_value_layouts(const FusedGraph &plan, const Halide::Target &target, bool model_io = false);

// The whole storage of a 4-D NCHW value of `shape` in `layout` as Halide dims, halo included: mins
// (0, -halo_x, -halo_y, 0, 0), dense in that order but for one cache line more between blocks of
// planes that would be an even number of lines apart (their lines would share L1 sets). For planar:
// the NCHW dims, dense, or with the channel stride a whole number of pages (paged).
std::vector<halide_dimension_t> storage_dims(const Shape &shape, const ValueLayout &layout);
// Floats of that storage.
int64_t storage_elements(const Shape &shape, const ValueLayout &layout);
// The storage's interior, the tensor without its halo, as its producer writes it: dims from 0 with the
// storage's strides, starting `interior_offset` floats past the storage's first.
std::vector<halide_dimension_t> interior_dims(const Shape &shape, const ValueLayout &layout);
int64_t interior_offset(const Shape &shape, const ValueLayout &layout);

// A fresh buffer holding a value of `shape` stored in `layout` (planar: dense NCHW), halo included
// (zero), from the JIT allocator's free lists (jit_allocator.h): reused run after run.
Halide::Buffer<float> make_storage(const Shape &shape, const ValueLayout &layout);

// `value`'s layout in `layouts` (planar when absent).
ValueLayout layout_of(const ValueLayouts &layouts, const std::string &value);

}  // namespace hfuse::exec
