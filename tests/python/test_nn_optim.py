"""eddy.nn models, eddy.optim optimisers and safetensors files from Python."""

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import eddy

RNG = np.random.default_rng(5)


# ---- models ----


def test_linear_is_x_at_w_plus_b():
    layer = eddy.nn.Linear(3, 2, dtype="float64", seed=1)
    w, b = np.asarray(layer.weight), np.asarray(layer.bias)
    assert w.shape == (3, 2) and b.shape == (2,)
    x = RNG.standard_normal((5, 3))
    np.testing.assert_allclose(np.asarray(layer(x)), x @ w + b, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(layer.forward(eddy.as_tensor(x))), x @ w + b, rtol=1e-12)
    assert layer.parameter_count() == 8
    assert isinstance(layer, eddy.nn.Module)
    assert set(dict(layer.named_parameters())) == {"weight", "bias"}
    assert layer.weight.requires_grad
    no_bias = eddy.nn.Linear(3, 2, bias=False)
    assert no_bias.bias is None and no_bias.parameter_count() == 6
    assert no_bias.weight.dtype == eddy.float32
    # The seed decides the initial weights.
    same = eddy.nn.Linear(3, 2, dtype="float64", seed=1)
    other = eddy.nn.Linear(3, 2, dtype="float64", seed=2)
    np.testing.assert_array_equal(np.asarray(same.weight), w)
    assert not np.array_equal(np.asarray(other.weight), w)


def test_activation_and_sequential():
    first = eddy.nn.Linear(2, 4, dtype="float64", seed=0)
    second = eddy.nn.Linear(4, 1, dtype="float64", seed=1)
    model = eddy.nn.Sequential([first, eddy.nn.Activation("tanh"), second])
    assert len(model) == 3
    x = RNG.standard_normal((6, 2))
    hidden = np.tanh(x @ np.asarray(first.weight) + np.asarray(first.bias))
    expected = hidden @ np.asarray(second.weight) + np.asarray(second.bias)
    np.testing.assert_allclose(np.asarray(model(x)), expected, rtol=1e-12)
    assert model.parameter_count() == 2 * 4 + 4 + 4 + 1
    assert len(model.parameters()) == 4
    np.testing.assert_allclose(np.asarray(eddy.nn.Activation("relu")(x)), np.maximum(x, 0))
    with pytest.raises(eddy.Error, match='unknown activation "swish"'):
        eddy.nn.Activation("swish")


def test_a_module_used_twice_is_listed_and_stepped_once():
    # Its weights were listed twice: SGD moved them by 2 lr grad and Adam kept two states for them.
    lin = eddy.nn.Linear(3, 3, dtype=eddy.float64)
    model = eddy.nn.Sequential([lin, eddy.nn.Activation("tanh"), lin])
    assert len(model.parameters()) == 2 and model.parameter_count() == 12
    assert sorted(model.state_dict()) == ["0.bias", "0.weight"]
    x = eddy.tensor(np.ones((2, 3)))
    before = np.asarray(lin.parameters()[0]).copy()
    optimizer = eddy.optim.SGD(model.parameters(), lr=0.1)
    eddy.sum(model(x)).backward()
    gradient = np.asarray(lin.parameters()[0].grad).copy()
    optimizer.step()
    np.testing.assert_allclose(np.asarray(lin.parameters()[0]), before - 0.1 * gradient, rtol=1e-14)
    p = lin.parameters()[0]
    with pytest.raises(eddy.Error, match="parameter 1 is the same tensor as parameter 0"):
        eddy.optim.Adam([p, p])


def test_train_and_eval_return_the_module_as_in_pytorch():
    # `model = ....eval()` left model None.
    model = eddy.nn.Sequential([eddy.nn.Linear(2, 2)])
    assert model.eval() is model and not model.training
    assert model.train() is model and model.training


