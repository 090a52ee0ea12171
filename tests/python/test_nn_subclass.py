"""Models written in Python (subclasses of eddy.nn.Module), the layers they are built from, gradient
clipping and learning-rate schedules."""

import gc
import math

import numpy as np
import pytest

import eddy

RNG = np.random.default_rng(11)


class TwoLayer(eddy.nn.Module):
    """A model as a PyTorch user writes one: submodules, a raw parameter, a buffer, forward."""

    def __init__(self, seed=0):
        super().__init__()
        self.hidden = eddy.nn.Linear(3, 8, dtype="float64", seed=seed)
        self.out = eddy.nn.Linear(8, 2, dtype="float64", seed=seed + 1)
        self.scale = eddy.nn.Parameter(eddy.ones([2], dtype="float64"))
        self.register_buffer("shift", eddy.tensor([0.5, -0.5], dtype="float64"))
        self.note = "plain attributes stay Python's"

    def forward(self, x):
        return self.out(eddy.tanh(self.hidden(x))) * self.scale + self.shift


def numpy_two_layer(model, x):
    h = np.tanh(x @ np.asarray(model.hidden.weight) + np.asarray(model.hidden.bias))
    y = h @ np.asarray(model.out.weight) + np.asarray(model.out.bias)
    return y * np.asarray(model.scale) + np.asarray(model.shift)


def names(pairs):
    return [name for name, _ in pairs]


