// PINN geometry: samplers, primitives, CSG, and their errors (space x time sampling is tested
// through the solver's sampling, in test_solve.cpp). Boundary points
// are checked against the analytic boundary and normals; uniformity is checked as the fraction
// of points in a sub-region against its measure fraction (fixed seeds, so never flaky).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "solvers/pinn/geometry.h"
#include "solvers/pinn/sampler.h"

namespace eddy::pinn {
namespace {

const SampleOptions kFloat64{.dtype = DType::f64};

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// The fraction of rows of `points` [N, dim] for which `predicate` holds.
double fraction(const Tensor& points, const std::function<bool(const double*)>& predicate) {
  const std::vector<double> rows = values(points);
  const int64_t dim = points.size(1), count = points.size(0);
  int64_t hits = 0;
  for (int64_t row = 0; row < count; ++row) hits += predicate(rows.data() + row * dim) ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(count);
}

bool all_true(const Tensor& mask) {
  const std::vector<bool> flags = mask.to_vector<bool>();
  return std::all_of(flags.begin(), flags.end(), [](bool flag) { return flag; });
}

// Runs `body` and expects an eddy::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no eddy::Error thrown";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

GeometryPtr l_shape() {
  return make_difference(make_rectangle({-1, -1}, {1, 1}), make_rectangle({0, 0}, {1, 1}));
}

// ---- samplers ----

const std::vector<SamplerKind> kAllKinds{SamplerKind::uniform, SamplerKind::latin_hypercube,
                                         SamplerKind::sobol, SamplerKind::halton};

TEST(Sampler, PointsLieInTheUnitCubeAndFollowTheSeed) {
  for (SamplerKind kind : kAllKinds) {
    const Sampler sampler{kind};
    Generator first(7), again(7), other(8);
    const std::vector<double> u = sampler.unit_points(200, 3, first);
    EXPECT_EQ(u.size(), 600u) << sampler.name();
    EXPECT_TRUE(std::all_of(u.begin(), u.end(), [](double x) { return 0 <= x && x < 1; })) << sampler.name();
    EXPECT_EQ(u, sampler.unit_points(200, 3, again)) << sampler.name();
    EXPECT_NE(u, sampler.unit_points(200, 3, other)) << sampler.name();
  }
}

TEST(Sampler, LatinHypercubeHasOnePointPerStratumPerDimension) {
  Generator generator(3);
  const int64_t count = 64, dim = 4;
  const std::vector<double> u = Sampler{SamplerKind::latin_hypercube}.unit_points(count, dim, generator);
  for (int64_t d = 0; d < dim; ++d) {
    std::set<int64_t> strata;
    for (int64_t i = 0; i < count; ++i)
      strata.insert(static_cast<int64_t>(std::floor(u[i * dim + d] * count)));
    EXPECT_EQ(strata.size(), static_cast<size_t>(count)) << "dimension " << d;
  }
}

// Boost's sobol_engine skips the all-zero first point, so the sequence starts at (0.5, 0.5).
TEST(Sampler, UnrandomizedSobolMatchesTheKnownSequenceAndContinuesAcrossCalls) {
  const Sampler sobol{SamplerKind::sobol, false};
  Generator generator(123);  // the seed only matters when randomized
  std::vector<double> u = sobol.unit_points(2, 2, generator);
  const std::vector<double> rest = sobol.unit_points(3, 2, generator);
  u.insert(u.end(), rest.begin(), rest.end());
  EXPECT_EQ(u, (std::vector<double>{0.5, 0.5, 0.75, 0.25, 0.25, 0.75, 0.375, 0.375, 0.875, 0.875}));
}

TEST(Sampler, UnrandomizedHaltonIsTheRadicalInverseInPrimeBases) {
  Generator generator(0);
  const std::vector<double> u = Sampler{SamplerKind::halton, false}.unit_points(3, 2, generator);
  const std::vector<double> expected{1.0 / 2, 1.0 / 3, 1.0 / 4, 2.0 / 3, 3.0 / 4, 1.0 / 9};
  for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], expected[i], 1e-15);
}