@pytest.mark.parametrize("architecture", ["mlp", "modified_mlp", "resnet", "pirate_net"])
def test_pinn_models(architecture):
    model = eddy.nn.pinn_model(2, 3, width=8, depth=2, architecture=architecture, dtype="float64", seed=4,
                               fourier_features=5 if architecture == "pirate_net" else 0)
    x = RNG.standard_normal((5, 2))
    y = model(x)
    assert y.shape == (5, 3) and y.dtype == eddy.float64
    assert np.isfinite(np.asarray(y)).all()
    # Derivatives of the outputs with respect to the inputs, as a PINN takes them.
    jac = eddy.jacobian(lambda p: eddy.sum(model(p), axis=0), eddy.as_tensor(x[:1]))
    assert jac.shape == (3, 1, 2)


def test_pinn_model_with_fourier_features_and_bad_names():
    model = eddy.nn.pinn_model(1, 1, width=6, depth=2, fourier_features=4, fourier_scale=2.0, activation="sin")
    assert model(np.zeros((3, 1), dtype=np.float32)).shape == (3, 1)
    with pytest.raises(eddy.Error, match="architecture"):
        eddy.nn.pinn_model(1, 1, architecture="transformer")
    with pytest.raises(eddy.Error, match="pirate_net needs model.fourier_features > 0"):
        eddy.nn.pinn_model(1, 1, architecture="pirate_net")


@pytest.mark.parametrize("factorization", ["dense", "tucker"])
def test_fno_2d(factorization):
    model = eddy.nn.FNO(1, 2, modes=[3, 3], width=6, layers=2, projection_width=8, factorization=factorization,
                        dtype="float64", seed=0)
    x = RNG.standard_normal((2, 1, 8, 8))
    y = model(x)
    assert y.shape == (2, 2, 8, 8)
    # Resolution-independent: the same model runs on a finer grid.
    assert model(RNG.standard_normal((1, 1, 16, 16))).shape == (1, 2, 16, 16)
    assert all(isinstance(name, str) for name, _ in model.named_buffers())


def test_deeponet_evaluate():
    model = eddy.nn.DeepONet(sensors=10, coordinates=1, latent=5, width=8, depth=2, dtype="float64", seed=0)
    u = RNG.standard_normal((3, 10))
    points = np.linspace(0, 1, 7)[:, None]
    out = model.evaluate(u, points)
    assert out.shape == (3, 7)
    # Each input function's row is computed on its own.
    np.testing.assert_allclose(np.asarray(model.evaluate(u[1:2], points)), np.asarray(out)[1:2], rtol=1e-12)


def test_state_dict_round_trip_and_train_mode():
    a = eddy.nn.pinn_model(2, 1, width=4, depth=2, dtype="float64", seed=0)
    b = eddy.nn.pinn_model(2, 1, width=4, depth=2, dtype="float64", seed=1)
    x = RNG.standard_normal((3, 2))
    assert not np.allclose(np.asarray(a(x)), np.asarray(b(x)))
    state = a.state_dict()
    assert set(state) == set(dict(a.named_parameters())) | set(dict(a.named_buffers()))
    b.load_state_dict({name: np.asarray(value) for name, value in state.items()})
    np.testing.assert_array_equal(np.asarray(a(x)), np.asarray(b(x)))
    with pytest.raises(eddy.Error):
        b.load_state_dict({})
    a.train(False)
    a.eval()
    a.train()


# ---- optimisers ----


def quadratic_problem():
    target = np.array([1.0, -2.0, 0.5])
    p = eddy.tensor(np.zeros(3), dtype="float64", requires_grad=True)

    def loss():
        return eddy.sum((p - eddy.as_tensor(target)) ** 2)

    return p, target, loss


def test_sgd_step_is_minus_learning_rate_times_gradient():
    p, target, loss = quadratic_problem()
    sgd = eddy.optim.SGD([p], lr=0.1)
    assert isinstance(sgd, eddy.optim.Optimizer)
    sgd.zero_grad()
    loss().backward()
    sgd.step()
    np.testing.assert_allclose(np.asarray(p), 0.1 * 2 * target, rtol=1e-12)
    assert sgd.steps == 1
    assert sgd.learning_rate == pytest.approx(0.1)
    sgd.learning_rate = 0.01
    assert sgd.learning_rate == pytest.approx(0.01)


