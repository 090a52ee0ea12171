// eddy's C++ API on the side-by-side workloads of bench/peers (see common.py there): the same
// weights and points from the one safetensors file, the same losses, Adam, and the same JSON
// line as the Python implementations print, so run.py compares and tabulates them together.
//
//   eddy_peers --data FILE --workload NAME [--threads N] [--min-time SECONDS] [--device cpu|cuda]
//              [--expect CHECK0 CHECK1 [--rtol R]] [--check-only] [--compiled]
//
// With --device cuda, the weights and points go to GPU 0 before anything runs, and each timed step
// waits for the GPU.
//
// With --compiled, the step (loss and its weight gradient) runs through eddy::compile: traced
// once, fused, and replayed; the Adam update stays eager. The PINN workloads then take their
// derivatives by Taylor mode (one forward pass) instead of nested reverse mode, as eddy's PINN
// solver does by default; the row's note says so.
//
// With --expect, a check value further than rtol (relative) from the reference's stops the run
// before anything is timed; --check-only prints the check values and stops.
//
// OpenMP threads wait between parallel regions as the `eddy` command's and the Python module's do
// (GOMP_SPINCOUNT=1000, src/cli/thread_waits.h), so that "eddy compiled" and "eddy solve" differ
// only in what runs outside the step.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "eddy/compiler/compile.h"
#include "eddy/compiler/taylor.h"
#include "eddy/eddy.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/neural_operators.h"
#include "eddy/optim/adam.h"
#include "thread_waits.h"

