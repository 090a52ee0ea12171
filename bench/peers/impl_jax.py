"""JAX with jit: per-point derivatives by vmap of grad / hessian, the whole step (loss, weight
gradient and Adam, written out as torch.optim.Adam computes it) in one jitted function."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

def mlp(params, z):
    for l in range(0, len(params), 2):
        z = z @ params[l] + params[l + 1]
        if l + 2 < len(params):
            z = jnp.tanh(z)
    return z


def burgers_loss(params, data):
    def u_pt(x, t):
        return mlp(params, jnp.stack([x, t]))[0]

    x, t = data["x"][:, 0], data["t"][:, 0]
    u = jax.vmap(u_pt)(x, t)
    u_x = jax.vmap(jax.grad(u_pt, 0))(x, t)
    u_t = jax.vmap(jax.grad(u_pt, 1))(x, t)
    u_xx = jax.vmap(jax.grad(jax.grad(u_pt, 0), 0))(x, t)
    r = u_t + u * u_x - common.BURGERS_NU * u_xx
    ub = mlp(params, jnp.concatenate([data["bx"], data["bt"]], 1))
    return jnp.mean(r * r) + jnp.mean((ub - data["bu"]) ** 2)


def laplacian(params, data):
    pts = jnp.concatenate([data["x"], data["y"], data["z"]], 1)
    u = mlp(params, pts)[:, 0]
    lap = jax.vmap(lambda p: jnp.trace(jax.hessian(lambda q: mlp(params, q)[0])(p)))(pts)
    return jnp.mean(lap * lap) + jnp.mean(u * u), lap


def kovasznay_loss(params, data):
    nu = 1.0 / common.KOVASZNAY_RE

    def f_pt(p):
        return mlp(params, p)

    pts = jnp.concatenate([data["x"], data["y"]], 1)
    out = mlp(params, pts)
    jac = jax.vmap(jax.jacrev(f_pt))(pts)
    hes = jax.vmap(jax.hessian(f_pt))(pts)
    u, v = out[:, 0], out[:, 1]
    u_x, u_y, v_x, v_y, p_x, p_y = jac[:, 0, 0], jac[:, 0, 1], jac[:, 1, 0], jac[:, 1, 1], jac[:, 2, 0], jac[:, 2, 1]
    r1 = u * u_x + v * u_y + p_x - nu * (hes[:, 0, 0, 0] + hes[:, 0, 1, 1])
    r2 = u * v_x + v * v_y + p_y - nu * (hes[:, 1, 0, 0] + hes[:, 1, 1, 1])
    r3 = u_x + v_y
    ob = mlp(params, jnp.concatenate([data["bx"], data["by"]], 1))
    return (jnp.mean(r1 ** 2) + jnp.mean(r2 ** 2) + jnp.mean(r3 ** 2)
            + jnp.mean((ob[:, 0:1] - data["bu"]) ** 2) + jnp.mean((ob[:, 1:2] - data["bv"]) ** 2))


def pointwise(params, name, h):
    w, b = params[f"{name}.weight"], params[f"{name}.bias"]
    s = h.shape
    return (w @ h.reshape(s[0], s[1], -1) + b).reshape(s[0], w.shape[0], *s[2:])


def spectral(weight, h, m):
    w = weight[..., 0] + 1j * weight[..., 1]
    n1, n2 = h.shape[-2], h.shape[-1]
    spec = jnp.fft.rfft2(h)
    block = jnp.concatenate([spec[:, :, :m, :m], spec[:, :, -m:, :m]], 2)
    mixed = jnp.einsum("bixy,ioxy->boxy", block, w)
    out = jnp.zeros((h.shape[0], w.shape[1], n1, n2 // 2 + 1), spec.dtype)
    out = out.at[:, :, :m, :m].set(mixed[:, :, :m]).at[:, :, -m:, :m].set(mixed[:, :, m:])
    return jnp.fft.irfft2(out, s=(n1, n2))


def fno_loss(params, data):
    c = common.FNO
    a = data["a"]
    b, n = a.shape[0], a.shape[-1]
    coords = jnp.arange(n, dtype=a.dtype) / n
    gx = jnp.broadcast_to(coords.reshape(1, 1, n, 1), (b, 1, n, n))
    gy = jnp.broadcast_to(coords.reshape(1, 1, 1, n), (b, 1, n, n))
    h = pointwise(params, "lift", jnp.concatenate([a, gx, gy], 1))
    for l in range(c["layers"]):
        h = spectral(params[f"spectral{l}.weight"], h, c["modes"]) + pointwise(params, f"skip{l}", h)
        if l + 1 < c["layers"]:
            h = jax.nn.gelu(h, approximate=True)
    y = pointwise(params, "project_out", jax.nn.gelu(pointwise(params, "project_hidden", h), approximate=True))
    return jnp.mean((y - data["y"]) ** 2)


def adam_step(loss_fn):
    a = common.ADAM

    @jax.jit
    def step(params, m, v, t, data):
        loss, g = jax.value_and_grad(loss_fn)(params, data)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: a["beta1"] * m + (1 - a["beta1"]) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: a["beta2"] * v + (1 - a["beta2"]) * g * g, v, g)
        c1, c2 = 1 - a["beta1"] ** t, 1 - a["beta2"] ** t
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - a["lr"] * (m / c1) / (jnp.sqrt(v / c2) + a["eps"]), params, m, v)
        return params, m, v, t, loss

    return step


def main():
    args = common.arguments()
    inputs = common.load_inputs(args.data)
    # JAX computes in float32 unless told otherwise, whatever the arrays it is given.
    jax.config.update("jax_enable_x64", common.dtype_of(inputs) == "float64")
    wl = args.workload
    prefix = {"burgers": "burgers", "kovasznay": "kovasznay", "fno": "fno"}.get(wl, "laplacian")
    data = {k[len(prefix) + 1:]: jnp.asarray(v) for k, v in inputs.items() if k.startswith(prefix + ".")}
    if prefix == "fno":
        params = {k: v for k, v in data.items() if k not in ("a", "y")}
        pdata = {k: data[k] for k in ("a", "y")}
    else:
        keys = sorted((k for k in data if k[0] in "wb" and k[1:].isdigit()), key=lambda k: (int(k[1:]), k[0] == "b"))
        params = [data[k] for k in keys]
        pdata = {k: v for k, v in data.items() if k not in keys}

    if wl in ("burgers", "kovasznay", "fno"):
        step_fn = adam_step({"burgers": burgers_loss, "kovasznay": kovasznay_loss, "fno": fno_loss}[wl])
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        state = [params, zeros, zeros, jnp.asarray(0, jnp.int32)]

        def step():
            p, m, v, t, loss = step_fn(*state, pdata)
            state[:] = [p, m, v, t]
            return loss.block_until_ready()
        checks = [float(step()), float(step())]
    elif wl == "laplacian-fwd":
        fwd = jax.jit(laplacian)

        def step():
            loss, lap = fwd(params, pdata)
            return loss.block_until_ready(), lap.block_until_ready()
        loss, lap = step()
        checks = [float(loss), float(jnp.mean(lap))]
    else:
        vg = jax.jit(jax.value_and_grad(lambda p, d: laplacian(p, d)[0]))

        def step():
            loss, g = vg(params, pdata)
            return loss.block_until_ready(), jax.block_until_ready(g)
        loss, g = step()
        checks = [float(loss), float(sum(float(jnp.sum(x.astype(jnp.float32) ** 2)) for x in g))]

    common.verify("JAX jit", args, checks)
    median, steps = common.time_steps(step, args.min_time)
    common.report("JAX jit", args, checks, median, steps)


if __name__ == "__main__":
    main()