def test_sgd_momentum_converges():
    p, target, loss = quadratic_problem()
    sgd = eddy.optim.SGD([p], lr=0.05, momentum=0.9, nesterov=True)
    for _ in range(200):
        sgd.zero_grad()
        loss().backward()
        sgd.step()
    np.testing.assert_allclose(np.asarray(p), target, atol=1e-6)


def test_adam_matches_the_reference_update():
    p, target, loss = quadratic_problem()
    adam = eddy.optim.Adam([p], lr=0.01, betas=(0.9, 0.99), eps=1e-8)
    x = np.zeros(3)
    m = np.zeros(3)
    v = np.zeros(3)
    for step in range(1, 4):
        adam.zero_grad()
        loss().backward()
        adam.step()
        g = 2 * (x - target)
        m = 0.9 * m + 0.1 * g
        v = 0.99 * v + 0.01 * g * g
        x = x - 0.01 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.99**step)) + 1e-8)
    np.testing.assert_allclose(np.asarray(p), x, rtol=1e-10)
    state = adam.state_dict()
    assert any(name.endswith("step") for name in state)


def test_adam_state_round_trip():
    p, _, loss = quadratic_problem()
    adam = eddy.optim.Adam([p], lr=0.1)
    for _ in range(3):
        adam.zero_grad()
        loss().backward()
        adam.step()
    state = {name: np.asarray(value).copy() for name, value in adam.state_dict().items()}
    q = eddy.tensor(np.asarray(p), requires_grad=True)
    resumed = eddy.optim.Adam([q], lr=0.1)
    resumed.load_state_dict(state)
    assert resumed.steps == 3
    for optimiser, tensor in [(adam, p), (resumed, q)]:
        optimiser.zero_grad()
        eddy.sum((tensor - eddy.tensor([1.0, -2.0, 0.5])) ** 2).backward()
        optimiser.step()
    np.testing.assert_allclose(np.asarray(q), np.asarray(p), rtol=1e-12)


def test_adamw_decays_weights():
    p = eddy.tensor([1.0, 1.0], requires_grad=True)
    adamw = eddy.optim.AdamW([p], lr=0.1, weight_decay=0.5)
    adamw.zero_grad()
    eddy.sum(p * 0.0).backward()  # zero gradient: only the decay acts
    adamw.step()
    np.testing.assert_allclose(np.asarray(p), [1 - 0.1 * 0.5] * 2, rtol=1e-12)


def test_soap_fits_a_matrix_and_is_adamw_without_rotation():
    a = RNG.standard_normal((6, 4))
    b = RNG.standard_normal((6, 3))

    def fit(optimiser_of, steps):
        w = eddy.tensor(np.zeros((4, 3)), requires_grad=True)
        optimiser = optimiser_of(w)
        for _ in range(steps):
            optimiser.zero_grad()
            eddy.sum((eddy.tensor(a) @ w - eddy.tensor(b)) ** 2).backward()
            optimiser.step()
        return np.asarray(w), optimiser

    fitted, soap = fit(lambda w: eddy.optim.SOAP([w], lr=0.05, betas=(0.9, 0.99), precondition_frequency=5), 400)
    least_squares = np.linalg.lstsq(a, b, rcond=None)[0]
    np.testing.assert_allclose(fitted, least_squares, atol=1e-3)
    assert soap.steps == 400 and any("basis" in name for name in soap.state_dict())
    # With no side rotated (max_preconditioner_dimension=0), SOAP is AdamW step for step.
    plain, _ = fit(lambda w: eddy.optim.SOAP([w], lr=0.05, betas=(0.9, 0.99), max_preconditioner_dimension=0), 20)
    adamw, _ = fit(lambda w: eddy.optim.AdamW([w], lr=0.05, betas=(0.9, 0.99), weight_decay=0.0), 20)
    np.testing.assert_allclose(plain, adamw, rtol=1e-12)
    with pytest.raises(eddy.Error, match="precondition_frequency"):
        eddy.optim.SOAP([eddy.tensor(np.zeros((2, 2)), requires_grad=True)], precondition_frequency=0)