// max over anchored boxes [0, a) x [0, b) on a 32 x 32 grid of |fraction inside - a b|.
double star_discrepancy_proxy(const std::vector<double>& u) {
  const size_t count = u.size() / 2;
  double worst = 0;
  for (int i = 1; i <= 32; ++i) {
    for (int j = 1; j <= 32; ++j) {
      const double a = i / 32.0, b = j / 32.0;
      size_t inside = 0;
      for (size_t k = 0; k < count; ++k) inside += u[2 * k] < a && u[2 * k + 1] < b;
      worst = std::max(worst, std::abs(static_cast<double>(inside) / static_cast<double>(count) - a * b));
    }
  }
  return worst;
}

TEST(Sampler, LowDiscrepancySequencesBeatUniformOnAverage) {
  double uniform = 0, halton = 0, sobol = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    Generator g1(seed), g2(seed), g3(seed);
    uniform += star_discrepancy_proxy(Sampler{SamplerKind::uniform}.unit_points(256, 2, g1));
    halton += star_discrepancy_proxy(Sampler{SamplerKind::halton}.unit_points(256, 2, g2));
    sobol += star_discrepancy_proxy(Sampler{SamplerKind::sobol}.unit_points(256, 2, g3));
  }
  EXPECT_LT(halton, 0.5 * uniform);
  EXPECT_LT(sobol, 0.5 * uniform);
}

TEST(Sampler, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (const std::string& name : Sampler::names()) EXPECT_EQ(Sampler::from_name(name).name(), name);
  EXPECT_EQ(Sampler::from_name("lhs").kind, SamplerKind::latin_hypercube);
  expect_error([] { Sampler::from_name("sobel", "train.sampler"); },
               {"train.sampler", "'sobel'", "uniform", "latin_hypercube", "sobol", "halton"});
}

TEST(Sampler, SplitByMeasureIsExactOnAverageAndNeverOffByMoreThanOne) {
  Generator generator(5);
  const std::vector<double> weights{1, 0.01, 2.5};
  std::vector<double> totals(weights.size(), 0);
  const int trials = 2000;
  for (int trial = 0; trial < trials; ++trial) {
    const std::vector<int64_t> parts = split_by_measure(10, weights, generator);
    EXPECT_EQ(parts[0] + parts[1] + parts[2], 10);
    for (size_t k = 0; k < weights.size(); ++k) {
      const double share = 10 * weights[k] / 3.51;
      EXPECT_TRUE(parts[k] == std::floor(share) || parts[k] == std::ceil(share));
      totals[k] += static_cast<double>(parts[k]);
    }
  }
  // The 0.01 face gets ~0.028 points a call: deterministic rounding would give it none, ever.
  for (size_t k = 0; k < weights.size(); ++k) EXPECT_NEAR(totals[k] / trials, 10 * weights[k] / 3.51, 0.02);
}

// ---- primitives: interior ----

TEST(Geometry, InteriorPointsAreInsideTheShapeAndItsBoundingBox) {
  const std::vector<GeometryPtr> shapes{make_interval(-1, 2),
                                        make_rectangle({0, 0}, {2, 1}),
                                        make_box({0, 0, 0}, {1, 2, 3}),
                                        make_hypercube({0, 0, 0, 0}, {1, 1, 1, 1}),
                                        make_disk({1, -1}, 2),
                                        make_sphere({0, 0, 1}, 0.5),
                                        make_polygon({{0, 0}, {3, 0}, {3, 1}, {1, 1}, {1, 3}, {0, 3}}),
                                        l_shape()};
  for (const GeometryPtr& shape : shapes) {
    for (SamplerKind kind : kAllKinds) {
      Generator generator(11);
      const Tensor points = shape->sample_interior(500, generator, {.sampler = {kind}, .dtype = DType::f64});
      ASSERT_EQ(points.shape(), (Shape{500, shape->dim()}));
      EXPECT_TRUE(all_true(shape->contains(points))) << shape->type_name();
      const BoundingBox box = shape->bounding_box();
      EXPECT_EQ(fraction(points,
                         [&](const double* p) {
                           for (int64_t k = 0; k < shape->dim(); ++k) {
                             if (p[k] < box.lower[k] || p[k] > box.upper[k]) return false;
                           }
                           return true;
                         }),
                1.0);
    }
  }
}

