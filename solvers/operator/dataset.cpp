#include "solvers/operator/dataset.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/ops.h"

namespace eddy::operator_learning {
namespace {

// Errors of the HDF5 reader, prefixed with the split's config location.
template <typename Read>
auto with_split_context(const SplitSpec& split, Read read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(cat(split.where, e.what()));
  }
}

// Throws, naming the position of values' first non-finite element (`first_row` is the file row of
// values' row 0), "<file>: dataset '<dataset>' <what> at [i, j]; <advice>"; returns if there is none.
void require_finite(const SplitSpec& split, const std::string& dataset, const Tensor& values, int64_t first_row,
                    const std::string& what, const std::string& advice) {
  std::optional<std::vector<int64_t>> index = first_non_finite(values);
  if (!index) return;
  if (!index->empty()) (*index)[0] += first_row;
  std::string position;
  for (int64_t i : *index) position += (position.empty() ? "" : ", ") + std::to_string(i);
  throw Error(cat(split.where, split.file, ": dataset '", dataset, "' ", what, " at [", position, "]; ", advice));
}

// The dataset `read` returns (rows from `first_row` on), in the training dtype. Refused: complex
// values (a cast would keep their real parts); a NaN or an infinity (training on one goes on
// quietly: a ReLU network turned a NaN input into a constant model); a finite value beyond the
// training dtype's range (it was reported as a NaN or infinity in the file).
template <typename Read>
Tensor training_values(const SplitSpec& split, const std::string& dataset, DType dtype, int64_t first_row,
                       Read read) {
  const Tensor stored = with_split_context(split, read);
  EDDY_CHECK(!is_complex(stored.dtype()), split.where, split.file, ": dataset '", dataset, "' is complex (",
             stored.dtype(), "); operators train on real data: store the real and imaginary parts as two channels "
             "(data.input_channels / output_channels: true)");
  require_finite(split, dataset, stored, first_row, "holds a non-finite value (NaN or infinity)",
                 "the data must be finite");
  Tensor values = cast(stored, dtype);
  require_finite(split, dataset, values, first_row, cat("holds a value beyond the range of ", dtype),
                 "train in float64 (training.dtype: float64) or rescale the data");
  // A value too small for the dtype became 0: inputs of 1e-50 in a float64 file trained as zeros.
  const Tensor became_zero = eq(values, zeros_like(values));
  const Tensor flushed = where(ne(stored, zeros_like(stored)), became_zero, zeros_like(became_zero));
  if (sum(cast(flushed, DType::f64)).item<double>() > 0) {
    require_finite(split, dataset, where(flushed, full_like(values, std::nan("")), values), first_row,
                   cat("holds a value below the range of ", dtype, " (it would be 0)"),
                   "train in float64 (training.dtype: float64) or rescale the data");
  }
  return values;
}

Tensor read_array(const SplitSpec& split, const std::string& dataset, DType dtype) {
  return training_values(split, dataset, dtype, 0, [&] { return io::read_hdf5(split.file, dataset); });
}

Tensor read_rows(const SplitSpec& split, const std::string& dataset, int64_t first, int64_t last, DType dtype) {
  return training_values(split, dataset, dtype, first,
                         [&] { return io::read_hdf5_rows(split.file, dataset, first, last); });
}

Shape shape_of(const SplitSpec& split, const std::string& dataset) {
  return with_split_context(split, [&] { return io::hdf5_shape(split.file, dataset); });
}


// The samples [first, last) to read of a split of `size` samples.
using RowsToRead = std::function<std::pair<int64_t, int64_t>(int64_t size)>;

std::pair<int64_t, int64_t> all_rows(int64_t size) { return {0, size}; }

// Refuses a sample whose output is all zeros where the relative L2 error is taken of it: its
// error divides by a norm of 0, and one such test sample made the test set's mean error inf every
// epoch and the run end without its final checkpoint.
void require_nonzero_outputs(const SplitSpec& spec, const Split& split, const std::string& what, bool training) {
  if (split.held() == 0) return;
  std::vector<int64_t> within_sample(static_cast<size_t>(split.output.dim() - 1));
  std::iota(within_sample.begin(), within_sample.end(), 1);
  const std::vector<double> largest = max(abs(split.output), within_sample).to_vector<double>();
  // The loss and the reported errors take the norms in the training dtype, whose normal range the
  // squared norm must lie in: outside it the loss was infinite, or NaN once a difference underflowed.
  const std::vector<double> squared_norms =
      sum(square(cast(split.output, DType::f64)), within_sample).to_vector<double>();
  const bool single = split.output.dtype() == DType::f32;
  const double most = single ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  const double least = single ? std::numeric_limits<float>::min() : std::numeric_limits<double>::min();
  for (size_t k = 0; k < largest.size(); ++k) {
    const std::string sample =
        cat("output '", spec.output, "' sample ", spec.first + split.first + static_cast<int64_t>(k));
    EDDY_CHECK(largest[k] > 0, what, sample, " is all zeros, so its relative L2 error is undefined (a division by its "
               "norm); ", training ? "train with training.loss: mse, or leave the sample out"
                                   : "leave it out of this test set (samples, stride or another file)");
    EDDY_CHECK(squared_norms[k] >= least && squared_norms[k] <= most, what, sample, " (largest magnitude ", largest[k],
               ") has a squared norm that ", squared_norms[k] < least ? "underflows " : "overflows ",
               split.output.dtype(), ", so its relative L2 error cannot be taken; ",
               single ? "train in float64 (training.dtype: float64) or rescale the data" : "rescale the data");
  }
}

// Refuses a stride that keeps unevenly spaced points of a grid axis of n points: one that divides
// neither n (a periodic grid, its end left out) nor n - 1 (a grid with both ends, as the FNO
// paper's 421-point Darcy files). Every 3rd of 64 periodic points kept 0, 3, ..., 63, a gap of 1
// across the period, and the FNO's Fourier layers and grid coordinates took them as even: a test
// error 10 to 25 times the training one.
void require_even_stride(const SplitSpec& spec, const Shape& input_shape, bool has_channels) {
  if (spec.stride == 1) return;
  for (size_t axis = has_channels ? 2 : 1; axis < input_shape.size(); ++axis) {
    const int64_t n = input_shape[axis];
    EDDY_CHECK(n % spec.stride == 0 || (n - 1) % spec.stride == 0, spec.where, spec.file, ": stride ", spec.stride,
               " does not divide the ", n, " points of grid axis ", axis, " of input '", spec.input, "' (a periodic "
               "grid) nor its ", n - 1, " intervals (a grid with both ends), so the points it keeps would not be "
               "evenly spaced; give a stride that divides one of them");
  }
}

Split load_split(const SplitSpec& spec, const OperatorProblem& problem, const RowsToRead& rows_to_read) {
  const DType dtype = problem.training.dtype;
  const std::string what = cat(spec.where, spec.file, ": ");
  const Shape input_shape = shape_of(spec, spec.input), output_shape = shape_of(spec, spec.output);
  EDDY_CHECK(!input_shape.empty() && !output_shape.empty() && input_shape[0] == output_shape[0], what, "input '",
             spec.input, "' ", input_shape, " and output '", spec.output, "' ", output_shape,
             " must have the same number of samples on axis 0");
  EDDY_CHECK(spec.first < input_shape[0] || input_shape[0] == 0, what, "first = ", spec.first, " but '", spec.input,
             "' holds ", input_shape[0], " samples (rows 0 to ", input_shape[0] - 1, ")");
  EDDY_CHECK(spec.first + spec.samples <= input_shape[0], what, "samples = ", spec.samples,
             spec.first > 0 ? cat(" from row ", spec.first) : std::string(), " but '", spec.input, "' holds only ",
             input_shape[0]);
  // An empty split would train on or report the mean of nothing: NaN, found only after a run.
  EDDY_CHECK(input_shape[0] > 0, what, "input '", spec.input, "' ", input_shape, " and output '", spec.output, "' ",
             output_shape, " hold no samples; the ", spec.name, " split needs at least one");
  if (problem.model.type == ModelType::fno) require_even_stride(spec, input_shape, problem.data.input_channels);
  Split split;
  split.name = spec.name;
  split.size = spec.samples > 0 ? spec.samples : input_shape[0] - spec.first;
  int64_t last = 0;
  std::tie(split.first, last) = rows_to_read(split.size);
  split.input = read_rows(spec, spec.input, spec.first + split.first, spec.first + last, dtype);
  split.output = read_rows(spec, spec.output, spec.first + split.first, spec.first + last, dtype);
  // On the outputs as the split keeps them, after its stride: a sample zero at the points kept
  // passed the check made before, and its test error was inf every epoch.
  const bool training = &spec == &problem.data.train;
  auto check_outputs = [&] {
    if (!training || problem.training.loss == LossType::relative_l2) {
      require_nonzero_outputs(spec, split, what, training);
    }
  };
  if (problem.model.type == ModelType::deeponet) {
    EDDY_CHECK(split.input.dim() == 2 && split.output.dim() == 2, what, "DeepONet needs input [N, sensors] and "
               "output [N, points], got ", split.input.shape(), " and ", split.output.shape());
    const int64_t points = split.output.shape()[1];
    split.points = problem.data.points.empty()
                       ? reshape(arange(0, static_cast<double>(points), 1, dtype) / static_cast<double>(points),
                                 {points, 1})
                       : read_array(spec, problem.data.points, dtype);
    if (split.points.dim() == 1) split.points = unsqueeze(split.points, 1);
    EDDY_CHECK(split.points.dim() == 2 && split.points.shape()[0] == points, what, "points '", problem.data.points,
               "' ", split.points.shape(), " do not match the output's ", points, " points");
    // The trunk evaluates anywhere, so a stride thins the output points; the sensors stay.
    split.output = contiguous(slice(split.output, 1, 0, points, spec.stride));
    split.points = contiguous(slice(split.points, 0, 0, points, spec.stride));
    check_outputs();
    return split;
  }
  split.input = to_grid_layout(split.input, problem.data.input_channels, spec.stride);
  split.output = to_grid_layout(split.output, problem.data.output_channels, spec.stride);
  // Shapes as the whole split has them (`eddy check` reads none of its rows).
  const auto shown = [&](Shape shape) {
    shape[0] = split.size;
    return shape;
  };
  const int64_t d = static_cast<int64_t>(problem.model.fno.modes.size());
  // Named from the file's shape: a 2-D field with one modes entry wants a second entry, where the
  // channel key alone (the only remedy named before) reads its first axis as channels.
  const bool channels = problem.data.input_channels;
  const int64_t grid_axes = static_cast<int64_t>(input_shape.size()) - (channels ? 2 : 1);
  const auto entries = [](int64_t n) { return cat(n, n == 1 ? " entry" : " entries"); };
  EDDY_CHECK(grid_axes >= 1, what, "input '", spec.input, "' has shape ", input_shape, ": an FNO needs a grid axis "
             "after the samples' axis", channels ? " and the channels'" : "", " (model.modes has one entry per grid "
             "axis)");
  EDDY_CHECK(grid_axes == d, what, "input '", spec.input, "' has shape ", input_shape, ": samples, ",
             channels ? "channels, " : "", "and a grid of ", grid_axes, grid_axes == 1 ? " axis" : " axes",
             ", but model.modes has ", entries(d), " (one per grid axis): give model.modes ", entries(grid_axes),
             !channels && grid_axes > d ? ", or set data.input_channels: true if axis 1 holds channels" : "");
  EDDY_CHECK(split.output.dim() == d + 2 &&
                 Shape(split.output.shape().begin() + 2, split.output.shape().end()) ==
                     Shape(split.input.shape().begin() + 2, split.input.shape().end()),
             what, "output '", spec.output, "' gives ", shown(split.output.shape()), " but input '", spec.input,
             "' gives ", shown(split.input.shape()), "; FNO needs both on the same grid",
             problem.data.output_channels ? "" : " (set data.output_channels: true if axis 1 holds channels)");
  // A spectral layer needs two points an axis; found here rather than after the first epoch.
  for (int64_t axis = 2; axis < split.input.dim(); ++axis) {
    EDDY_CHECK(split.input.shape()[axis] >= 2, what, "input '", spec.input, "' gives the grid ",
               shown(split.input.shape()), " at stride ", spec.stride, "; an FNO needs at least 2 points on every "
               "axis (a smaller stride keeps more)");
  }
  check_outputs();
  return split;
}

std::pair<int64_t, int64_t> no_rows(int64_t) { return {0, 0}; }

// Every split, the training one's rows as `train_rows` picks them and the test sets' as `test_rows`,
// checked against each other.
Dataset load_splits(const OperatorProblem& problem, const RowsToRead& train_rows, const RowsToRead& test_rows) {
  NoGradGuard no_grad;
  Dataset data;
  const SplitSpec& train = problem.data.train;
  data.train = load_split(train, problem, train_rows);
  for (const SplitSpec& spec : problem.data.tests) {
    Split test = load_split(spec, problem, test_rows);
    // A test set of training samples reported training errors as test errors.
    const bool same_samples = io::same_hdf5_dataset(spec.file, spec.input, train.file, train.input);
    EDDY_CHECK(!same_samples || spec.first + test.size <= train.first || train.first + data.train.size <= spec.first,
               spec.where, "test set '", spec.name, "' reads rows ", spec.first, " to ", spec.first + test.size - 1,
               " of '", spec.input, "', and the training set rows ", train.first, " to ",
               train.first + data.train.size - 1, ": its errors would be training errors. Give the splits rows "
               "apart (`first` and `samples`) or another dataset");
    const auto channels = [](const Tensor& t) { return t.shape()[1]; };
    if (problem.model.type == ModelType::fno) {
      EDDY_CHECK(channels(test.input) == channels(data.train.input) &&
                     channels(test.output) == channels(data.train.output),
                 spec.where, "test set '", spec.name, "' has ", channels(test.input), " -> ", channels(test.output),
                 " channels but the training set ", channels(data.train.input), " -> ", channels(data.train.output));
    } else {
      EDDY_CHECK(channels(test.input) == channels(data.train.input), spec.where, "test set '", spec.name, "' has ",
                 channels(test.input), " sensors but the training set ", channels(data.train.input));
      EDDY_CHECK(channels(test.points) == channels(data.train.points), spec.where, "test set '", spec.name,
                 "' has query points of ", channels(test.points), " coordinates (", test.points.shape(),
                 ") but the training set's have ", channels(data.train.points));
    }
    data.tests.push_back(std::move(test));
  }
  return data;
}

}  // namespace