def test_lbfgs_solves_a_quadratic():
    p, target, loss = quadratic_problem()
    lbfgs = eddy.optim.LBFGS([p], max_iterations=50)

    def closure():
        lbfgs.zero_grad()
        value = loss()
        value.backward()
        return value

    report = lbfgs.step(closure)
    assert set(report) == {"iterations", "evaluations", "initial_loss", "loss", "gradient_max_abs",
                           "non_finite_evaluations", "converged", "stop", "message"}
    assert report["initial_loss"] == pytest.approx(np.sum(target**2))
    assert report["loss"] < 1e-12 and report["converged"]
    assert report["stop"] in ("gradient_tolerance", "change_tolerance")
    np.testing.assert_allclose(np.asarray(p), target, atol=1e-6)
    # A closure without `return` was reported as NumPy's object dtype having no eddy equivalent.
    with pytest.raises(TypeError, match="the closure returned None; it must return the loss"):
        lbfgs.step(lambda: None)


def test_training_a_model_end_to_end():
    model = eddy.nn.pinn_model(1, 1, width=16, depth=2, dtype="float64", seed=0)
    x = np.linspace(-1, 1, 32)[:, None]
    y = np.sin(np.pi * x)
    adam = eddy.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(100):
        adam.zero_grad()
        loss = eddy.mse_loss(model(x), y)
        loss.backward()
        adam.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


# ---- safetensors ----


def test_save_safetensors_loads_in_the_safetensors_package(tmp_path):
    path = tmp_path / "from_eddy.safetensors"
    tensors = {
        "w": RNG.standard_normal((2, 3)).astype(np.float32),
        "b": RNG.standard_normal(4),
        "ids": np.array([[1, -2]], dtype=np.int32),
        "step": np.array([7], dtype=np.int64),
        "mask": np.array([True, False]),
        "z": np.array([1 + 2j, -3j], dtype=np.complex128),
    }
    eddy.save_safetensors(str(path), {name: eddy.as_tensor(a) for name, a in tensors.items()},
                          metadata={"who": "test"})
    loaded = load_file(str(path))
    for name in ["w", "b", "ids", "step", "mask"]:
        assert loaded[name].dtype == tensors[name].dtype
        np.testing.assert_array_equal(loaded[name], tensors[name])
    # Complex values are stored as (real, imaginary) pairs.
    np.testing.assert_array_equal(loaded["z"], np.stack([tensors["z"].real, tensors["z"].imag], axis=-1))
    # And come back as complex in eddy.
    back, metadata = eddy.load_safetensors(str(path))
    assert metadata["who"] == "test"
    for name, value in tensors.items():
        assert str(back[name].dtype) == str(value.dtype)
        np.testing.assert_array_equal(np.asarray(back[name]), value)


def test_safetensors_package_files_load_in_eddy(tmp_path):
    path = tmp_path / "from_numpy.safetensors"
    written = {"a": RNG.standard_normal((3, 2)), "n": np.arange(4, dtype=np.int64)}
    save_file(written, str(path), metadata={"origin": "numpy"})
    tensors, metadata = eddy.load_safetensors(str(path))
    assert metadata == {"origin": "numpy"}
    for name, value in written.items():
        np.testing.assert_array_equal(np.asarray(tensors[name]), value)


def test_model_checkpoint_round_trip(tmp_path):
    model = eddy.nn.FNO(1, 1, modes=[4], width=4, layers=1, projection_width=4, dtype="float64", seed=0)
    path = tmp_path / "model.safetensors"
    eddy.save_safetensors(str(path), model.state_dict())
    fresh = eddy.nn.FNO(1, 1, modes=[4], width=4, layers=1, projection_width=4, dtype="float64", seed=9)
    tensors, _ = eddy.load_safetensors(str(path))
    fresh.load_state_dict(tensors)
    x = RNG.standard_normal((1, 1, 16))
    np.testing.assert_array_equal(np.asarray(fresh(x)), np.asarray(model(x)))