TEST(Geometry, InteriorSamplingIsUniform) {
  Generator generator(1);
  const Tensor in_rectangle = make_rectangle({0, 0}, {2, 1})->sample_interior(20000, generator, kFloat64);
  EXPECT_NEAR(fraction(in_rectangle, [](const double* p) { return p[0] < 0.5; }), 0.25, 0.015);

  const Tensor in_disk = make_disk({1, -1}, 2)->sample_interior(20000, generator, kFloat64);
  EXPECT_NEAR(fraction(in_disk, [](const double* p) { return std::hypot(p[0] - 1, p[1] + 1) < 1; }), 0.25,
              0.015);
  EXPECT_NEAR(fraction(in_disk, [](const double* p) { return p[0] > 1 && p[1] > -1; }), 0.25, 0.015);

  const Tensor in_sphere = make_sphere({0, 0, 0}, 1)->sample_interior(20000, generator, kFloat64);
  EXPECT_NEAR(fraction(in_sphere, [](const double* p) { return std::hypot(p[0], p[1], p[2]) < 0.5; }), 0.125,
              0.01);

  // An L-shaped polygon: the arm x > 1 holds 2 of its 5 unit squares.
  const GeometryPtr l_polygon = make_polygon({{0, 0}, {3, 0}, {3, 1}, {1, 1}, {1, 3}, {0, 3}});
  const Tensor in_polygon = l_polygon->sample_interior(20000, generator, kFloat64);
  EXPECT_NEAR(fraction(in_polygon, [](const double* p) { return p[0] > 1; }), 0.4, 0.015);
}

TEST(Geometry, SamplingIsReproducibleAndHonoursTheDtype) {
  const GeometryPtr disk = make_disk({0, 0}, 1);
  Generator first(42), again(42);
  const SampleOptions sobol32{.sampler = {SamplerKind::sobol}, .dtype = DType::f32};
  const Tensor a = disk->sample_interior(300, first, sobol32);
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(values(a), values(disk->sample_interior(300, again, sobol32)));
  const BoundarySample boundary = disk->sample_boundary(10, first, sobol32);
  EXPECT_EQ(boundary.points.dtype(), DType::f32);
  EXPECT_EQ(boundary.normals.dtype(), DType::f32);
  expect_error([&] { disk->sample_interior(3, first, {.dtype = DType::i32}); },
               {"disk", "float32 or float64"});
}

// ---- primitives: boundary ----

TEST(Geometry, IntervalBoundaryIsBothEndsWithOutwardNormals) {
  Generator generator(2);
  const BoundarySample sample = make_interval(-1, 2)->sample_boundary(100, generator, kFloat64);
  const std::vector<double> x = values(sample.points), n = values(sample.normals);
  int left = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(x[i] == -1 || x[i] == 2);
    EXPECT_EQ(n[i], x[i] == -1 ? -1 : 1);
    left += x[i] == -1;
  }
  EXPECT_EQ(left, 50);
  const BoundarySample right =
      make_interval(-1, 2)->sample_boundary(5, generator, {.dtype = DType::f64, .faces = {"right"}});
  EXPECT_EQ(values(right.points), std::vector<double>(5, 2.0));
}