Dataset load_data(const OperatorProblem& problem, dist::Communicator& comm) {
  return load_splits(
      problem, [&](int64_t size) { return dist::shard(0, size, comm.rank(), comm.size()); }, all_rows);
}

Dataset data_layout(const OperatorProblem& problem) { return load_splits(problem, no_rows, no_rows); }

std::pair<Tensor, Tensor> batch_share(const Split& train, std::span<const int64_t> batch, dist::Communicator& comm) {
  NoGradGuard no_grad;
  const int ranks = comm.size(), me = comm.rank();
  const auto count = static_cast<int64_t>(batch.size());
  // Every (sender, receiver) block has room for the largest share; padding rows are never read.
  const int64_t widest = (count + ranks - 1) / ranks;
  auto holder = [&](int64_t sample) {
    int rank = 0;
    while (sample >= dist::shard(0, train.size, rank, ranks).second) ++rank;
    return rank;
  };
  // Rows of this rank's held samples to send, block by receiver, and where this rank's share
  // arrives: its k-th sample at row k of the block from the rank that holds it.
  std::vector<int64_t> sent(static_cast<size_t>(ranks * widest), 0), received;
  for (int receiver = 0; receiver < ranks; ++receiver) {
    const auto [first, last] = dist::shard(0, count, receiver, ranks);
    for (int64_t position = first; position < last; ++position) {
      const int64_t sample = batch[static_cast<size_t>(position)];
      const int sender = holder(sample);
      if (sender == me) sent[static_cast<size_t>(receiver * widest + position - first)] = sample - train.first;
      if (receiver == me) received.push_back(sender * widest + position - first);
    }
  }
  auto exchange = [&](const Tensor& held) {
    Shape rows = held.shape();
    rows[0] = ranks * widest;
    const Tensor sending = held.shape()[0] > 0 ? contiguous(index_select(held, 0, tensor(sent)))
                                               : zeros(rows, held.dtype());
    const Tensor arrived = Tensor::empty(rows, held.dtype(), held.device());
    comm.alltoall(sending, arrived);
    return index_select(arrived, 0, tensor(received));
  };
  return {exchange(train.input), exchange(train.output)};
}