def test_a_subclass_registers_its_submodules_parameters_and_buffers():
    model = TwoLayer()
    assert isinstance(model, eddy.nn.Module)
    assert names(model.named_parameters()) == ["scale", "hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    assert names(model.named_buffers()) == ["shift"]
    # Pairs, as torch.nn.Module yields them: a dict made this loop unpack each name's characters.
    for name, parameter in model.named_parameters():
        assert isinstance(name, str) and isinstance(parameter, eddy.Tensor)
    assert model.parameter_count() == 2 + 3 * 8 + 8 + 8 * 2 + 2
    assert sorted(model.state_dict()) == sorted(["scale", "shift", "hidden.weight", "hidden.bias", "out.weight",
                                                 "out.bias"])
    assert model.note == "plain attributes stay Python's"
    x = RNG.standard_normal((5, 3))
    np.testing.assert_allclose(np.asarray(model(x)), numpy_two_layer(model, x), rtol=1e-12)


def test_gradients_reach_every_parameter_and_training_lowers_the_loss():
    model = TwoLayer(seed=3)
    x = eddy.as_tensor(RNG.standard_normal((32, 3)))
    target = eddy.as_tensor(RNG.standard_normal((32, 2)))
    loss = eddy.mean(eddy.square(model(x) - target))
    loss.backward()
    # The raw parameter's gradient against a central difference.
    step = 1e-6
    with eddy.no_grad():
        scale = np.asarray(model.scale).copy()
        values = []
        for sign in (1, -1):
            model.scale[0] = scale[0] + sign * step
            values.append(float(eddy.mean(eddy.square(model(x) - target))))
        model.scale[0] = scale[0]
    np.testing.assert_allclose(np.asarray(model.scale.grad)[0], (values[0] - values[1]) / (2 * step), rtol=1e-6)
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name

    optimizer = eddy.optim.Adam(model.parameters(), lr=1e-2)
    first = float(loss)
    for _ in range(300):
        optimizer.zero_grad()
        loss = eddy.mean(eddy.square(model(x) - target))
        loss.backward()
        optimizer.step()
    assert float(loss) < 0.5 * first
    # The optimiser moved the tensors the model reads.
    assert not np.array_equal(np.asarray(model.scale), np.ones(2))


def test_state_dict_round_trip_between_instances():
    source, copy = TwoLayer(seed=1), TwoLayer(seed=7)
    x = RNG.standard_normal((4, 3))
    assert not np.allclose(np.asarray(source(x)), np.asarray(copy(x)))
    copy.load_state_dict(source.state_dict())
    np.testing.assert_array_equal(np.asarray(source(x)), np.asarray(copy(x)))
    with pytest.raises(eddy.Error, match="missing key \"scale\""):
        copy.load_state_dict({k: v for k, v in source.state_dict().items() if k != "scale"})


def test_a_state_dict_that_lists_a_shared_tensor_under_each_name_loads():
    # PyTorch's state_dict lists a tied tensor under every name it is reached by; eddy's lists it
    # once, and refused torch's other name as an unexpected key.
    class Tied(eddy.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = eddy.nn.Parameter(eddy.ones([3, 2], dtype="float64"))
            self.head = eddy.nn.Module()
            self.head.w = self.embed

        def forward(self, x):
            return x

    model = Tied()
    assert list(model.state_dict()) == ["embed"]
    values = eddy.tensor(np.arange(6.0).reshape(3, 2))
    model.load_state_dict({"embed": values, "head.w": values})
    np.testing.assert_array_equal(np.asarray(model.head.w), np.arange(6.0).reshape(3, 2))
    with pytest.raises(eddy.Error, match="\"head.w\" differs from \"embed\", which this model uses in its place"):
        model.load_state_dict({"embed": values, "head.w": values * 2.0})


class Block(eddy.nn.Module):
    def __init__(self, width, seed):
        super().__init__()
        self.norm = eddy.nn.LayerNorm(width, dtype="float64")
        self.linear = eddy.nn.Linear(width, width, dtype="float64", seed=seed)
        self.dropout = eddy.nn.Dropout(0.5, seed=seed)

    def forward(self, x):
        return x + self.dropout(self.linear(self.norm(x)))


class Stack(eddy.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block(4, seed=1)
        self.second = Block(4, seed=2)

    def forward(self, x):
        return self.second(self.first(x))


def test_python_modules_nest_and_share_the_training_mode():
    model = Stack()
    assert names(model.named_parameters()) == [
        f"{block}.{layer}.{name}" for block in ("first", "second") for layer in ("norm", "linear")
        for name in ("weight", "bias")]
    x = eddy.as_tensor(RNG.standard_normal((3, 4)))
    assert model.training and model.first.dropout.training
    model.eval()
    assert not model.first.training and not model.second.dropout.training
    evaluated = np.asarray(model(x))
    np.testing.assert_array_equal(evaluated, np.asarray(model(x)))  # no dropout after eval()
    model.train()
    assert model.second.dropout.training
    assert not np.array_equal(np.asarray(model(x)), evaluated)


class Doubler(eddy.nn.Module):
    def forward(self, x):
        return 2 * x


def test_a_python_module_inside_sequential_lives_as_long_as_the_container():
    model = eddy.nn.Sequential([eddy.nn.Linear(2, 2, dtype="float64", seed=0), Doubler()])
    gc.collect()  # the Doubler has no Python reference left but the container's
    linear_only = eddy.nn.Sequential([eddy.nn.Linear(2, 2, dtype="float64", seed=0)])
    x = RNG.standard_normal((3, 2))
    np.testing.assert_allclose(np.asarray(model(x)), 2 * np.asarray(linear_only(x)), rtol=1e-12)


def test_reassigning_keeps_one_registration_per_name():
    model = TwoLayer()
    model.out = eddy.nn.Linear(8, 2, dtype="float64", seed=9)
    assert names(model.named_parameters()).count("out.weight") == 1
    np.testing.assert_array_equal(np.asarray(dict(model.named_parameters())["out.weight"]), np.asarray(model.out.weight))
    replacement = eddy.nn.Parameter(eddy.full([2], 3.0, dtype="float64"))
    model.scale = replacement
    np.testing.assert_array_equal(np.asarray(dict(model.named_parameters())["scale"]), [3.0, 3.0])
    assert model.scale is not None and np.asarray(model.scale)[0] == 3.0
    model.shift = eddy.zeros([2], dtype="float64")
    np.testing.assert_array_equal(np.asarray(model.state_dict()["shift"]), [0.0, 0.0])


def test_bad_definitions_and_assignments_are_refused_clearly():
    class NoInit(eddy.nn.Module):
        def __init__(self):
            self.layer = eddy.nn.Linear(2, 2)

    with pytest.raises(TypeError, match=r"NoInit: eddy.nn.Module.__init__\(\) was not called"):
        NoInit()

    class NoForward(eddy.nn.Module):
        pass

    with pytest.raises(eddy.Error, match=r"NoForward has no forward\(\)"):
        NoForward()(eddy.ones([2]))
    with pytest.raises(eddy.Error, match=r"NoForward has no forward\(\)"):
        eddy.nn.Sequential([NoForward()])(eddy.ones([2]))

    model = TwoLayer()
    with pytest.raises(eddy.Error, match="parameter \"scale\" takes a leaf tensor that requires grad"):
        model.scale = eddy.ones([2], dtype="float64")
    with pytest.raises(eddy.Error, match="\"hidden\" is a submodule; it cannot become a parameter"):
        model.hidden = eddy.nn.Parameter(eddy.ones([2]))
    with pytest.raises(eddy.Error, match="\"shift\" is a registered buffer; it cannot become a submodule"):
        model.shift = eddy.nn.Linear(2, 2)
    with pytest.raises(eddy.Error, match="assign it a tensor or None, not str"):
        model.scale = "x"
    with pytest.raises(AttributeError, match="'TwoLayer' object has no attribute 'missing'"):
        model.missing
    # A computed tensor is a plain attribute, as in torch.nn.Module, not a parameter.
    model.cached = model.scale * 2
    assert "cached" not in names(model.named_parameters())


def test_compiled_forward_of_a_python_module_matches_eager():
    model = TwoLayer(seed=4)
    x = eddy.as_tensor(RNG.standard_normal((6, 3)))
    compiled = eddy.jit(lambda x: model(x))
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(model(x)), rtol=1e-12)
    with eddy.no_grad():
        model.scale[1] = 5.0
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(model(x)), rtol=1e-12)


def test_embedding_and_layer_norm_against_numpy():
    table = eddy.nn.Embedding(10, 4, dtype="float64", seed=2)
    ids = eddy.tensor([[1, 3], [9, 1]], dtype="int64")
    np.testing.assert_array_equal(np.asarray(table(ids)), np.asarray(table.weight)[[[1, 3], [9, 1]]])
    norm = eddy.nn.LayerNorm(5, dtype="float64")
    x = RNG.standard_normal((3, 5))
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(norm(x)), expected, rtol=1e-10)
    assert eddy.nn.LayerNorm(5, bias=False).bias is None
    with pytest.raises(eddy.Error, match=r"Dropout: p must be in \[0, 1\)"):
        eddy.nn.Dropout(1.0)


