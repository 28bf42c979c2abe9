#include "exec/value_layout.h"

#include "compose/composer.h"
#include "compose/position_view.h"
#include "exec/jit_allocator.h"

#include <algorithm>
#include <cstring>

namespace hfuse::exec {

std::string to_string(const ValueLayout &l) {
    if (l.planar()) return l.page_row ? "planar, paged at row " + std::to_string(l.page_row) : "planar";
    return "blocked " + std::to_string(l.block) + ", halo " + std::to_string(l.halo_x) + "x" + std::to_string(l.halo_y);
}

std::map<std::string, std::string> to_strings(const ValueLayouts &layouts) {
    std::map<std::string, std::string> out;
    for (const auto &[value, layout] : layouts) out[value] = to_string(layout);
    return out;
}

ValueLayouts choose_value_layouts(const FusedGraph &plan, const Halide::Target &target, bool model_io) {
    const Graph &g = plan.graph;
    std::vector<compose::BlockedExchange> exchange;
    // Who reads each value from outside its own group: (group index, node).
    std::map<std::string, std::vector<std::pair<size_t, const Node *>>> readers;
    for (size_t i = 0; i < plan.groups.size(); i++) {
        const FusedGroup &grp = plan.groups[i];
        exchange.push_back(compose::blocked_exchange(g, grp, target));
        std::set<std::string> inside;
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            inside.insert(n->outputs.begin(), n->outputs.end());
        }
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            for (const std::string &v : n->inputs) {
                if (!v.empty() && !inside.count(v) && !g.is_weight(v)) readers[v].push_back({i, n});
            }
        }
    }
    const std::set<std::string> returned(g.outputs.begin(), g.outputs.end());
    // Whether every group reading `v` can read it blocked: each read by a conv_cv conv as its input (by
    // blocks it names, or unpadded) or by an epilogue. Sets the block the readers name (0: none) and
    // the halo their windows reach.
    auto readers_take = [&](const std::string &v, int &block, ValueLayout &layout) {
        auto it = readers.find(v);
        if (it == readers.end()) return true;
        for (const auto &[c, node] : it->second) {
            const compose::BlockedExchange &reader = exchange[c];
            if (reader.epilogue.count(node->name)) continue;
            if (!compose::reads_blocked(reader, *node, v) ||
                (block && reader.input_block && reader.input_block != block)) {
                return false;
            }
            if (reader.input_block) block = reader.input_block;
            layout.halo_x = std::max(layout.halo_x, reader.reach_x);
            layout.halo_y = std::max(layout.halo_y, reader.reach_y);
        }
        return true;
    };
    ValueLayouts layouts;
    for (size_t p = 0; p < plan.groups.size(); p++) {
        const compose::BlockedExchange &producer = exchange[p];
        const std::string &v = producer.output;
        if (v.empty() || g.is_input(v) || (returned.count(v) && !model_io)) continue;
        if (handed_out_values(plan, plan.groups[p]) != std::set<std::string>{v}) continue;
        const Shape &shape = g.type_of(v).shape;
        if (shape.size() != 4) continue;
        // An intermediate nobody reads is not handed out; a model output may have no readers.
        int block = 0;
        ValueLayout layout;
        if ((!readers.count(v) && !returned.count(v)) || !readers_take(v, block, layout)) continue;
        if (!block) {
            // No reader names one: the producer's vector, or half of it while that does not divide
            // the channels (AVX-512's 16 lanes, 24 channels: blocks of 8), not below AVX2's 8.
            block = producer.vector_width;
            while (block > 8 && (producer.channel_block % block || shape[1] % block)) block /= 2;
        }
        if (block <= 0 || producer.vector_width % block || producer.channel_block % block || shape[1] % block) continue;
        layout.block = block;
        layouts[v] = layout;
    }
    // Model inputs, when the caller hands them over stored: blocked where a reader would copy them so
    // (a padded conv naming its input_block), as that reader's copy is then gone.
    for (const GraphInput &in : model_io ? g.inputs : std::vector<GraphInput>{}) {
        int block = 0;
        ValueLayout layout;
        if (in.shape.size() != 4 || returned.count(in.name) || !readers_take(in.name, block, layout)) continue;
        if (block <= 0 || in.shape[1] % block) continue;
        layout.block = block;
        layouts[in.name] = layout;
    }
    for (const FusedGroup &grp : plan.groups) {
        const compose::RowBandSplit split = compose::row_band_split(g, grp, target);
        const std::string &v = split.value;
        if (!split.row || g.is_input(v) || returned.count(v) || layouts.count(v) || !readers.count(v)) continue;
        if (handed_out_values(plan, grp) != std::set<std::string>{v}) continue;
        // A group on its position view reads its inputs as dense planes, one row of all positions.
        const auto &value_readers = readers.at(v);
        if (std::any_of(value_readers.begin(), value_readers.end(), [&](const auto &reader) {
                const FusedGroup &r = plan.groups[reader.first];
                return r.schedule.is_object() && compose::flattens_positions(r.schedule);
            })) {
            continue;
        }
        const ValueLayout paged = paged_planar(g.type_of(v).shape, split.row);
        if (!paged.dense()) layouts[v] = paged;
    }
    return layouts;
}

