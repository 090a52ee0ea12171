// The collective primitives. Attrs.payload carries the communicator (not owned) and Attrs.axis
// the root of broadcast and reduce. Rules are written in the collectives themselves (see
// collectives.h for why they are each other's transposes).

#include "eddy/dist/collectives.h"


#include "eddy/core/distribution.h"
#include "eddy/ops/op_helpers.h"
#include "eddy/ops/ops.h"

namespace eddy::dist {
namespace {
using detail::dense;

Attrs attrs_for(Communicator& comm, int root = 0) {
  Attrs attrs;
  attrs.payload = std::shared_ptr<void>(std::shared_ptr<void>(), &comm);  // aliasing: not owned
  attrs.axis = root;
  return attrs;
}

int root_of(const Attrs& attrs) { return static_cast<int>(attrs.axis); }

void check_root(std::string_view op, const Attrs& attrs) {
  const int size = communicator_of(attrs).size();
  EDDY_CHECK(attrs.axis >= 0 && attrs.axis < size, op, ": root ", attrs.axis, " is not a rank of this ", size,
             "-process job");
}

Shape with_rows(const Shape& shape, int64_t rows) {
  Shape out = shape;
  out[0] = rows;
  return out;
}

// Hits of the maximum, weighted so that the weights of each element sum to one over all ranks.
Tensor max_weight(const Tensor& x, Communicator& comm) {
  const Tensor hits = cast(eq(x, all_reduce(x, ReduceOp::max, comm)), x.dtype());
  return hits / all_reduce(hits, ReduceOp::sum, comm);
}

// A primitive whose eval is one call of the communicator from a dense input to a fresh output.
Primitive collective(std::string_view name, std::function<OutputSpec(Inputs, const Attrs&)> infer,
                     std::function<void(Communicator&, const Tensor&, const Tensor&, const Attrs&)> call) {
  Primitive p;
  p.name = name;
  p.cost = CostClass::collective;
  p.infer = std::move(infer);
  p.eval = [call = std::move(call)](Inputs in, const Attrs& attrs, const OutputSpec& spec) {
    Tensor out = detail::new_output(spec, in[0]);
    call(communicator_of(attrs), dense(in[0]), out, attrs);
    return out;
  };
  return p;
}

OutputSpec same_spec(Inputs in, const Attrs&) { return OutputSpec{in[0].shape(), in[0].dtype()}; }

// Bytes one rank sends per byte of operand (CollectiveTraits::sent_per_operand_byte), by the ring
// algorithms: an all-reduce is a reduce-scatter and an all-gather of the whole; an all-gather
// passes on every other rank's part (the operand being one part); a reduce-scatter or an
// all-to-all sends all but its own share of the operand once; a broadcast or reduce about once.
double all_but_own_share(int64_t ranks) { return static_cast<double>(ranks - 1) / static_cast<double>(ranks); }
double twice_all_but_own_share(int64_t ranks) { return 2 * all_but_own_share(ranks); }
double every_other_part(int64_t ranks) { return static_cast<double>(ranks - 1); }
double once(int64_t ranks) { return ranks > 1 ? 1.0 : 0.0; }

// The rule both sums over the ranks share: a sum's tangent and cotangent are sums too.
Tensor summed_over_ranks(Inputs, const Attrs& a, int, const Tensor& t) {
  return all_reduce(t, ReduceOp::sum, communicator_of(a));
}

const Primitive& allreduce_sum_of_replicated_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "allreduce_sum_of_replicated";
  p.cost = CostClass::collective;  // its derivatives are collectives: every rank must run them alike
  p.collective = {.sends = false, .output_alike = true};
  p.linear = true;
  p.infer = [](Inputs in, const Attrs& a) {
    check_reduce_op("allreduce_sum_of_replicated", in[0], ReduceOp::sum);
    return same_spec(in, a);
  };
  p.eval = [](Inputs in, const Attrs& a, const OutputSpec&) {
    return in[0] * static_cast<double>(communicator_of(a).size());
  };
  p.jvp = summed_over_ranks;
  p.vjp = summed_over_ranks;
  return register_primitive(std::move(p));
}();

const Primitive& allreduce_sum_p = [] () -> const Primitive& {
  Primitive p = collective("allreduce_sum",
      [](Inputs in, const Attrs& a) {
        check_reduce_op("allreduce_sum", in[0], ReduceOp::sum);
        return same_spec(in, a);
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs&) { c.allreduce(x, out, ReduceOp::sum); });
  p.collective = {.output_alike = true, .given_alike_operand = &allreduce_sum_of_replicated_p,
                   .sent_per_operand_byte = twice_all_but_own_share};
  p.linear = true;
  p.jvp = summed_over_ranks;
  p.vjp = summed_over_ranks;
  return register_primitive(std::move(p));
}();

const Primitive& allreduce_max_p = [] () -> const Primitive& {
  Primitive p = collective("allreduce_max",
      [](Inputs in, const Attrs& a) {
        check_reduce_op("allreduce_max", in[0], ReduceOp::max);
        return same_spec(in, a);
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs&) { c.allreduce(x, out, ReduceOp::max); });
  p.jvp = [](Inputs in, const Attrs& a, int, const Tensor& t) {
    return all_reduce(t * max_weight(in[0], communicator_of(a)), ReduceOp::sum, communicator_of(a));
  };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    return all_reduce(g, ReduceOp::sum, communicator_of(a)) * max_weight(in[0], communicator_of(a));
  };
  p.collective = {.output_alike = true, .sent_per_operand_byte = twice_all_but_own_share};
  return register_primitive(std::move(p));
}();