def test_dropout_zeroes_and_rescales_in_training_only():
    dropout = eddy.nn.Dropout(0.25, seed=3)
    x = eddy.ones([20000], dtype="float64")
    y = np.asarray(dropout(x))
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / 0.75)
    assert abs(kept.mean() - 0.75) < 0.02
    dropout.eval()
    np.testing.assert_array_equal(np.asarray(dropout(x)), np.ones(20000))


def test_clip_grad_norm_as_torch():
    a = eddy.tensor([3.0, 0.0], dtype="float64", requires_grad=True)
    b = eddy.tensor([4.0], dtype="float64", requires_grad=True)
    eddy.sum(a * eddy.tensor([3.0, 0.0], dtype="float64")).backward()
    eddy.sum(b * 4.0).backward()
    total = eddy.nn.clip_grad_norm([a, b], max_norm=1.0)
    assert total == pytest.approx(5.0)
    factor = 1.0 / (5.0 + 1e-6)  # torch.nn.utils.clip_grad_norm_'s
    np.testing.assert_allclose(np.asarray(a.grad), [3 * factor, 0.0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(b.grad), [4 * factor], rtol=1e-12)
    assert eddy.nn.clip_grad_norm([a, b], max_norm=10.0) == pytest.approx(1.0, rel=1e-5)
    with pytest.raises(eddy.Error):
        eddy.nn.clip_grad_norm([a], max_norm=0.0)


def test_learning_rate_schedules():
    cosine = eddy.optim.CosineWithWarmupSchedule(peak=1.0, warmup=2, total=6, floor=0.1)
    assert [cosine(s) for s in range(2)] == [0.5, 1.0]
    assert cosine(2) == pytest.approx(1.0)
    assert cosine(4) == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * 0.5)) / 2)
    assert cosine(6) == pytest.approx(0.1) and cosine(100) == pytest.approx(0.1)
    assert eddy.optim.StepSchedule(1.0, period=3, gamma=0.5)(7) == pytest.approx(0.25)
    assert eddy.optim.ExponentialSchedule(2.0, gamma=0.9)(2) == pytest.approx(2 * 0.81)
    piecewise = eddy.optim.PiecewiseSchedule([10, 20], [1.0, 0.5, 0.1])
    assert [piecewise(s) for s in (0, 10, 19, 20)] == [1.0, 0.5, 0.5, 0.1]
    with pytest.raises(eddy.Error):
        eddy.optim.CosineWithWarmupSchedule(peak=1.0, warmup=5, total=5)
    # Applied as a training loop does.
    x = eddy.tensor([1.0], requires_grad=True)
    optimizer = eddy.optim.SGD([x], lr=0.0)
    optimizer.learning_rate = cosine(0)
    assert optimizer.learning_rate == 0.5