def test_loading_a_missing_or_bad_file_raises(tmp_path):
    with pytest.raises(eddy.Error, match="missing.safetensors"):
        eddy.load_safetensors(str(tmp_path / "missing.safetensors"))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    with pytest.raises(eddy.Error):
        eddy.load_safetensors(str(bad))


def test_autocast_runs_products_in_bfloat16_and_the_scaler_steps_float32_parameters():
    x = eddy.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
    w = eddy.tensor(np.full((3, 2), 0.5, dtype=np.float32)).requires_grad_()
    sgd = eddy.optim.SGD([w], lr=0.1)
    scaler = eddy.optim.GradScaler(init_scale=256.0)
    with eddy.autocast("bfloat16"):
        y = eddy.matmul(x, w)
    assert str(y.dtype) == "bfloat16"
    scaler.scale(eddy.sum(eddy.square(eddy.cast(y, "float32")))).backward()
    assert str(w.grad.dtype) == "float32"
    assert scaler.step(sgd)
    assert scaler.current_scale == 256.0 and scaler.skipped_steps == 0
    assert not np.allclose(w.numpy(), 0.5)
    with pytest.raises(eddy.Error, match="bfloat16 or float16"):
        with eddy.autocast("float64"):
            pass
    # None read as float64 and named it; enabled=False turns autocast off, as torch.autocast's.
    with pytest.raises(eddy.Error, match="got None"):
        eddy.autocast(None)
    with eddy.autocast("bfloat16"):
        with eddy.autocast("bfloat16", enabled=False):
            assert str(eddy.matmul(x, w).dtype) == "float32"
        assert str(eddy.matmul(x, w).dtype) == "bfloat16"


def test_parameter_groups_are_refused_by_name():
    # PyTorch's group dicts got pybind's "Unable to cast Python instance of type dict".
    model = eddy.nn.Linear(3, 2, dtype=eddy.float64)
    params = dict(model.named_parameters())
    with pytest.raises(eddy.Error, match=r"parameter groups \(dicts\) are not supported: make one optimizer per group"):
        eddy.optim.AdamW([{"params": [params["weight"]], "weight_decay": 0.1}], lr=1e-2)


def test_an_entry_that_is_not_a_tensor_is_refused_by_position():
    # It got pybind's "Unable to cast Python instance of type <class 'float'> to C++ type '?'".
    p = eddy.nn.Parameter(eddy.ones([2]))
    with pytest.raises(eddy.Error, match=r"Adam: params must be tensors; entry 1 is 1.0"):
        eddy.optim.Adam([p, 1.0])


def test_gpt2_names_its_own_dropout_argument():
    with pytest.raises(eddy.Error, match=r"GPT2: dropout must be in \[0, 1\), got 1"):
        eddy.nn.GPT2(vocab_size=16, context_length=8, hidden_size=8, layers=1, heads=2, dropout=1.0)


def test_lbfgs_reports_non_finite_evaluations_and_resumes_from_its_state():
    def run(optimizer, x):
        def closure():
            optimizer.zero_grad()
            loss = eddy.sum((x - 3.0) ** 4)
            loss.backward()
            return loss
        return optimizer.step(closure)

    x = eddy.tensor(np.array([0.5, -1.0]), requires_grad=True)
    first = eddy.optim.LBFGS([x], max_iterations=3)
    report = run(first, x)
    assert report["non_finite_evaluations"] == 0
    y = eddy.tensor(np.asarray(x), requires_grad=True)
    second = eddy.optim.LBFGS([y], max_iterations=3)
    second.load_state_dict(first.state_dict())
    run(first, x)
    run(second, y)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_assigning_none_to_grad_clears_it():
    w = eddy.ones([3])
    w.requires_grad_()
    eddy.sum(w * w).backward()
    assert w.grad is not None
    w.grad = None
    assert w.grad is None
    # In-place arithmetic on the gradient assigns it back to itself: it was refused after the
    # write had happened.
    eddy.sum(w * w).backward()
    w.grad *= 0.5
    np.testing.assert_array_equal(np.asarray(w.grad), [1.0, 1.0, 1.0])


