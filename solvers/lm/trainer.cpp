#include "solvers/lm/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include <unistd.h>

#include "eddy/autodiff/tape.h"
#include "eddy/core/memory.h"
#include "eddy/dist/communicator.h"
#include "eddy/dist/data_parallel.h"
#include "eddy/dist/dtensor.h"
#include "eddy/dist/sharded_optimizer.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/hdf5.h"
#include "eddy/ops/autocast.h"
#include "eddy/ops/ops.h"
#include "eddy/optim/adam.h"
#include "eddy/optim/clip.h"
#include "solvers/common/checkpoint_history.h"
#include "solvers/common/interrupt.h"
#include "solvers/common/progress.h"
#include "solvers/common/step_function.h"
#include "solvers/common/training_config.h"
#include "solvers/common/training_loop.h"
#include "solvers/lm/corpus.h"
#include "solvers/lm/model.h"

namespace eddy::lm {
namespace {

// The dropout key of micro-batch `stream`: a Philox key of its own, its counters from 0. With the
// seed as the key and stream * 2^32 as the first counter, a micro-batch that drew more than 2^32
// values (26 windows of GPT-2 small at context 1024) reused the next one's masks, and the first
// micro-batch's counters were those the weights were initialised from.
Tensor dropout_key(uint64_t seed, uint64_t stream) {
  std::seed_seq words{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(stream),
                      static_cast<uint32_t>(stream >> 32), 0x64726f70u};  // "drop": apart from draw_batch's
  std::mt19937_64 mixed(words);
  return random_key(mixed(), 0);
}

struct History {
  std::vector<double> steps, train_loss;
  std::vector<double> evaluated_steps, validation_loss;
};

// The optimiser state of the two parameter groups, their keys prefixed apart.
void add_prefixed(nn::StateDict& into, const std::string& prefix, const nn::StateDict& from) {
  for (const auto& [key, value] : from) into[prefix + key] = value;
}

nn::StateDict with_prefix(const nn::StateDict& from, const std::string& prefix) {
  nn::StateDict picked;
  for (const auto& [key, value] : from) {
    if (key.starts_with(prefix)) picked[key.substr(prefix.size())] = value;
  }
  return picked;
}

void write_history(const std::string& path, const History& history, const std::string& config_hash) {
  io::Hdf5Writer out(path);
  out.write("step", tensor(history.steps));
  out.write("train_loss", tensor(history.train_loss));
  out.write("validation/step", tensor(history.evaluated_steps));
  out.write("validation/loss", tensor(history.validation_loss));
  std::vector<double> perplexity;
  for (double loss : history.validation_loss) perplexity.push_back(std::exp(loss));
  out.write("validation/perplexity", tensor(perplexity));
  out.set_attribute("/", "config_hash", config_hash);
  out.commit();
}

// The job's mesh and where the batch lies on it (ParallelSpec); a null mesh on one process.
struct Parallelism {
  std::shared_ptr<const dist::ProcessMesh> mesh;
  std::vector<Placement> batch;
  // The ranks that hold the same parameters and split the batch: the dp axis's (or none), over
  // which ZeRO stage 1 shards the optimiser state.
  dist::Communicator* data_parallel = nullptr;