TEST(Geometry, DiskAndSphereBoundaryPointsLieOnTheSurfaceWithRadialNormals) {
  for (const auto& [shape, center, radius] :
       std::vector<std::tuple<GeometryPtr, std::vector<double>, double>>{
           {make_disk({1, -1}, 2), {1, -1}, 2}, {make_sphere({0.5, 0, -2}, 1.5), {0.5, 0, -2}, 1.5}}) {
    Generator generator(3);
    const BoundarySample sample = shape->sample_boundary(4000, generator, kFloat64);
    const std::vector<double> p = values(sample.points), n = values(sample.normals);
    const size_t dim = center.size();
    for (size_t row = 0; row < p.size() / dim; ++row) {
      double distance = 0, length = 0;
      for (size_t k = 0; k < dim; ++k) {
        distance += std::pow(p[row * dim + k] - center[k], 2);
        length += n[row * dim + k] * n[row * dim + k];
      }
      ASSERT_LT(std::abs(std::sqrt(distance) - radius), 1e-12);
      ASSERT_LT(std::abs(std::sqrt(length) - 1), 1e-12);
      for (size_t k = 0; k < dim; ++k)
        ASSERT_NEAR(n[row * dim + k], (p[row * dim + k] - center[k]) / radius, 1e-12);
    }
    // Uniform in arc length / area: the upper half (last axis) holds half the points, and on the
    // sphere a cap of height h holds h / (2 r) of them.
    EXPECT_NEAR(fraction(sample.points, [&](const double* x) { return x[dim - 1] > center[dim - 1]; }), 0.5,
                0.03);
    if (dim == 3) {
      EXPECT_NEAR(fraction(sample.points, [&](const double* x) { return x[2] > center[2] + radius / 2; }),
                  0.25, 0.03);
    }
    EXPECT_EQ(shape->face_names(), std::vector<std::string>{dim == 2 ? "boundary" : "surface"});
  }
}

// Which face of the rectangle [0, 2] x [0, 1] a point is on, checking the normal matches it.
std::string rectangle_face(const double* p, const double* n) {
  if (p[0] == 0 && n[0] == -1 && n[1] == 0) return "left";
  if (p[0] == 2 && n[0] == 1 && n[1] == 0) return "right";
  if (p[1] == 0 && n[0] == 0 && n[1] == -1) return "bottom";
  if (p[1] == 1 && n[0] == 0 && n[1] == 1) return "top";
  return "none";
}

TEST(Geometry, RectangleBoundaryFollowsPerimeterAndNamedFacesSelectPoints) {
  const GeometryPtr rectangle = make_rectangle({0, 0}, {2, 1});
  EXPECT_EQ(rectangle->face_names(), (std::vector<std::string>{"left", "right", "bottom", "top"}));
  Generator generator(4);
  const BoundarySample sample = rectangle->sample_boundary(3000, generator, kFloat64);
  const std::vector<double> p = values(sample.points), n = values(sample.normals);
  std::map<std::string, int> counts;
  for (size_t row = 0; row < 3000; ++row) ++counts[rectangle_face(&p[2 * row], &n[2 * row])];
  EXPECT_EQ(counts["none"], 0);
  EXPECT_NEAR(counts["left"] + counts["right"], 1000, 2);  // 2 of the perimeter 6
  EXPECT_NEAR(counts["top"], 1000, 1);

  for (const std::string face : {"left", "right", "bottom", "top"}) {
    const BoundarySample only =
        rectangle->sample_boundary(50, generator, {.dtype = DType::f64, .faces = {face}});
    const std::vector<double> q = values(only.points), m = values(only.normals);
    for (size_t row = 0; row < 50; ++row) ASSERT_EQ(rectangle_face(&q[2 * row], &m[2 * row]), face);
  }
  // Two faces of lengths 1 and 2 share points 1 : 2; min_0 is left by its axis name.
  const BoundarySample two =
      rectangle->sample_boundary(300, generator, {.dtype = DType::f64, .faces = {"min_0", "top"}});
  EXPECT_NEAR(fraction(two.points, [](const double* x) { return x[0] == 0; }), 1.0 / 3, 0.01);
  expect_error([&] { rectangle->sample_boundary(5, generator, {.faces = {"up"}}); },
               {"rectangle", "'up'", "left, right, bottom, top"});
}