// Attrs.shape holds the gathered row count: the ranks' parts may differ by a row (shard_range).
int64_t gathered_rows(const Attrs& attrs) { return attrs.shape.at(0); }

const Primitive& allgather_p = [] () -> const Primitive& {
  Primitive p = collective("allgather",
      [](Inputs in, const Attrs& a) {
        EDDY_CHECK(in[0].dim() >= 1, "all_gather: needs at least one axis to gather along, got a scalar");
        const Communicator& comm = communicator_of(a);
        const int64_t rows = gathered_rows(a);
        EDDY_CHECK(shard_range(rows, comm.size(), comm.rank()).size() == in[0].shape()[0], "all_gather: rank ",
                   comm.rank(), "'s part ", in[0].shape(), " is not its share of ", rows, " rows over ", comm.size(),
                   " ranks");
        return OutputSpec{with_rows(in[0].shape(), rows), in[0].dtype()};
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs&) { c.allgather(x, out); });
  p.linear = true;
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) {
    return all_gather(t, communicator_of(a), gathered_rows(a));
  };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return reduce_scatter(g, communicator_of(a)); };
  p.collective = {.output_alike = true, .sent_per_operand_byte = every_other_part};
  return register_primitive(std::move(p));
}();

const Primitive& reduce_scatter_p = [] () -> const Primitive& {
  Primitive p = collective("reduce_scatter",
      [](Inputs in, const Attrs& a) {
        const Communicator& comm = communicator_of(a);
        check_reduce_op("reduce_scatter", in[0], ReduceOp::sum);
        EDDY_CHECK(in[0].dim() >= 1, "reduce_scatter: needs at least one axis to scatter along, got a scalar");
        const int64_t rows = shard_range(in[0].shape()[0], comm.size(), comm.rank()).size();
        return OutputSpec{with_rows(in[0].shape(), rows), in[0].dtype()};
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs&) { c.reduce_scatter(x, out); });
  p.linear = true;
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return reduce_scatter(t, communicator_of(a)); };
  p.vjp = [](Inputs in, const Attrs& a, int, const Tensor& g) {
    return all_gather(g, communicator_of(a), in[0].shape()[0]);
  };
  p.collective.sent_per_operand_byte = all_but_own_share;
  return register_primitive(std::move(p));
}();

// Its own transpose: the cotangent of block j of rank r's output is block r of rank j's input,
// which is where all_to_all of the cotangent puts it.
const Primitive& all_to_all_p = [] () -> const Primitive& {
  Primitive p = collective("all_to_all",
      [](Inputs in, const Attrs& a) {
        const int size = communicator_of(a).size();
        EDDY_CHECK(in[0].dim() >= 1 && in[0].shape()[0] % size == 0, "all_to_all: axis 0 of ", in[0].shape(),
                   " does not split evenly over ", size, " ranks");
        return same_spec(in, a);
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs&) { c.alltoall(x, out); });
  p.linear = true;
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return all_to_all(t, communicator_of(a)); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return all_to_all(g, communicator_of(a)); };
  p.collective.sent_per_operand_byte = all_but_own_share;
  return register_primitive(std::move(p));
}();

const Primitive& broadcast_p = [] () -> const Primitive& {
  Primitive p = collective("broadcast_from_root",
      [](Inputs in, const Attrs& a) {
        check_root("broadcast", a);
        return same_spec(in, a);
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs& a) {
        Tensor buffer = out;
        buffer.copy_(x);
        c.broadcast(buffer, root_of(a));
      });
  p.linear = true;
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return broadcast(t, root_of(a), communicator_of(a)); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return reduce(g, root_of(a), communicator_of(a)); };
  p.collective = {.output_alike = true, .sent_per_operand_byte = once};
  return register_primitive(std::move(p));
}();