def test_gradients_from_a_jitted_step_are_assigned_for_an_optimiser():
    # Assigning a gradient was refused, so gradients taken inside eddy.jit could not reach AdamW.
    rng = np.random.default_rng(0)
    x, y = eddy.tensor(rng.normal(size=(16, 3))), eddy.tensor(rng.normal(size=(16, 1)))

    def loss(w, b):
        return eddy.mean(eddy.square(x @ w + b - y))

    gradients = eddy.jit(eddy.grad(loss, argnums=(0, 1)))
    start = rng.normal(size=(3, 1))
    jitted_w, eager_w = eddy.tensor(start, requires_grad=True), eddy.tensor(start, requires_grad=True)
    jitted_b, eager_b = eddy.zeros([1], dtype=eddy.float64), eddy.zeros([1], dtype=eddy.float64)
    jitted_b.requires_grad_()
    eager_b.requires_grad_()
    jitted_opt = eddy.optim.AdamW([jitted_w, jitted_b], lr=0.05)
    eager_opt = eddy.optim.AdamW([eager_w, eager_b], lr=0.05)
    for _ in range(5):
        jitted_w.grad, jitted_b.grad = gradients(jitted_w, jitted_b)
        jitted_opt.step()
        eager_opt.zero_grad()
        loss(eager_w, eager_b).backward()
        eager_opt.step()
    np.testing.assert_allclose(np.asarray(jitted_w), np.asarray(eager_w), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jitted_b), np.asarray(eager_b), rtol=1e-12)
    assert gradients.stats.traces == 1


def test_an_assigned_gradient_must_fit_its_tensor():
    w = eddy.ones([3], dtype=eddy.float64)
    with pytest.raises(eddy.Error, match="does not require gradients"):
        w.grad = eddy.ones([3], dtype=eddy.float64)
    w.requires_grad_()
    with pytest.raises(eddy.Error, match=r"the gradient is \[2\] float64 on cpu:0 but the tensor is \[3\] float64"):
        w.grad = eddy.ones([2], dtype=eddy.float64)
    with pytest.raises(eddy.Error, match="float32"):
        w.grad = eddy.ones([3])
    with pytest.raises(eddy.Error, match="assign an eddy tensor or None, got list"):
        w.grad = [1.0, 2.0, 3.0]
    with pytest.raises(eddy.Error, match="inside eddy.jit"):
        eddy.jit(lambda v: setattr(w, "grad", v) or v)(eddy.ones([3], dtype=eddy.float64))


def test_fno_padding_counted_on_a_grid_scales_with_the_resolution():
    # padding 4 counted on 32 points pads 8 at 64, as the YAML trainer's FNO does.
    def fno(**padding):
        return eddy.nn.FNO(1, 1, modes=[4], width=4, layers=1, projection_width=4, dtype="float64", seed=3, **padding)

    coarse = eddy.tensor(np.sin(np.linspace(0, 2, 32))[None, None, :])
    fine = eddy.tensor(np.sin(np.linspace(0, 2, 64))[None, None, :])
    scaled = fno(padding=4, padding_grid=[32])
    np.testing.assert_array_equal(np.asarray(scaled(coarse)), np.asarray(fno(padding=4)(coarse)))
    np.testing.assert_array_equal(np.asarray(scaled(fine)), np.asarray(fno(padding=8)(fine)))
    assert not np.array_equal(np.asarray(scaled(fine)), np.asarray(fno(padding=4)(fine)))