def test_a_module_cannot_contain_itself():
    # parameters(), train() and state_dict() recursed until the process crashed, and the cycle,
    # held in C++, was never freed.
    outer = Stack()
    with pytest.raises(eddy.Error, match="would make the model contain itself"):
        outer.first.parent = outer
    with pytest.raises(eddy.Error, match="would make the model contain itself"):
        outer.me = outer
    assert len(outer.named_parameters()) == 8
    shared = eddy.nn.Linear(2, 2)
    twice = TwoLayer()
    twice.a, twice.b = shared, shared  # one module in two places is fine, listed once
    assert [name for name, _ in twice.named_parameters() if name.startswith(("a.", "b."))] == ["a.weight", "a.bias"]


def test_built_in_layers_are_final():
    # A subclass of Linear kept its own parameters out of the registries and its forward out of
    # Sequential, silently: wrap the layer instead.
    with pytest.raises(TypeError):
        class Lora(eddy.nn.Linear):
            pass


def test_deleting_or_assigning_none_unregisters():
    model = TwoLayer()
    del model.scale
    assert "scale" not in names(model.named_parameters())
    with pytest.raises(AttributeError):
        model.scale
    model.out = None
    assert not any(name.startswith("out.") for name, _ in model.named_parameters())
    assert model.out is None
    del model.hidden
    assert names(model.named_parameters()) == []
    model.note2 = 3
    del model.note2
    with pytest.raises(AttributeError):
        del model.missing


def test_a_bare_module_is_a_container():
    # As torch users build one: the assignment raised AttributeError (no __dict__) after it had
    # registered the value, so the parameters were in named_parameters() but not readable.
    box = eddy.nn.Module()
    box.w = eddy.nn.Parameter(eddy.ones([2]))
    box.lin = eddy.nn.Linear(2, 3)
    box.note = "kept"
    assert names(box.named_parameters()) == ["w", "lin.weight", "lin.bias"]
    assert box.lin.weight.shape == (2, 3) and box.note == "kept"
    assert box.w is not None and box.w.shape == (2,)
    # A built-in layer would keep them as plain attributes, left out of parameters() and never
    # trained: refused, where other attributes are kept.
    lin = eddy.nn.Linear(2, 2)
    with pytest.raises(eddy.Error, match="Linear: cannot take \"gate\", a parameter: a built-in layer"):
        lin.gate = eddy.nn.Parameter(eddy.ones([2]))
    with pytest.raises(eddy.Error, match="Linear: cannot take \"adapter\", a module"):
        lin.adapter = eddy.nn.Linear(2, 2)
    lin.note = "kept"
    lin.activation = eddy.tensor([1.0, 1.0], requires_grad=True) * 2  # not a leaf: a plain attribute, as in torch
    assert lin.note == "kept" and names(lin.named_parameters()) == ["weight", "bias"]


def test_a_traced_value_cannot_become_model_state():
    # self.last = x * 2 inside eddy.jit left a tensor without values in the model.
    class Remembers(eddy.nn.Module):
        def forward(self, x):
            self.register_buffer("last", x * 2)
            return x

    model = Remembers()
    with pytest.raises(eddy.Error, match="assigned a value traced inside eddy.jit"):
        eddy.jit(lambda x: model(x))(eddy.ones([2]))
    model(eddy.ones([2]))  # eagerly it is state as any other
    np.testing.assert_array_equal(np.asarray(model.state_dict()["last"]), [2.0, 2.0])


def test_module_list_and_dict_register_their_modules():
    layers = eddy.nn.ModuleList([eddy.nn.Linear(2, 3, seed=0), eddy.nn.Linear(3, 1, seed=1)])
    heads = eddy.nn.ModuleDict({"u": eddy.nn.Linear(1, 1, seed=2)})

    class Net(eddy.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers, self.heads = layers, heads

        def forward(self, x):
            for layer in self.layers:
                x = eddy.tanh(layer(x))
            return self.heads["u"](x)

    net = Net()
    assert names(net.named_parameters()) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                            "heads.u.weight", "heads.u.bias"]
    assert len(layers) == 2 and layers[-1] is layers[1] and list(heads) == ["u"] and "u" in heads
    assert net(eddy.ones([4, 2])).shape == (4, 1)
    net.eval()
    assert not layers[0].training
    with pytest.raises(KeyError, match="name of one of its methods"):
        heads["train"] = eddy.nn.Linear(1, 1)