Tensor to_grid_layout(Tensor rows, bool has_channels, int64_t stride) {
  if (!has_channels) rows = unsqueeze(rows, 1);
  for (int64_t axis = 2; axis < rows.dim() && stride > 1; ++axis) {
    rows = slice(rows, axis, 0, rows.shape()[axis], stride);
  }
  return contiguous(rows);
}

Split training_layout(const OperatorProblem& problem) {
  NoGradGuard no_grad;
  return load_split(problem.data.train, problem, no_rows);
}

Normalizer::Normalizer(const Tensor& samples, bool channel_axis, bool enabled, dist::Communicator& comm) {
  NoGradGuard no_grad;
  std::vector<int64_t> axes;
  for (int64_t axis = 0; axis < samples.dim(); ++axis) {
    if (!(channel_axis && axis == 1)) axes.push_back(axis);
  }
  if (enabled) {
    // Two passes over all ranks' samples, like mean then mean of squared deviations on one.
    const int64_t reduced_count = channel_axis ? samples.numel() / samples.shape()[1] : samples.numel();
    Tensor count = tensor(std::vector<double>{static_cast<double>(reduced_count)});
    comm.allreduce(count, count, dist::ReduceOp::sum);
    const double all_samples = count.item<double>();
    auto mean_over_ranks = [&](const Tensor& values) {
      const Tensor total = sum(values, axes, true);
      comm.allreduce(total, total, dist::ReduceOp::sum);
      return total / all_samples;
    };
    // In float64: in float32 the squares of values below about 1e-23 underflowed, and such a
    // channel was left unscaled as a constant one (the network saw zeros); above about 1e19 they
    // overflowed, and every value was scaled to 0.
    const Tensor wide = cast(samples, DType::f64);
    const Tensor mean = mean_over_ranks(wide);
    // A constant channel (zero deviation) is left unscaled rather than divided by zero.
    const Tensor deviation = sqrt(mean_over_ranks(square(wide - mean)));
    mean_ = cast(mean, samples.dtype());
    stddev_ = cast(where(gt(deviation, scalar(0.0, DType::f64)), deviation, ones_like(deviation)), samples.dtype());
  } else {
    Shape shape(samples.dim(), 1);
    if (channel_axis) shape[1] = samples.shape()[1];
    mean_ = zeros(shape, samples.dtype());
    stddev_ = ones(shape, samples.dtype());
  }
  register_buffer("mean", mean_);
  register_buffer("stddev", stddev_);
}

Tensor Normalizer::encode(const Tensor& x) const { return (x - mean_) / stddev_; }

Tensor Normalizer::decode(const Tensor& x) const { return x * stddev_ + mean_; }

Tensor Normalizer::in_deviations(const Tensor& x) const { return x / stddev_; }

}  // namespace eddy::operator_learning