def test_models_built_without_a_seed_get_fresh_weights_that_manual_seed_repeats():
    first, second = eddy.nn.Linear(16, 16), eddy.nn.Linear(16, 16)
    assert not np.array_equal(np.asarray(first.weight), np.asarray(second.weight))
    eddy.manual_seed(3)
    again = np.asarray(eddy.nn.Linear(4, 4).weight).copy()
    eddy.manual_seed(3)
    np.testing.assert_array_equal(np.asarray(eddy.nn.Linear(4, 4).weight), again)
    np.testing.assert_array_equal(np.asarray(eddy.nn.Linear(4, 4, seed=1).weight),
                                  np.asarray(eddy.nn.Linear(4, 4, seed=1).weight))


def test_grad_scaler_moves_float16_parameters():
    p = eddy.cast(eddy.tensor(np.array([0.1, 0.2, -0.3], np.float32)), eddy.float16)
    p.requires_grad_()
    optimizer, scaler = eddy.optim.SGD([p], 0.5), eddy.optim.GradScaler()
    scaler.scale(eddy.sum(eddy.cast(p, eddy.float32) ** 2)).backward()
    assert scaler.step(optimizer)
    np.testing.assert_array_equal(np.asarray(eddy.cast(p, eddy.float32)), [0, 0, 0])


def test_mse_loss_runs_in_float32_under_autocast_so_the_first_scaled_step_is_taken():
    # A float16 loss got GradScaler's 65536 as an infinite float16 cotangent: every iteration at
    # that scale was skipped, and casting the loss to float32 afterwards did not help.
    x = eddy.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
    w = eddy.tensor(np.full((3, 2), 0.5, dtype=np.float32)).requires_grad_()
    target = eddy.zeros([4, 2], "float16")
    sgd, scaler = eddy.optim.SGD([w], lr=0.1), eddy.optim.GradScaler()
    with eddy.autocast("float16"):
        loss = eddy.mse_loss(eddy.matmul(x, w), target)
    assert loss.dtype == eddy.float32
    scaler.scale(loss).backward()
    assert scaler.step(sgd) and scaler.skipped_steps == 0 and scaler.current_scale == 65536.0
    # A float64 operand keeps float64, as without autocast.
    with eddy.autocast("bfloat16"):
        wide = eddy.mse_loss(eddy.tensor(np.array([1e-12, 0.0])), eddy.zeros([2], "bfloat16"))
    assert wide.dtype == eddy.float64 and float(wide) == 5e-25


def test_grad_scaler_scale_inside_jit_is_refused():
    # Traced, the scale was a constant while step() divided by the current one: each growth halved
    # the steps, silently.
    w = eddy.tensor([0.0]).requires_grad_()
    scaler = eddy.optim.GradScaler(growth_interval=1)
    with pytest.raises(eddy.Error, match="GradScaler::scale inside a compiled function"):
        eddy.jit(lambda w: scaler.scale(eddy.sum(w)))(w)


def test_grad_scaler_state_resumes_its_scaling():
    # Without it a resumed run lost the count of good steps in a row and grew its scale late.
    w = eddy.tensor(np.array([1.0, 2.0], np.float32)).requires_grad_()
    sgd, scaler = eddy.optim.SGD([w], lr=0.01), eddy.optim.GradScaler(init_scale=16.0, growth_interval=3)

    def iterate(scaler):
        sgd.zero_grad()
        scaler.scale(eddy.sum(w * w)).backward()
        scaler.step(sgd)
        return scaler.current_scale

    for _ in range(4):
        iterate(scaler)
    resumed = eddy.optim.GradScaler(init_scale=16.0, growth_interval=3)
    resumed.load_state_dict(scaler.state_dict())
    assert [iterate(resumed) for _ in range(3)] == [iterate(scaler) for _ in range(3)] == [32.0, 64.0, 64.0]