  Tensor place_batch(const Tensor& tokens) const { return mesh ? dist::shard_tensor(tokens, mesh, batch) : tokens; }
};

// Makes the mesh and places the model's parameters on it, in place: split on the mp axis as
// tensor parallelism puts them, whole elsewhere (where their gradients are summed over the ranks).
Parallelism place_model(const LmProblem& p, nn::Module& model) {
  dist::Communicator& world = dist::default_communicator();
  Parallelism parallel;
  if (world.size() == 1) return parallel;
  parallel.mesh = solvers::make_mesh(p.parallel, "dp", world);
  const Shape& shape = parallel.mesh->shape();
  const std::vector<std::string>& names = parallel.mesh->names();
  parallel.batch.assign(shape.size(), Placement::replicate());
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (names[axis] == "dp") {
      parallel.batch[axis] = Placement::shard(0);
      parallel.data_parallel = &parallel.mesh->communicator(static_cast<int64_t>(axis));
      continue;
    }
    if (shape[axis] == 1) continue;
    for (const auto& [name, parameter] : model.named_parameters()) {
      const std::optional<Placement> split = tensor_parallel_placement(p.model.architecture, name);
      if (!split) continue;
      // The vocabulary is the tokenizer's, known only now (the config checked heads and units).
      EDDY_CHECK(parameter.shape()[static_cast<size_t>(split->axis)] % shape[axis] == 0, p.parallel.where, "mp = ",
                 shape[axis], " does not divide axis ", split->axis, " of ", name, " ", parameter.shape(),
                 "; mp splits the heads, the MLP units and the vocabulary (tokenizer.vocab_size)");
      std::vector<Placement> placements(shape.size());
      placements[axis] = *split;
      dist::shard_in_place(parameter, parallel.mesh, placements);
    }
  }
  return parallel;
}

}  // namespace

