#pragma once
/// @file
/// SOAP (Vyas, Morwani, Zhao, Shapira, Brandfonbrener, Janson & Kakade, "SOAP: Improving and
/// Stabilizing Shampoo using Adam", arXiv:2409.11321, 2024): Adam run in the eigenbasis of
/// Shampoo's preconditioner. docs/optim.md describes the algorithm and where eddy departs from the
/// authors' implementation.

#include <optional>

#include "eddy/optim/optimizer.h"

namespace eddy::optim {

struct SoapOptions {
  /// The paper's default; PINN configs default to 1e-3 (docs/config.md).
  double learning_rate = 3e-3;
  /// Decay rates of Adam's first and second moments (kept in the rotated basis), each in [0, 1).
  double beta1 = 0.95;
  double beta2 = 0.95;
  /// Decay rate of the Kronecker factors L and R, in [0, 1); unset: beta2.
  std::optional<double> shampoo_beta = std::nullopt;
  /// The eigenbases are recomputed after step 1 and after every step t with t % frequency == 0;
  /// at least 1.
  int64_t precondition_frequency = 10;
  /// Added to sqrt(v_hat) in the denominator; > 0.
  double eps = 1e-8;
  /// Decoupled weight decay (as AdamW's), >= 0.
  double weight_decay = 0;
  /// A side of a matrix longer than this is not rotated (its factor would take dimension^2
  /// memory and its eigendecomposition dimension^3 time); >= 0. 0 makes SOAP AdamW.
  int64_t max_preconditioner_dimension = 10000;
};

/// SOAP. For a 2-D parameter W [m, n] with gradient G, at step t = 1, 2, ... (Q_L = I, Q_R = I,
/// L, R, M, V = 0 before the first step):
///
///     W <- W * (1 - learning_rate * weight_decay)
///     G' = Q_L^T G Q_R                                 (the gradient in the eigenbasis)
///     M <- beta1 M + (1 - beta1) G'
///     V <- beta2 V + (1 - beta2) G'^2
///     W <- W - learning_rate * Q_L [(M / (1 - beta1^t)) / (sqrt(V / (1 - beta2^t)) + eps)] Q_R^T
///     L <- shampoo_beta L + (1 - shampoo_beta) G G^T
///     R <- shampoo_beta R + (1 - shampoo_beta) G^T G
///
/// then, after step 1 and every `precondition_frequency` steps, Q_L and Q_R become the
/// eigenvectors of L and R (LAPACK's dsyevd), M is rotated into the new basis, and V's entries
/// follow the old basis vectors they are matched with (docs/optim.md). Parameters that are not
/// matrices (biases, scalars) get the same update with Q = I: that is AdamW.
///
/// State: "soap.step", "soap.m.<i>", "soap.v.<i>", and for a matrix "soap.left.<i>",
/// "soap.left_basis.<i>" (L and Q_L, [m, m]), "soap.right.<i>", "soap.right_basis.<i>"
/// (R and Q_R, [n, n]); a side longer than max_preconditioner_dimension has no entries.
class Soap : public Optimizer {
 public:
  Soap(std::vector<Tensor> parameters, const SoapOptions& options);
  void step() override;
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

 private:
  /// One side of a matrix parameter: its Kronecker factor and the factor's eigenbasis.
  struct Side {
    Tensor factor, basis;
    bool rotated() const { return factor.defined(); }
  };
  struct ParameterState {
    Tensor m, v;
    Side left, right;
  };

  void update(size_t index, const Tensor& g);
  void refresh_bases(size_t index);
  /// Every state tensor but the step count, with its key; Self is Soap or const Soap.
  template <typename Self>
  static auto entries(Self& self);

  SoapOptions options_;
  double shampoo_beta_;
  std::vector<ParameterState> states_;
};

}  // namespace eddy::optim
