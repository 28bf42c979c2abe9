// Helpers of src/ops/halide_util.h that op definitions build on.
#include "ops/halide_util.h"

#include <gtest/gtest.h>

namespace hfuse::ops {
namespace {

// Every dim bounded or not, realized past the bounds on both sides and vectorized along x (so the
// loops are partitioned): the value outside any bounded dim, the source inside, unbounded dims read
// as they are.
TEST(HalideUtil, ConstantExteriorByDimReadsTheValueOutsideEachBoundedDim) {
    Halide::Var x("x"), y("y"), c("c");
    Halide::Func source("source");
    source(x, y, c) = Halide::cast<float>(x + 10 * y + 100 * c);
    const Halide::Region bounds = {{0, 5}, Halide::Range(), {1, 2}};  // y unbounded
    Halide::Func padded = constant_exterior_by_dim(source, 7.5f, bounds);
    padded.vectorize(padded.args()[0], 4, Halide::TailStrategy::GuardWithIf);
    Halide::Buffer<float> out(11, 3, 5);  // x in [-3, 8), y in [-1, 2), c in [-1, 4)
    out.set_min(-3, -1, -1);
    padded.realize(out);
    for (int cc = -1; cc < 4; cc++) {
        for (int yy = -1; yy < 2; yy++) {
            for (int xx = -3; xx < 8; xx++) {
                const bool inside = xx >= 0 && xx < 5 && cc >= 1 && cc < 3;
                const float want = inside ? static_cast<float>(xx + 10 * yy + 100 * cc) : 7.5f;
                ASSERT_EQ(out(xx, yy, cc), want) << "at " << xx << ", " << yy << ", " << cc;
            }
        }
    }
}

TEST(HalideUtil, ConstantExteriorByDimRefusesMoreBoundsThanDims) {
    Halide::Var x("x");
    Halide::Func source("source");
    source(x) = Halide::cast<float>(x);
    EXPECT_THROW(constant_exterior_by_dim(source, 0.0f, {{0, 4}, {0, 4}}), std::exception);
}

}  // namespace
}  // namespace hfuse::ops