const Primitive& reduce_p = [] () -> const Primitive& {
  Primitive p = collective("reduce_to_root",
      [](Inputs in, const Attrs& a) {
        check_root("reduce", a);
        check_reduce_op("reduce", in[0], ReduceOp::sum);
        return same_spec(in, a);
      },
      [](Communicator& c, const Tensor& x, const Tensor& out, const Attrs& a) {
        Tensor result = out;
        result.fill_(0);
        c.reduce(x, result, root_of(a));
      });
  p.linear = true;
  p.jvp = [](Inputs, const Attrs& a, int, const Tensor& t) { return reduce(t, root_of(a), communicator_of(a)); };
  p.vjp = [](Inputs, const Attrs& a, int, const Tensor& g) { return broadcast(g, root_of(a), communicator_of(a)); };
  p.collective.sent_per_operand_byte = once;
  return register_primitive(std::move(p));
}();

const Primitive& sum_gradient_over_ranks_p = [] () -> const Primitive& {
  Primitive p;
  p.name = "sum_gradient_over_ranks";
  p.cost = CostClass::collective;  // its transpose is one: never dropped or merged
  p.infer = same_spec;
  p.eval = [](Inputs in, const Attrs&, const OutputSpec&) {
    return make_view(in[0], in[0].shape(), in[0].strides(), in[0].offset());
  };
  p.jvp = [](Inputs, const Attrs&, int, const Tensor& t) { return t; };
  p.vjp = summed_over_ranks;
  p.collective = {.sends = false, .forwards_input = true};
  return register_primitive(std::move(p));
}();

}  // namespace

Communicator& communicator_of(const Attrs& attrs) { return *static_cast<Communicator*>(attrs.payload.get()); }

Tensor sum_gradient_over_ranks(const Tensor& x, Communicator& comm) {
  return dispatch(sum_gradient_over_ranks_p, {x}, attrs_for(comm));
}

Tensor all_reduce(const Tensor& x, ReduceOp op, Communicator& comm) {
  // A value every rank holds alike (core/distribution.h says who knows that) sums to itself times
  // the rank count: so Megatron's backward pass never sums the loss's cotangent, every rank's.
  const Primitive& sum =
      held_alike_across(x, &comm) ? *allreduce_sum_p.collective.given_alike_operand : allreduce_sum_p;
  switch (op) {
    case ReduceOp::sum: return dispatch(sum, {x}, attrs_for(comm));
    case ReduceOp::mean:
      check_reduce_op("all_reduce", x, ReduceOp::mean);
      return dispatch(sum, {x}, attrs_for(comm)) / static_cast<double>(comm.size());
    case ReduceOp::max: return dispatch(allreduce_max_p, {x}, attrs_for(comm));
  }
  throw Error("all_reduce: unknown ReduceOp");
}

Tensor all_reduce_of_replicated(const Tensor& x, Communicator& comm) {
  return dispatch(allreduce_sum_of_replicated_p, {x}, attrs_for(comm));
}

Tensor all_gather(const Tensor& x, Communicator& comm, int64_t rows) {
  Attrs attrs = attrs_for(comm);
  attrs.shape = {rows >= 0 ? rows : (x.dim() ? x.shape()[0] : 0) * comm.size()};
  return dispatch(allgather_p, {x}, attrs);
}

Tensor reduce_scatter(const Tensor& x, Communicator& comm) {
  return dispatch(reduce_scatter_p, {x}, attrs_for(comm));
}

Tensor all_to_all(const Tensor& x, Communicator& comm) { return dispatch(all_to_all_p, {x}, attrs_for(comm)); }

Tensor broadcast(const Tensor& x, int root, Communicator& comm) {
  return dispatch(broadcast_p, {x}, attrs_for(comm, root));
}

Tensor reduce(const Tensor& x, int root, Communicator& comm) { return dispatch(reduce_p, {x}, attrs_for(comm, root)); }

void send(const Tensor& x, int dest, int tag, Communicator& comm) { comm.send(dense(x.detach()), dest, tag); }

Tensor recv(const Shape& shape, DType dtype, int source, int tag, Communicator& comm) {
  Tensor out = Tensor::empty(shape, dtype);
  comm.recv(out, source, tag);
  return out;
}

}  // namespace eddy::dist