namespace {

using eddy::Tensor;
using Data = std::map<std::string, Tensor>;

constexpr double kBurgersNu = 0.01 / std::numbers::pi;
constexpr double kKovasznayNu = 1.0 / 40.0;

Tensor mlp(const std::vector<Tensor>& params, Tensor z) {
  for (size_t l = 0; l < params.size(); l += 2) {
    z = eddy::matmul(z, params[l]) + params[l + 1];
    if (l + 2 < params.size()) z = eddy::tanh(z);
  }
  return z;
}

// d(sum y)/d(xs), differentiable again when create_graph.
std::vector<Tensor> d(const Tensor& y, const std::vector<Tensor>& xs, bool create_graph = true) {
  return eddy::grad({y}, xs, {eddy::ones_like(y)}, create_graph);
}

Tensor mse(const Tensor& a, const Tensor& b) { return eddy::mean(eddy::square(a - b)); }
Tensor mean_square(const Tensor& a) { return eddy::mean(eddy::square(a)); }

Tensor burgers(const std::vector<Tensor>& p, const Data& data) {
  const Tensor &x = data.at("x"), &t = data.at("t");
  const Tensor u = mlp(p, eddy::concat({x, t}, 1));
  const std::vector<Tensor> first = d(u, {x, t});
  const Tensor u_xx = d(first[0], {x})[0];
  const Tensor r = first[1] + u * first[0] - kBurgersNu * u_xx;
  const Tensor ub = mlp(p, eddy::concat({data.at("bx"), data.at("bt")}, 1));
  return mean_square(r) + mse(ub, data.at("bu"));
}

// The PINN losses again, with the fields' derivatives from one Taylor-mode pass.
Tensor burgers_taylor(eddy::TaylorOperator& jets_of, const std::vector<Tensor>& p, const Data& data) {
  const eddy::TaylorJets jets = jets_of(eddy::concat({data.at("x"), data.at("t")}, 1), eddy::TaylorOptions{{0}, false, {}});
  const Tensor &u = jets.value, &u_x = jets.first[0], &u_t = jets.first[1], &u_xx = jets.second[0];
  const Tensor r = u_t + u * u_x - kBurgersNu * u_xx;
  const Tensor ub = mlp(p, eddy::concat({data.at("bx"), data.at("bt")}, 1));
  return mean_square(r) + mse(ub, data.at("bu"));
}

Tensor kovasznay_taylor(eddy::TaylorOperator& jets_of, const std::vector<Tensor>& p, const Data& data) {
  const eddy::TaylorJets jets = jets_of(eddy::concat({data.at("x"), data.at("y")}, 1), eddy::TaylorOptions{{}, true, {}});
  auto column = [](const Tensor& t, int64_t c) { return eddy::slice(t, 1, c, c + 1); };
  const Tensor u = column(jets.value, 0), v = column(jets.value, 1);
  const Tensor &d_x = jets.first[0], &d_y = jets.first[1];
  const Tensor r1 = u * column(d_x, 0) + v * column(d_y, 0) + column(d_x, 2) - kKovasznayNu * column(jets.laplacian, 0);
  const Tensor r2 = u * column(d_x, 1) + v * column(d_y, 1) + column(d_y, 2) - kKovasznayNu * column(jets.laplacian, 1);
  const Tensor r3 = column(d_x, 0) + column(d_y, 1);
  const Tensor ob = mlp(p, eddy::concat({data.at("bx"), data.at("by")}, 1));
  return mean_square(r1) + mean_square(r2) + mean_square(r3) + mse(column(ob, 0), data.at("bu")) +
         mse(column(ob, 1), data.at("bv"));
}

// The same loss with the Laplacian from Taylor mode: value and Laplacian in one forward pass.
std::pair<Tensor, Tensor> taylor_laplacian(eddy::TaylorOperator& jets_of, const Data& data) {
  const eddy::TaylorJets jets = jets_of(eddy::concat({data.at("x"), data.at("y"), data.at("z")}, 1));
  return {mean_square(jets.laplacian) + mean_square(jets.value), jets.laplacian};
}

std::pair<Tensor, Tensor> laplacian(const std::vector<Tensor>& p, const Data& data, bool create_graph) {
  const std::vector<Tensor> xs = {data.at("x"), data.at("y"), data.at("z")};
  const Tensor u = mlp(p, eddy::concat(xs, 1));
  const std::vector<Tensor> first = d(u, xs);
  Tensor lap = d(first[0], {xs[0]}, create_graph)[0];
  for (size_t i = 1; i < 3; ++i) lap = lap + d(first[i], {xs[i]}, create_graph)[0];
  return {mean_square(lap) + mean_square(u), lap};
}

Tensor kovasznay(const std::vector<Tensor>& p, const Data& data) {
  const Tensor &x = data.at("x"), &y = data.at("y");
  const Tensor out = mlp(p, eddy::concat({x, y}, 1));
  const Tensor u = eddy::slice(out, 1, 0, 1), v = eddy::slice(out, 1, 1, 2), pr = eddy::slice(out, 1, 2, 3);
  const std::vector<Tensor> du = d(u, {x, y}), dv = d(v, {x, y}), dp = d(pr, {x, y});
  const Tensor lap_u = d(du[0], {x})[0] + d(du[1], {y})[0];
  const Tensor lap_v = d(dv[0], {x})[0] + d(dv[1], {y})[0];
  const Tensor r1 = u * du[0] + v * du[1] + dp[0] - kKovasznayNu * lap_u;
  const Tensor r2 = u * dv[0] + v * dv[1] + dp[1] - kKovasznayNu * lap_v;
  const Tensor r3 = du[0] + dv[1];
  const Tensor ob = mlp(p, eddy::concat({data.at("bx"), data.at("by")}, 1));
  return mean_square(r1) + mean_square(r2) + mean_square(r3) + mse(eddy::slice(ob, 1, 0, 1), data.at("bu")) +
         mse(eddy::slice(ob, 1, 1, 2), data.at("bv"));
}

struct Args {
  std::string data, workload;
  int threads = 1;
  double min_time = 3.0;
  std::vector<double> expect;
  double rtol = 1e-4;
  bool check_only = false;
  bool compiled = false;
  eddy::Device device = eddy::cpu();
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--check-only" || key == "--compiled") {
      (key == "--compiled" ? a.compiled : a.check_only) = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) throw eddy::Error("eddy_peers: " + key + " needs a value");
    const std::string value = argv[i + 1];
    if (key == "--expect" && i + 2 < argc) {
      a.expect = {std::stod(value), std::stod(argv[i + 2])};
      ++i;
    } else if (key == "--rtol") a.rtol = std::stod(value);
    else if (key == "--data") a.data = value;
    else if (key == "--workload") a.workload = value;
    else if (key == "--threads") a.threads = std::stoi(value);
    else if (key == "--min-time") a.min_time = std::stod(value);
    else if (key == "--device") a.device = eddy::parse_device(value);
    else throw eddy::Error("eddy_peers: unknown argument " + key);
  }
  if (a.data.empty() || a.workload.empty()) throw eddy::Error("eddy_peers: --data and --workload are required");
  return a;
}

