// Distributed checkpoints saved on one mesh and loaded on another (io/distributed_checkpoint.h):
//   checkpoint_on_ranks save DIR   trains a small Llama two Adam steps, its attention heads and MLP
//                                  units split over the ranks (over "mp" of a [2, N/2] mesh, the
//                                  batch over "dp", when N is even and over 2), saves the model and
//                                  the optimiser, then takes a third step
//   checkpoint_on_ranks load DIR   builds the model on this job's ranks, split over all of them
//                                  (nothing split on one process), loads the checkpoint and takes
//                                  the third step
// Each prints "third step loss <value>" from rank 0; tests/dist/checkpoint_on_ranks.sh checks that
// they agree.

#include <cstdio>
#include <string>

#include "eddy/dist/dtensor.h"
#include "eddy/eddy.h"
#include "eddy/io/distributed_checkpoint.h"
#include "eddy/nn/transformer.h"
#include "eddy/optim/adam.h"
#include "tiny_llama.h"

using namespace eddy;

using testing::megatron_plan;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: checkpoint_on_ranks save|load DIR\n");
    return 2;
  }
  const std::string mode = argv[1], directory = argv[2];
  const int ranks = dist::default_communicator().size();
  nn::LlamaModel model(testing::tiny_llama_options());
  auto [inputs, targets] = testing::tiny_llama_batch(testing::tiny_llama_options().vocab_size);

  const bool grid = mode == "save" && ranks > 2 && ranks % 2 == 0;
  if (grid) {
    const auto mesh = dist::ProcessMesh::create({2, ranks / 2}, {"dp", "mp"});
    const Placement whole = Placement::replicate();
    dist::shard_module(model, mesh, megatron_plan({whole, Placement::shard(0)}, {whole, Placement::shard(1)}));
    inputs = dist::shard_tensor(inputs, mesh, {Placement::shard(0), whole});
    targets = dist::shard_tensor(targets, mesh, {Placement::shard(0), whole});
  } else if (ranks > 1) {
    const auto mesh = dist::ProcessMesh::create({ranks}, {"mp"});
    dist::shard_module(model, mesh, megatron_plan({Placement::shard(0)}, {Placement::shard(1)}));
  }
  optim::AdamOptions adam_options;
  adam_options.learning_rate = 1e-2;
  optim::Adam adam(model.parameters(), adam_options);
  auto step = [&] {
    adam.zero_grad();
    const Tensor loss = cross_entropy(model.forward(inputs), targets);
    backward(loss);
    adam.step();
    return dist::full_tensor(loss).item<double>();
  };

  nn::StateDict state;
  auto gather_state = [&] {
    for (auto& [key, tensor] : model.state_dict()) state["model." + key] = tensor;
    for (auto& [key, tensor] : adam.state_dict()) state["optimizer." + key] = tensor;
  };
  if (mode == "save") {
    step();
    step();
    gather_state();
    io::save_distributed_state(directory, state);
  } else {
    gather_state();
    io::load_distributed_state(directory, state);
    nn::StateDict optimizer_state;
    for (auto& [key, tensor] : state) {
      if (key.rfind("optimizer.", 0) == 0) optimizer_state[key.substr(10)] = tensor;
    }
    adam.load_state_dict(optimizer_state);
  }
  const double loss = step();
  if (dist::default_communicator().rank() == 0) std::printf("third step loss %.17g\n", loss);
}