TEST(Geometry, BoxFacesAreNamedByAxis) {
  const GeometryPtr box = make_box({0, 0, 0}, {1, 2, 3});
  Generator generator(5);
  const std::vector<std::tuple<std::string, int, double>> faces{
      {"left", 0, 0}, {"right", 0, 1}, {"bottom", 1, 0}, {"top", 1, 2},
      {"back", 2, 0}, {"front", 2, 3}, {"max_2", 2, 3}};
  for (const auto& [face, axis, value] : faces) {
    const BoundarySample sample = box->sample_boundary(40, generator, {.dtype = DType::f64, .faces = {face}});
    const std::vector<double> p = values(sample.points), n = values(sample.normals);
    for (size_t row = 0; row < 40; ++row) {
      ASSERT_EQ(p[3 * row + axis], value) << face;
      for (int k = 0; k < 3; ++k) ASSERT_EQ(n[3 * row + k], k == axis ? (value == 0 ? -1 : 1) : 0) << face;
    }
  }
  // The two z faces have area 2 each out of the total 2 (2 + 3 + 6) = 22.
  const BoundarySample all = box->sample_boundary(2200, generator, kFloat64);
  EXPECT_NEAR(fraction(all.points, [](const double* x) { return x[2] == 0 || x[2] == 3; }), 4.0 / 22, 0.002);
}

TEST(Geometry, HypercubeInFourDimensionsNamesFacesByAxis) {
  const GeometryPtr cube = make_hypercube({0, 0, 0, 0}, {1, 1, 1, 2});
  EXPECT_EQ(cube->face_names().size(), 8u);
  EXPECT_EQ(cube->face_names()[7], "max_3");
  Generator generator(6);
  const BoundarySample sample =
      cube->sample_boundary(30, generator, {.dtype = DType::f64, .faces = {"max_3"}});
  EXPECT_EQ(fraction(sample.points, [](const double* x) { return x[3] == 2; }), 1.0);
  EXPECT_EQ(fraction(sample.normals,
                     [](const double* n) { return n[0] == 0 && n[1] == 0 && n[2] == 0 && n[3] == 1; }),
            1.0);
}