// Median seconds per step: 2 warm-up steps, then at least 5 steps and min_time seconds. Each
// step ends when `device` has finished its work.
std::pair<double, int> time_steps(const std::function<void()>& user_step, double min_time, eddy::Device device) {
  auto step = [&] {
    user_step();
    eddy::backend_for(device).synchronize(device);
  };
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  step();
  step();
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 5 || (seconds(start, Clock::now()) < min_time && times.size() < 1000)) {
    const auto t0 = Clock::now();
    step();
    times.push_back(seconds(t0, Clock::now()));
  }
  const int n = static_cast<int>(times.size());
  std::sort(times.begin(), times.end());
  const double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  return {median, n};
}

int run(const Args& args) {
  eddy::set_num_threads(args.threads);
  const eddy::nn::StateDict inputs = eddy::io::load_safetensors(args.data).tensors;
  const std::string& wl = args.workload;
  const std::string prefix = wl == "burgers" || wl == "kovasznay" || wl == "fno" ? wl : "laplacian";
  Data data;
  for (const auto& [name, t] : inputs) {
    if (name.rfind(prefix + ".", 0) == 0) data[name.substr(prefix.size() + 1)] = eddy::to(t, args.device);
  }
  eddy::optim::AdamOptions adam;  // lr 1e-3, betas (0.9, 0.999), eps 1e-8: as common.ADAM

  std::vector<Tensor> params;
  std::shared_ptr<eddy::nn::Fno> fno;
  if (prefix == "fno") {
    eddy::nn::FnoOptions o;
    o.modes = {12, 12};
    o.width = 32;
    o.layers = 4;
    o.projection_width = 128;
    eddy::nn::StateDict state;
    for (const auto& [name, t] : data) {
      if (name != "a" && name != "y") state[name] = t;
    }
    fno = std::make_shared<eddy::nn::Fno>(o);
    fno->to(args.device);
    fno->load_state_dict(state);
    params = fno->parameters();
  } else {
    // Names as "w" + std::to_string(l) trip GCC 12's -Wrestrict false positive.
    auto layer_key = [](char kind, size_t l) { return std::string(1, kind).append(std::to_string(l)); };
    for (size_t l = 0; data.count(layer_key('w', l)); ++l) {
      for (char kind : {'w', 'b'}) {
        Tensor p = data.at(layer_key(kind, l));
        if (wl != "laplacian-fwd") p.requires_grad_();
        params.push_back(p);
      }
    }
    const std::map<std::string, std::vector<std::string>> inputs_of = {
        {"burgers", {"x", "t"}}, {"laplacian", {"x", "y", "z"}}, {"kovasznay", {"x", "y"}}};
    for (const std::string& k : inputs_of.at(prefix)) data.at(k).requires_grad_();
  }

  auto jets_of = std::make_shared<eddy::TaylorOperator>([&](const Tensor& points) { return mlp(params, points); },
                                                        eddy::TaylorOptions{{}, true, {}});
  double check0 = 0, check1 = 0;
  std::function<void()> timed;
  std::unique_ptr<eddy::optim::Adam> optimizer;
  if (wl == "burgers" || wl == "kovasznay" || wl == "fno") {
    optimizer = std::make_unique<eddy::optim::Adam>(params, adam);
    std::function<Tensor()> loss_fn;
    if (wl == "burgers") loss_fn = [&] { return burgers(params, data); };
    if (wl == "kovasznay") loss_fn = [&] { return kovasznay(params, data); };
    if (wl == "fno") loss_fn = [&] { return mse(fno->forward(data.at("a")), data.at("y")); };
    std::function<Tensor()> compiled_loss_fn = loss_fn;
    if (wl == "burgers") compiled_loss_fn = [&] { return burgers_taylor(*jets_of, params, data); };
    if (wl == "kovasznay") compiled_loss_fn = [&] { return kovasznay_taylor(*jets_of, params, data); };
    auto compiled_step = std::make_shared<eddy::CompiledFunction>(eddy::compile([&, compiled_loss_fn](const std::vector<Tensor>&) {
      const Tensor loss = compiled_loss_fn();
      std::vector<Tensor> outputs = eddy::grad({loss}, params);
      outputs.insert(outputs.begin(), loss);
      return outputs;
    }));
    auto step = [&, loss_fn, compiled_step] {
      optimizer->zero_grad();
      Tensor loss;
      if (args.compiled) {
        std::vector<Tensor> outputs = (*compiled_step)({});
        loss = outputs[0];
        eddy::optim::set_grads(params, std::vector<Tensor>(outputs.begin() + 1, outputs.end()));
      } else {
        loss = loss_fn();
        backward(loss);
      }
      optimizer->step();
      return loss.item<double>();
    };
    check0 = step();
    check1 = step();
    timed = [step] { step(); };
  } else if (wl == "laplacian-fwd") {
    auto compiled_step = std::make_shared<eddy::CompiledFunction>(eddy::compile([&](const std::vector<Tensor>&) {
      auto [loss, lap] = taylor_laplacian(*jets_of, data);
      return std::vector<Tensor>{loss, lap};
    }));
    auto step = [&, compiled_step] {
      if (!args.compiled) return laplacian(params, data, false);
      std::vector<Tensor> outputs = (*compiled_step)({});
      return std::make_pair(outputs[0], outputs[1]);
    };
    const auto [loss, lap] = step();
    check0 = loss.item<double>();
    check1 = eddy::mean(lap).item<double>();
    timed = [step] { (void)step().first.item<double>(); };
  } else if (wl == "laplacian-grad") {
    auto eager_step = [&] {
      const Tensor loss = laplacian(params, data, true).first;
      std::vector<Tensor> outputs = eddy::grad({loss}, params);
      outputs.insert(outputs.begin(), loss);
      return outputs;
    };
    auto compiled_step = std::make_shared<eddy::CompiledFunction>(eddy::compile([&](const std::vector<Tensor>&) {
      const Tensor loss = taylor_laplacian(*jets_of, data).first;
      std::vector<Tensor> outputs = eddy::grad({loss}, params);
      outputs.insert(outputs.begin(), loss);
      return outputs;
    }));
    auto step = [&, eager_step, compiled_step] {
      std::vector<Tensor> outputs = args.compiled ? (*compiled_step)({}) : eager_step();
      return std::make_pair(outputs[0], std::vector<Tensor>(outputs.begin() + 1, outputs.end()));
    };
    const auto [loss, grads] = step();
    check0 = loss.item<double>();
    for (const Tensor& g : grads) check1 += eddy::sum(eddy::square(eddy::cast(g, eddy::DType::f64))).item<double>();
    timed = [step] { (void)step(); };
  } else {
    throw eddy::Error("eddy_peers: unknown workload " + wl);
  }

  const double checks[2] = {check0, check1};
  for (size_t i = 0; i < args.expect.size() && !args.check_only; ++i) {
    if (!(std::abs(checks[i] - args.expect[i]) <= args.rtol * std::abs(args.expect[i]))) {
      std::fprintf(stderr, "%s %s: check value %zu is %.9g, the reference has %.9g (relative tolerance %g)\n",
                   args.compiled ? "eddy compiled" : "eddy C++", wl.c_str(), i, checks[i], args.expect[i], args.rtol);
      return 1;
    }
  }
  const auto [median, steps] =
      args.check_only ? std::pair<double, int>{0.0, 0} : time_steps(timed, args.min_time, args.device);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"impl\": \"%s\", \"workload\": \"%s\", \"threads\": %d, \"checks\": [%.17g, %.17g], "
              "\"median_s\": %.9g, \"steps\": %d, \"peak_rss_mib\": %.3f, \"note\": \"%s\"}\n",
              args.compiled ? "eddy compiled" : "eddy C++", wl.c_str(), args.threads, check0, check1, median, steps, usage.ru_maxrss / 1024.0,
              args.compiled && prefix != "fno" ? "derivatives by Taylor mode" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  eddy::cli::use_short_thread_waits(argv);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