def test_one_tensor_is_one_parameter_to_clip_and_refused_as_an_optimizers_params():
    # Iterated, a tensor gave its rows: clip_grad_norm returned 0 and clipped nothing, and an
    # optimizer made under no_grad trained nothing.
    w = eddy.tensor(np.array([[3.0, 4.0], [0.0, 0.0]])).requires_grad_()
    eddy.sum(w * eddy.tensor(np.array([[3.0, 4.0], [6.0, 8.0]]))).backward()
    assert eddy.nn.clip_grad_norm(w, 1.0) == pytest.approx(np.sqrt(125.0))
    np.testing.assert_allclose(w.grad.numpy(), np.array([[3.0, 4.0], [6.0, 8.0]]) / (np.sqrt(125.0) + 1e-6))
    with eddy.no_grad(), pytest.raises(TypeError, match="Adam: params must be an iterable of tensors, got one"):
        eddy.optim.Adam(w, lr=0.1)
    # A 0-d parameter (a scalar coefficient), which is not iterable, too.
    c = eddy.tensor(2.0).requires_grad_()
    (c * 5.0).backward()
    assert eddy.nn.clip_grad_norm(c, 1.0) == 5.0
    assert float(c.grad) == pytest.approx(5.0 / (5.0 + 1e-6))


def test_bfloat16_tolist_gives_python_floats():
    # NumPy has no bfloat16, and tolist() refused, naming Tensor.numpy().
    x = eddy.cast(eddy.tensor([1.5, 2.25, -3.0]), "bfloat16")
    assert x.tolist() == [1.5, 2.25, -3.0]


def test_frozen_parameters_are_taken_and_left_alone():
    # PyTorch's fine-tuning pattern: freeze part of a model, pass all its parameters (refused before).
    model = eddy.nn.Linear(3, 2, dtype="float64", seed=0)
    weight, bias = dict(model.named_parameters())["weight"], dict(model.named_parameters())["bias"]
    weight.requires_grad_(False)
    frozen = np.asarray(weight).copy()
    optimizer = eddy.optim.AdamW(model.parameters(), lr=0.1)
    eddy.sum(model(eddy.tensor(np.ones((4, 3))))).backward()
    optimizer.step()
    np.testing.assert_array_equal(np.asarray(weight), frozen)
    assert np.all(np.asarray(bias) < 0)
    with pytest.raises(eddy.Error, match="parameter 0 is computed from other tensors"):
        eddy.optim.SGD([bias * 2], lr=0.1)
    # L-BFGS gives every parameter a gradient at the end of a step: a frozen one's crashed.
    w = eddy.tensor([1.0, 2.0], requires_grad=True)
    target = eddy.tensor([3.0])
    lbfgs = eddy.optim.LBFGS([w, target], max_iterations=5)

    def closure():
        lbfgs.zero_grad()
        loss = eddy.sum(eddy.square(w - target))
        loss.backward()
        return loss

    lbfgs.step(closure)
    np.testing.assert_allclose(np.asarray(w), [3.0, 3.0], rtol=1e-6)
    assert float(target) == 3.0 and target.grad is None


def test_sequential_is_indexed_iterated_and_appended_to_as_in_pytorch():
    first, second = eddy.nn.Linear(2, 3, seed=0), eddy.nn.Activation("tanh")
    model = eddy.nn.Sequential(first, second)
    assert model[0] is first and model[-1] is second and list(model) == [first, second]
    model.append(eddy.nn.Linear(3, 1, seed=1))
    assert len(model) == 3 and [name for name, _ in model.named_parameters()][-1] == "2.bias"
    assert model(eddy.ones([4, 2])).shape == (4, 1)
    with pytest.raises(IndexError, match="index 3 is out of range for 3 layers"):
        model[3]
    # Indexable, a Sequential passed alone was taken for a list of its layers instead of nested.
    nested = eddy.nn.Sequential(model)
    assert len(nested) == 1 and nested[0] is model
    assert [name for name, _ in nested.named_parameters()][0] == "0.0.weight"
    # Appended to itself, it recursed until the stack ran out.
    with pytest.raises(eddy.Error, match="would make it contain itself"):
        nested.append(nested)
    with pytest.raises(eddy.Error, match="would make it contain itself"):
        model.append(nested)