// Distance from p to segment ab.
double segment_distance(const double* p, std::array<double, 2> a, std::array<double, 2> b) {
  const double dx = b[0] - a[0], dy = b[1] - a[1];
  const double t = std::clamp(((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (dx * dx + dy * dy), 0.0, 1.0);
  return std::hypot(p[0] - a[0] - t * dx, p[1] - a[1] - t * dy);
}

TEST(Geometry, PolygonBoundaryLiesOnItsEdgesWithOutwardNormalsInEitherOrientation) {
  // A clockwise trapezoid; its edges' outward normals, worked out by hand.
  const std::vector<std::array<double, 2>> vertices{{0, 0}, {1, 2}, {3, 2}, {4, 0}};
  const double s = 1 / std::sqrt(5.0);
  const std::vector<std::array<double, 2>> normals{{-2 * s, s}, {0, 1}, {2 * s, s}, {0, -1}};
  for (bool reversed : {false, true}) {
    std::vector<std::array<double, 2>> order = vertices;
    if (reversed) std::reverse(order.begin(), order.end());
    const GeometryPtr polygon = make_polygon(order);
    Generator generator(7);
    for (int edge = 0; edge < 4; ++edge) {
      // Reversed, edge i runs from vertex 3 - i to 2 - i: the original edge 2 - i (mod 4).
      const int original = reversed ? (6 - edge) % 4 : edge;
      const BoundarySample sample = polygon->sample_boundary(
          50, generator, {.dtype = DType::f64, .faces = {"edge_" + std::to_string(edge)}});
      const std::vector<double> p = values(sample.points), n = values(sample.normals);
      for (size_t row = 0; row < 50; ++row) {
        ASSERT_LT(segment_distance(&p[2 * row], vertices[original], vertices[(original + 1) % 4]), 1e-12);
        ASSERT_NEAR(n[2 * row], normals[original][0], 1e-12);
        ASSERT_NEAR(n[2 * row + 1], normals[original][1], 1e-12);
      }
    }
    // Proportional to edge length: the base is 4 of the perimeter 6 + 2 sqrt(5).
    const BoundarySample all = polygon->sample_boundary(4000, generator, kFloat64);
    EXPECT_NEAR(fraction(all.points, [](const double* x) { return x[1] == 0; }), 4 / (6 + 2 * std::sqrt(5.0)),
                0.002);
  }
}

// ---- CSG ----

TEST(Csg, ContainsFollowsTheTruthTables) {
  const GeometryPtr disk = make_disk({0, 0}, 1), bar = make_rectangle({0, -0.5}, {2, 0.5});
  // In: disk only, bar only, both, disk only (top), neither.
  const Tensor points = tensor<double>({-0.5, 0, 1.5, 0, 0.5, 0, 0, 0.9, 1.5, 0.9}, {5, 2});
  const auto flags = [&](const GeometryPtr& shape) { return shape->contains(points).to_vector<bool>(); };
  EXPECT_EQ(flags(make_union(disk, bar)), (std::vector<bool>{true, true, true, true, false}));
  EXPECT_EQ(flags(make_intersection(disk, bar)), (std::vector<bool>{false, false, true, false, false}));
  EXPECT_EQ(flags(make_difference(disk, bar)), (std::vector<bool>{true, false, false, true, false}));
  EXPECT_EQ(flags(make_difference(bar, disk)), (std::vector<bool>{false, true, false, false, false}));
}

// The min/max signed distance is zero on a removed square's faces that lie on the outer
// boundary, but no point of the difference is near them, so they are not in its closure.
TEST(Csg, ContainsLeavesOutFacesWithNoInteriorNearby) {
  const auto flags = [](const GeometryPtr& shape, std::vector<double> rows) {
    const auto count = static_cast<int64_t>(rows.size()) / shape->dim();
    return shape->contains(tensor(rows, Shape{count, shape->dim()})).to_vector<bool>();
  };
  // The L-shape [-1, 1]^2 minus [0, 1]^2: the removed square's top and right edges and its
  // outer corner are out; its inner edges, the inner corner and the L's own corners are in.
  EXPECT_EQ(flags(l_shape(), {0.5, 1, 1, 0.5, 1, 1, 0, 0.5, 0.5, 0, 0, 0, -1, -1, 0, 1, 1, 0}),
            (std::vector<bool>{false, false, false, true, true, true, true, true, true}));
  // A box with a corner cube removed, in 3-D: a point on the removed cube's outer face is out,
  // one on its inner face and the box's far corner are in.
  const GeometryPtr notched = make_difference(make_box({0, 0, 0}, {2, 2, 2}), make_box({1, 1, 1}, {2, 2, 2}));
  EXPECT_EQ(flags(notched, {1.5, 1.5, 2, 1, 1.5, 1.5, 0, 0, 0}), (std::vector<bool>{false, true, true}));
  // A square and an L that only touches it along an edge: the intersection's closure is the
  // rectangle they overlap in, so the touching edge outside it is out.
  const GeometryPtr touching =
      make_intersection(make_rectangle({0, 0}, {1, 1}),
                        make_union(make_rectangle({1, 0}, {2, 1}), make_rectangle({0.5, 0.5}, {2, 1})));
  EXPECT_EQ(flags(touching, {1, 0.25, 1, 0.75, 0.75, 0.75}), (std::vector<bool>{false, true, true}));
  // Two overlapping disks: the points where their circles cross are in the lens's closure.
  const GeometryPtr lens = make_intersection(make_disk({0, 0}, 1), make_disk({1, 0}, 1));
  EXPECT_EQ(flags(lens, {0.5, std::sqrt(0.75), 0.5, -std::sqrt(0.75), 0.5, 0.9}),
            (std::vector<bool>{true, true, false}));
}

// The six edges of the L-shape [-1, 1]^2 minus [0, 1]^2, with outward normals.
struct Edge {
  std::array<double, 2> a, b, normal;
};
const std::vector<Edge> kLShapeEdges{
    {{-1, -1}, {1, -1}, {0, -1}}, {{1, -1}, {1, 0}, {1, 0}}, {{1, 0}, {0, 0}, {0, 1}},  // re-entrant
    {{0, 0}, {0, 1}, {1, 0}},     {{0, 1}, {-1, 1}, {0, 1}}, {{-1, 1}, {-1, -1}, {-1, 0}},
};

TEST(Csg, LShapeBoundaryHasTheRightPointsAndReEntrantNormals) {
  const GeometryPtr shape = l_shape();
  Generator generator(8);
  const int count = 8000;
  const BoundarySample sample = shape->sample_boundary(count, generator, kFloat64);
  const std::vector<double> p = values(sample.points), n = values(sample.normals);
  std::vector<int> per_edge(kLShapeEdges.size(), 0);
  for (int row = 0; row < count; ++row) {
    const double* point = &p[2 * row];
    const auto edge = std::find_if(kLShapeEdges.begin(), kLShapeEdges.end(),
                                   [&](const Edge& e) { return segment_distance(point, e.a, e.b) < 1e-12; });
    ASSERT_NE(edge, kLShapeEdges.end())
        << "(" << point[0] << ", " << point[1] << ") is not on the L boundary";
    ASSERT_EQ(n[2 * row], edge->normal[0]);
    ASSERT_EQ(n[2 * row + 1], edge->normal[1]);
    ++per_edge[edge - kLShapeEdges.begin()];
  }
  // Perimeter 8: the re-entrant edges are 1 each, the outer bottom edge 2.
  EXPECT_NEAR(per_edge[2] / double(count), 1.0 / 8, 0.012);
  EXPECT_NEAR(per_edge[3] / double(count), 1.0 / 8, 0.012);
  EXPECT_NEAR(per_edge[0] / double(count), 2.0 / 8, 0.015);

  const Tensor inside = shape->sample_interior(6000, generator, kFloat64);
  EXPECT_EQ(fraction(inside, [](const double* x) { return x[0] > 0 && x[1] > 0; }), 0.0);
  EXPECT_NEAR(fraction(inside, [](const double* x) { return x[0] < 0 && x[1] > 0; }), 1.0 / 3, 0.02);
}

TEST(Csg, SharedFacesAreDrawnOnceAndTouchingFacesVanish) {
  Generator generator(9);
  // Two unit squares side by side: their union is [0, 2] x [0, 1], no interface at x = 1.
  const GeometryPtr side_by_side = make_union(make_rectangle({0, 0}, {1, 1}), make_rectangle({1, 0}, {2, 1}));
  const BoundarySample joined = side_by_side->sample_boundary(6000, generator, kFloat64);
  EXPECT_EQ(fraction(joined.points, [](const double* x) { return x[0] == 1 && x[1] > 0 && x[1] < 1; }), 0.0);
  EXPECT_NEAR(fraction(joined.points, [](const double* x) { return x[1] == 1; }), 2.0 / 6, 0.02);

  // Overlapping rectangles share their top and bottom over [1, 2]; each point there comes once.
  const GeometryPtr overlap = make_union(make_rectangle({0, 0}, {2, 1}), make_rectangle({1, 0}, {3, 1}));
  const Tensor on_top = overlap->sample_boundary(8000, generator, kFloat64).points;
  const double top = fraction(on_top, [](const double* x) { return x[1] == 1; });
  const double top_middle =
      fraction(on_top, [](const double* x) { return x[1] == 1 && x[0] > 1 && x[0] < 2; });
  EXPECT_NEAR(top, 3.0 / 8, 0.02);
  EXPECT_NEAR(top_middle / top, 1.0 / 3, 0.03);

  // Their intersection is [1, 2] x [0, 1]: top 1 / 4 of the boundary, left side from the second.
  const GeometryPtr both = make_intersection(make_rectangle({0, 0}, {2, 1}), make_rectangle({1, 0}, {3, 1}));
  const BoundarySample common = both->sample_boundary(4000, generator, kFloat64);
  EXPECT_NEAR(fraction(common.points, [](const double* x) { return x[1] == 1; }), 0.25, 0.02);
  const std::vector<double> p = values(common.points), n = values(common.normals);
  for (size_t row = 0; row < 4000; ++row) {
    if (p[2 * row] == 1) {
      ASSERT_EQ(n[2 * row], -1);
    }
    ASSERT_TRUE(p[2 * row] >= 1 && p[2 * row] <= 2);
  }
}

TEST(Csg, PlateWithHolesHasNormalsIntoTheHoles) {
  // (rectangle - disk) - disk: the holes' normals point at their centres.
  const std::array<std::array<double, 2>, 2> centers{{{-0.5, 0}, {0.5, 0}}};
  const GeometryPtr plate =
      make_difference(make_difference(make_rectangle({-1, -0.5}, {1, 0.5}), make_disk(centers[0], 0.2)),
                      make_disk(centers[1], 0.2));
  Generator generator(10);
  const BoundarySample sample =
      plate->sample_boundary(3000, generator, {.sampler = {SamplerKind::halton}, .dtype = DType::f64});
  const std::vector<double> p = values(sample.points), n = values(sample.normals);
  int on_holes = 0;
  for (size_t row = 0; row < 3000; ++row) {
    for (const auto& c : centers) {
      const double dx = p[2 * row] - c[0], dy = p[2 * row + 1] - c[1];
      if (std::abs(std::hypot(dx, dy) - 0.2) > 1e-12) continue;
      ++on_holes;
      ASSERT_NEAR(n[2 * row], -dx / 0.2, 1e-12);
      ASSERT_NEAR(n[2 * row + 1], -dy / 0.2, 1e-12);
    }
  }
  const double holes = 2 * 2 * std::numbers::pi * 0.2;
  EXPECT_NEAR(on_holes / 3000.0, holes / (holes + 6), 0.02);
  EXPECT_TRUE(all_true(plate->contains(plate->sample_interior(500, generator, kFloat64))));
}

TEST(Csg, EmptyShapesFailWithAClearMessage) {
  const GeometryPtr nothing = make_difference(make_disk({0, 0}, 1), make_rectangle({-2, -2}, {2, 2}));
  Generator generator(11);
  expect_error([&] { nothing->sample_interior(10, generator); },
               {"difference.sample_interior", "empty or degenerate"});
  expect_error([&] { nothing->sample_boundary(10, generator); },
               {"difference.sample_boundary", "empty or degenerate"});
  expect_error(
      [&] {
        make_intersection(make_disk({0, 0}, 1), make_disk({3, 0}, 1));
      },
      {"intersection of disk and disk is empty", "axis 0"});
  expect_error(
      [&] {
        make_union(make_disk({0, 0}, 1), make_sphere({0, 0, 0}, 1));
      },
      {"2-D disk", "3-D sphere"});
  expect_error([&] { l_shape()->sample_boundary(5, generator, {.faces = {"left"}}); },
               {"difference", "no named faces"});
}

// ---- errors ----

TEST(Geometry, BadParametersNameTheField) {
  expect_error(
      [] {
        make_rectangle({0, 1}, {1, 1});
      },
      {"geometry.min: rectangle min [0, 1] is not below max [1, 1] on axis 1"});
  expect_error([] { make_disk({0, 0}, 0, "domain.space"); }, {"domain.space.radius", "disk radius", "got 0"});
  expect_error([] { make_sphere({0, NAN, 0}, 1); }, {"geometry.center", "non-finite"});
  expect_error([] { make_polygon({{0, 0}, {1, 0}}); }, {"geometry.vertices", "at least 3 vertices, got 2"});
  expect_error(
      [] {
        make_polygon({{0, 0}, {1, 1}, {1, 0}, {0, 1}});
      },
      {"geometry.vertices", "not simple", "edge 0", "edge 2"});
  expect_error([] { make_polygon({{0, 0}, {2, 0}, {1, 0}, {1, 1}}); }, {"not simple", "doubles back"});
  expect_error([] { make_polygon({{0, 0}, {1, 0}, {1, 0}, {1, 1}}); }, {"vertices 1 and 2 coincide"});
  expect_error([] { make_hypercube({0, 0}, {1, 1, 1}); }, {"geometry.max", "3 coordinates", "has 2"});
}

}  // namespace
}  // namespace eddy::pinn