TrainResult train(const LmProblem& p, const TrainOptions& options) {
  dist::Communicator& world = dist::default_communicator();
  solvers::require_same_config_on_every_rank(world, p.config_hash, p.resolved_config, options.eager);
  // Before the corpus is staged (minutes on a real one): checked when the mesh was made, after it,
  // rank 0's refusal removed the staged files under a rank still reading them, whose "cannot open
  // tokenizer.json" was at times the only message left.
  if (world.size() > 1) solvers::check_job_size(p.parallel, world);
  const solvers::SolverScope scope(p.device, world);
  const bool root = world.rank() == 0;  // rank 0 reports and writes the results
  std::ostream* log = root ? options.log : nullptr;
  const TrainingSpec& t = p.training;
  // Preparing the corpus writes into the run folder, which a refused --resume must leave as it was.
  const std::string checkpoint = solvers::checkpoint_path(p.output.dir);
  const solvers::TrainingRun run{p.output.dir, p.resolved_config, p.config_hash, options.resume, "the data",
                                 kResumable, {}, solvers::RunLength{p.training.steps, "training.steps"},
                                 p.derived_settings, p.source};
  if (options.resume) solvers::check_resume(run);
  // Rank 0 stages the tokenizer and the token files (moved into the run folder once the loop
  // holds it and has checked the run); the others read them once it has.
  const std::string staging = solvers::text_of_rank_0(world, ".tmp-" + std::to_string(::getpid()));
  if (!root) world.barrier();
  StagedCorpus staged = root ? stage_corpus(p, log, options.resume, staging) : StagedCorpus{};
  if (!root) staged.corpus = corpus_staged_by_rank_0(p, staging);
  if (root) world.barrier();
  const PreparedCorpus& corpus = staged.corpus;
  const CorpusPaths places = corpus_paths(p);
  const TokenFile train_tokens(corpus.train_tokens, places.train_tokens),
      validation_tokens(corpus.validation_tokens, places.validation_tokens);
  const int64_t context = p.model.context, batch = t.batch_size;
  const std::vector<Batch> validation = validation_batches(validation_tokens, p);
  // Fails before training when the training split is too small.
  draw_batch(train_tokens, 1, context, t.seed, 0);

  const std::shared_ptr<nn::CausalLanguageModel> model =
      make_model(p.model, corpus.tokenizer->vocab_size(), t.dtype, t.seed);
  const Parallelism parallel = place_model(p, *model);
  const std::vector<Tensor> parameters = model->parameters();

  History history;
  solvers::ProgressLine progress(log, root && options.terminal, t.evaluate_every, options.warnings);
  auto note = [&](const std::string& line) { progress.note(line); };
  const auto warn = solvers::rank_0_warnings(progress, root);
  // A micro-batch's loss and the gradients of `scale` times it, from its tokens, targets,
  // dropout key and scale.
  solvers::StepFunction training_step(
      "training step",
      [&](const std::vector<Tensor>& inputs) {
        Tensor dropout_key = inputs[2];
        const AutocastScope products(t.autocast);
        const Tensor loss = cross_entropy(model->forward(inputs[0], &dropout_key), inputs[1]);
        std::vector<Tensor> outputs = grad({loss * inputs[3]}, parameters);
        outputs.insert(outputs.begin(), loss);
        return outputs;
      },
      !options.eager, note, warn);
  // Weight decay on matrices (projections, embeddings) only, not on norms and biases, as GPT-2
  // and Llama were trained.
  std::vector<Tensor> matrices, vectors;
  for (const Tensor& parameter : parameters) (parameter.dim() >= 2 ? matrices : vectors).push_back(parameter);
  auto adamw = [&](std::vector<Tensor> group, double weight_decay) {
    optim::AdamOptions adam;
    adam.learning_rate = t.learning_rate;
    adam.beta1 = t.beta1;
    adam.beta2 = t.beta2;
    adam.weight_decay = weight_decay;
    // ZeRO shards the state over the ranks that hold the same parameters, the dp axis's: a mesh
    // without one leaves nothing to shard over. The gradients reach it as the dp ranks' parts
    // (below).
    const bool sharable = !parallel.mesh || parallel.data_parallel;
    return solvers::make_optimizer(
        sharable ? t.zero_stage : 0, std::move(group),
        [adam, &training_step](std::vector<Tensor> slices) {
          auto optimizer = std::make_unique<optim::AdamW>(std::move(slices), adam);
          // The eager update's ops took about 5% of the example's step.
          solvers::compile_updates(*optimizer, training_step);
          return optimizer;
        },
        dist::RankGradients::to_sum, parallel.data_parallel ? *parallel.data_parallel : world);
  };
  const std::unique_ptr<optim::Optimizer> decayed_optimizer = adamw(matrices, t.weight_decay);
  const std::unique_ptr<optim::Optimizer> undecayed_optimizer = adamw(vectors, 0);
  optim::Optimizer &decayed = *decayed_optimizer, &undecayed = *undecayed_optimizer;
  // Under ZeRO stage 1 (and on more than one dp rank), the optimisers that reduce-scatter.
  std::vector<dist::ShardedOptimizer*> sharded;
  for (optim::Optimizer* optimizer : {&decayed, &undecayed}) {
    if (auto* zero = dynamic_cast<dist::ShardedOptimizer*>(optimizer)) sharded.push_back(zero);
  }
  const auto schedule = optim::make_schedule(t.schedule, t.learning_rate, t.steps);

  solvers::StepFunction evaluation_step(
      "evaluation",
      [&](const std::vector<Tensor>& inputs) {
        const AutocastScope products(t.autocast);
        return std::vector<Tensor>{cross_entropy(model->forward(inputs[0], nullptr), inputs[1])};
      },
      !options.eager, note, warn);
  auto validation_loss = [&] {
    NoGradGuard no_grad;
    model->eval();
    double sum = 0;
    for (const Batch& b : validation) {
      const Tensor loss = evaluation_step({parallel.place_batch(b.tokens), parallel.place_batch(b.targets)}).at(0);
      sum += dist::full_tensor(loss).item<double>();
    }
    model->train();
    return sum / static_cast<double>(validation.size());
  };

  const Tensor scale = scalar(1.0 / static_cast<double>(t.accumulation), t.dtype);
  auto started = std::chrono::steady_clock::now();
  dist::CollectiveTraffic traffic_at_start;
  auto step_started = started;
  int64_t first_step = 0;
  double step_loss = 0;
  TrainResult result;
  result.tokens_per_step = batch * context * t.accumulation;

  solvers::TrainingHooks steps;
  steps.begin_step = [&](int64_t step) {
    step_started = std::chrono::steady_clock::now();
    decayed.set_learning_rate(schedule->learning_rate(step));
    undecayed.set_learning_rate(schedule->learning_rate(step));
  };
  steps.evaluate = [&](int64_t step, int64_t) {
    std::vector<Tensor> sums;
    step_loss = 0;
    for (int64_t micro = 0; micro < t.accumulation; ++micro) {
      // Windows and dropout masks depend only on (seed, step, micro-batch): a resumed run takes
      // the steps an uninterrupted one would.
      const auto stream = static_cast<uint64_t>(step * t.accumulation + micro);
      const Batch b = draw_batch(train_tokens, batch, context, t.seed, stream);
      // The gradients come out as each dp rank's part, summed over the dp ranks once per step in
      // apply: summing them in the backward pass would send every parameter's gradient apart,
      // once per micro-batch.
      std::optional<dist::DeferGradientSums> per_rank_parts;
      if (parallel.data_parallel) per_rank_parts.emplace(*parallel.data_parallel);
      const std::vector<Tensor> outputs =
          training_step({parallel.place_batch(b.tokens), parallel.place_batch(b.targets), dropout_key(t.seed, stream),
                         scale});
      step_loss += dist::full_tensor(outputs[0]).item<double>() / static_cast<double>(t.accumulation);
      if (sums.empty()) {
        sums.assign(outputs.begin() + 1, outputs.end());
      } else {
        for (size_t i = 0; i < sums.size(); ++i) sums[i] = sums[i] + outputs[i + 1];
      }
    }
    optim::set_grads(parameters, sums);
    return step_loss;
  };
  steps.apply = [&] {
    // One message for the step's gradients: ZeRO-1's reduce-scatter (each rank receives its
    // slices' sums, and clipping reads those), or one all-reduce.
    if (!sharded.empty()) {
      for (dist::ShardedOptimizer* zero : sharded) zero->reduce_gradients();
      if (t.clip > 0) dist::clip_reduced_grad_norm(sharded, t.clip);
    } else {
      if (parallel.data_parallel) dist::sum_gradients(parameters, *parallel.data_parallel);
      if (t.clip > 0) optim::clip_grad_norm(parameters, t.clip);
    }
    decayed.step();
    undecayed.step();
    result.step_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_started).count());
  };
  steps.end_step = [&](int64_t done) {
    history.steps.push_back(static_cast<double>(done));
    history.train_loss.push_back(step_loss);
    // On the cadence only: the run's last step is evaluated for the results below, and a record
    // of it here went into the checkpoint, where a run extended from it kept an extra one.
    const bool evaluate = done % t.evaluate_every == 0;
    if (evaluate) {
      history.evaluated_steps.push_back(static_cast<double>(done));
      history.validation_loss.push_back(validation_loss());
    }
    progress.report(
        "step", done, t.steps,
        [&] {
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          std::string details = cat("loss ", solvers::ProgressLine::format(step_loss));
          if (!history.validation_loss.empty()) {
            const double loss = history.validation_loss.back();
            details += cat("  val ", solvers::ProgressLine::format(loss), " (ppl ",
                           solvers::ProgressLine::format(std::exp(loss)), ")");
          }
          const double rate =
              static_cast<double>((done - first_step) * result.tokens_per_step) / std::max(seconds, 1e-9);
          details = cat(details, "  lr ", solvers::ProgressLine::format(decayed.learning_rate()), "  ",
                        static_cast<int64_t>(rate), " tok/s");
          if (world.size() == 1 || done == first_step) return details;
          // What this rank handed to collectives per step (their inputs' bytes, evaluations included).
          const double sent = static_cast<double>(dist::collective_traffic().bytes - traffic_at_start.bytes);
          return cat(details, "  sent ", memory_text(sent / static_cast<double>(done - first_step)), "/step");
        },
        evaluate);
  };
  steps.describe_stop = [&](int64_t step, int64_t, double loss) {
    return cat("training stopped at step ", step + 1, ": the loss is ", solvers::loss_text(loss));
  };
  steps.training_state = [&] {
    nn::StateDict state;
    add_prefixed(state, "optimizer.decayed.", decayed.state_dict());
    add_prefixed(state, "optimizer.undecayed.", undecayed.state_dict());
    solvers::save_series(state, "step", history.steps);
    solvers::save_series(state, "train_loss", history.train_loss);
    solvers::save_series(state, "validation_step", history.evaluated_steps);
    solvers::save_series(state, "validation_loss", history.validation_loss);
    return state;
  };
  steps.restore = [&](const nn::StateDict& saved) {
    decayed.load_state_dict(with_prefix(saved, "optimizer.decayed."));
    undecayed.load_state_dict(with_prefix(saved, "optimizer.undecayed."));
    history.steps = solvers::restored_series(saved, "step", checkpoint);
    history.train_loss = solvers::restored_series(saved, "train_loss", checkpoint);
    history.evaluated_steps = solvers::restored_series(saved, "validation_step", checkpoint);
    history.validation_loss = solvers::restored_series(saved, "validation_loss", checkpoint);
  };
  solvers::TrainingLoop loop(run, *model, parameters, dist::default_communicator(), progress, steps);

  result.parameters = model->parameter_count();
  int64_t step = first_step = loop.start();
  if (root) staged.commit();
  if (log) {
    *log << "model: " << (p.model.architecture == Architecture::gpt2 ? "gpt2" : "llama") << ", "
                 << result.parameters << " parameters; "
                 << train_tokens.size() << " training and " << validation_tokens.size() << " validation tokens"
                 << (corpus.reused ? " (token files reused)" : "") << "\n";
    const int64_t state = solvers::optimizer_state_bytes(decayed) + solvers::optimizer_state_bytes(undecayed);
    const bool sharded = t.zero_stage == 1 && world.size() > 1;
    *log << "AdamW state: " << memory_text(static_cast<double>(state))
         << (sharded ? cat(" on rank 0, sharded over ", world.size(), " ranks (ZeRO stage 1)")
                     : std::string(world.size() > 1 ? " on every rank" : ""))
         << "\n";
  }
  started = std::chrono::steady_clock::now();
  traffic_at_start = dist::collective_traffic();
  if (auto stopped = loop.run(step, t.steps, p.output.checkpoint_every)) {
    result.steps = stopped->step;
    result.message = stopped->message;
    if (root) write_history(p.output.dir + "/history.h5", history, p.config_hash);
    return result;
  }
  // A run stopped between evaluations is evaluated where it stopped. That record is for the
  // results only: the checkpoint keeps `history`, so that a resumed run's records are an
  // uninterrupted run's.
  History results = history;
  if (results.validation_loss.empty() || results.evaluated_steps.back() != static_cast<double>(step)) {
    results.evaluated_steps.push_back(static_cast<double>(step));
    results.validation_loss.push_back(validation_loss());
  }
  result.steps = step;
  result.train_loss = results.train_loss.empty() ? std::nan("") : results.train_loss.back();
  result.validation_loss = results.validation_loss.back();
  if (!std::isfinite(result.validation_loss)) {
    result.message = cat("training ended with a non-finite validation loss; ",
                         loop.has_good_checkpoint() ? "the last good checkpoint is " + checkpoint
                                                    : std::string("no checkpoint was written by this run"));
    return result;
  }
  // The checkpoint first: results that cannot be written (a full disk) lose no training.
  const std::optional<solvers::NonFiniteStop> state_overflowed = loop.save(step);
  if (root) write_history(p.output.dir + "/history.h5", results, p.config_hash);
  if (state_overflowed) {
    result.message = state_overflowed->message;
    return result;
  }
  result.interrupted = loop.interrupted();
  result.finished = !result.interrupted;
  result.message = cat(solvers::training_ended(result.interrupted), step, " steps; ",
                       results.train_loss.empty() ? std::string("no training step taken")
                                                  : cat("training loss ", result.train_loss),
                       ", validation loss ", result.validation_loss, " (perplexity ", std::exp(result.validation_loss),
                       ")");
  return result;
}

}  // namespace eddy::lm
