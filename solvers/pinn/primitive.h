#pragma once
// Internal: the base of the primitive shapes, whose boundary is a fixed list of faces, each a
// map from unit coordinates onto the face.

#include <string>
#include <vector>

#include "solvers/pinn/geometry.h"

namespace eddy::pinn {

class Primitive : public Geometry {
 public:
  std::vector<std::string> face_names() const override;
  PointBatch boundary_candidates(int64_t count, int64_t extra, const Sampler& sampler, Generator& generator,
                                 const std::vector<int>& faces) const override;
  double candidate_boundary_measure() const override;

 protected:
  struct Face {
    std::string name;
    double measure;
  };
  // `face_dim` unit coordinates place a point on a face (0 for the ends of an interval).
  Primitive(int64_t dim, int64_t face_dim) : Geometry(dim), face_dim_(face_dim) {}
  void set_faces(std::vector<Face> faces) { faces_ = std::move(faces); }
  // Writes the point of `face` at unit coordinates `unit` and its outward unit normal.
  virtual void map_face(int face, const double* unit, double* point, double* normal) const = 0;

 private:
  int64_t face_dim_;
  std::vector<Face> faces_;
};

// Messages: "[0, 1]".
std::string format_point(const std::vector<double>& point);
// Throws "<key>: <type> <field> has a non-finite value ..." unless every value is finite.
void check_finite(const std::vector<double>& values, const std::string& key, const std::string& type,
                  const std::string& field);

}  // namespace eddy::pinn