def test_train_takes_mode_as_torch():
    model = TwoLayer()
    assert model.train(mode=False) is model and not model.training


def test_one_grad_scaler_for_two_optimisers():
    # The first step() raised the scale, and the second divided its gradients by the new one.
    a = eddy.tensor([1.0], requires_grad=True)
    b = eddy.tensor([1.0], requires_grad=True)
    first, second = eddy.optim.SGD([a], lr=0.1), eddy.optim.SGD([b], lr=0.1)
    scaler = eddy.optim.GradScaler(init_scale=4.0, growth_interval=1)
    scaler.scale(eddy.sum(a * 3.0) + eddy.sum(b * 3.0)).backward()
    scaler.unscale_(first)
    scaler.unscale_(second)
    assert scaler.step(first) and scaler.step(second)
    np.testing.assert_allclose([float(a), float(b)], [0.7, 0.7])
    assert scaler.current_scale == 8.0  # one good iteration, counted once


def test_a_childs_train_override_is_called_by_its_parent():
    # The parent's train() recursed in C++ and skipped it: the frozen dropout came back on.
    class Frozen(eddy.nn.Module):
        def __init__(self):
            super().__init__()
            self.dropout = eddy.nn.Dropout(0.5, seed=1)

        def train(self, mode=True):
            super().train(mode)
            self.dropout.eval()
            return self

        def forward(self, x):
            return self.dropout(x)

    class Parent(eddy.nn.Module):
        def __init__(self):
            super().__init__()
            self.frozen = Frozen()

        def forward(self, x):
            return self.frozen(x)

    parent = Parent().train()
    assert parent.training and parent.frozen.training and not parent.frozen.dropout.training
    np.testing.assert_array_equal(np.asarray(parent(eddy.ones([100]))), np.ones(100))


def test_names_and_results_a_container_cannot_take_are_refused():
    model = TwoLayer()
    with pytest.raises(eddy.Error, match="holds no '.'"):
        model.register_buffer("a.b", eddy.zeros([1]))
    with pytest.raises(eddy.Error, match="\"shift\" is a registered buffer; del it first to make it a parameter"):
        model.shift = eddy.nn.Parameter(eddy.zeros([2]))

    class Pair(eddy.nn.Module):
        def forward(self, x):
            return x, x

    with pytest.raises(eddy.Error, match=r"Pair.forward returned tuple where a C\+\+ caller \(Sequential\) takes one"):
        eddy.nn.Sequential([Pair()])(eddy.ones([2]))
    # ModuleDict's own key list is not a key (it was overwritten, and the dict broke).
    with pytest.raises(KeyError, match="_keys"):
        eddy.nn.ModuleDict({"_keys": eddy.nn.Linear(2, 2)})
    # A value that is no module was held and listed, and reached by no parameters() or train().
    with pytest.raises(TypeError, match="ModuleDict holds modules .*, got int for key 'x'"):
        eddy.nn.ModuleDict({"x": 3})
    with pytest.raises(TypeError, match="ModuleList holds modules .*, got Tensor for index 1"):
        eddy.nn.ModuleList([eddy.nn.Linear(2, 2), eddy.ones([2])])


def test_sequential_takes_its_layers_as_arguments_or_as_a_list():
    first, second = eddy.nn.Linear(2, 3, seed=1), eddy.nn.Linear(3, 1, seed=2)
    x = eddy.ones([4, 2])
    np.testing.assert_array_equal(eddy.nn.Sequential(first, second)(x).numpy(),
                                  eddy.nn.Sequential([first, second])(x).numpy())
    assert len(eddy.nn.Sequential(first, second)) == 2


def test_a_module_list_slices_as_torchs():
    layers = eddy.nn.ModuleList([eddy.nn.Linear(2, 2, seed=s) for s in range(3)])
    head = layers[0:2]
    assert isinstance(head, eddy.nn.ModuleList) and len(head) == 2
    assert head[1] is layers[1] and list(layers[::-1])[0] is layers[2]


def test_zero_grad_and_to_as_torch():
    model = TwoLayer()
    eddy.sum(model(eddy.as_tensor(RNG.standard_normal((3, 3))))).backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    assert model.to("cpu") is model and model.scale.device == "cpu"