namespace {

int64_t whole_pages(int64_t bytes) {
    return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// The bytes from one paged plane to the next: each band on pages of its own (the first band ends
// on a page boundary, the second starts on one), so no page holds rows of both bands, of this plane
// or the next.
int64_t paged_plane_bytes(const Shape &shape, int64_t row) {
    return whole_pages(row * shape[3] * 4) + whole_pages((shape[2] - row) * shape[3] * 4);
}

}  // namespace

ValueLayout paged_planar(const Shape &shape, int64_t row) {
    ValueLayout l;
    if (shape.size() != 4 || row <= 0 || row >= shape[2]) return l;
    const int64_t plane = shape[2] * shape[3] * 4;
    if (2 * paged_plane_bytes(shape, row) <= 3 * plane) l.page_row = static_cast<int>(row);
    return l;
}

int64_t storage_slack_bytes(const ValueLayout &l) {
    return l.page_row ? kPageBytes : 0;
}

float *storage_start(float *block, const Shape &shape, const ValueLayout &l) {
    if (!l.page_row) return block;
    // Where row page_row of the first plane would fall, pushed on to the next page boundary.
    const int64_t row_bytes = int64_t{l.page_row} * shape[3] * 4;
    const uintptr_t at = reinterpret_cast<uintptr_t>(block) + static_cast<uintptr_t>(row_bytes);
    const int64_t skip = (kPageBytes - static_cast<int64_t>(at % kPageBytes)) % kPageBytes;
    return block + skip / 4;  // block and the rows' bytes are multiples of 4: so is skip
}

std::vector<halide_dimension_t> storage_dims(const Shape &shape, const ValueLayout &l) {
    std::vector<halide_dimension_t> dims;
    dims.reserve(5);
    int64_t stride = 1;
    auto add = [&](int64_t min, int64_t extent) {
        dims.push_back({static_cast<int32_t>(min), static_cast<int32_t>(extent), static_cast<int32_t>(stride), 0});
        stride *= extent;
    };
    if (l.planar()) {
        for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
            add(0, *it);
            // Paged: after W and H, the planes as far apart as their bands on pages of their own.
            if (l.page_row && dims.size() == 2) stride = paged_plane_bytes(shape, l.page_row) / 4;
        }
        return dims;
    }
    add(0, l.block);
    add(-l.halo_x, shape[3] + 2 * l.halo_x);
    add(-l.halo_y, shape[2] + 2 * l.halo_y);
    // Blocks of planes an even number of cache lines apart put the lines a conv reads across blocks
    // in few L1 sets (14x14 planes with their halo: 8 KB apart, one set): one line more spreads them
    // (ResNet-18's 1x1 stride-2 256->512 at 14x14: 0.127 -> 0.119 ms; its 3x3s at 14x14 ~1%).
    if (stride % 16 == 0 && stride / 16 % 2 == 0) stride += 16;
    add(0, shape[1] / l.block);
    add(0, shape[0]);
    return dims;
}

int64_t storage_elements(const Shape &shape, const ValueLayout &l) {
    const std::vector<halide_dimension_t> dims = storage_dims(shape, l);
    return dims.empty() ? 1 : int64_t{dims.back().stride} * dims.back().extent;
}

Halide::Buffer<float> make_storage(const Shape &shape, const ValueLayout &layout) {
    std::vector<halide_dimension_t> dims = storage_dims(shape, layout);
    // Named: an unnamed Halide::Buffer makes itself a unique name, a visible cost in a run of a few
    // microseconds (each run makes its outputs).
    Halide::Buffer<float> b(nullptr, static_cast<int>(dims.size()), dims.data(), "hfuse_storage");
    b.allocate(cached_malloc, cached_free);  // reused run after run, not faulted in again
    if (layout.halo_x || layout.halo_y) std::memset(b.data(), 0, b.size_in_bytes());
    return b;
}

std::vector<halide_dimension_t> interior_dims(const Shape &shape, const ValueLayout &l) {
    std::vector<halide_dimension_t> dims = storage_dims(shape, l);
    if (!l.planar()) {
        dims[1] = {0, static_cast<int32_t>(shape[3]), dims[1].stride, 0};
        dims[2] = {0, static_cast<int32_t>(shape[2]), dims[2].stride, 0};
    }
    return dims;
}

int64_t interior_offset(const Shape &shape, const ValueLayout &l) {
    if (l.planar()) return 0;
    const std::vector<halide_dimension_t> dims = storage_dims(shape, l);
    return int64_t{l.halo_x} * dims[1].stride + int64_t{l.halo_y} * dims[2].stride;
}

ValueLayout layout_of(const ValueLayouts &layouts, const std::string &value) {
    auto it = layouts.find(value);
    return it == layouts.end() ? ValueLayout() : it->second;
}

}  // namespace hfuse::exec
