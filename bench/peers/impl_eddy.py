"""eddy's Python API, written as the PyTorch eager version is: eddy.gradients (nested reverse
mode with create_graph) for the PDE derivatives, eddy.optim.Adam, and eddy.nn.FNO for FNO-2D.
Weights and points come from eddy's own safetensors reader."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import eddy  # noqa: E402


def mlp(params, z):
    for l in range(0, len(params), 2):
        z = z @ params[l] + params[l + 1]
        if l + 2 < len(params):
            z = eddy.tanh(z)
    return z


def d(y, xs, create_graph=True):
    ones = eddy.ones_like(y)
    return eddy.gradients(y, xs, ones, create_graph)


def burgers(params, data):
    x, t = data["x"], data["t"]
    u = mlp(params, eddy.concatenate([x, t], 1))
    u_x, u_t = d(u, [x, t])
    u_xx = d(u_x, x)
    r = u_t + u * u_x - common.BURGERS_NU * u_xx
    ub = mlp(params, eddy.concatenate([data["bx"], data["bt"]], 1))
    return eddy.mean(r * r) + eddy.mean(eddy.square(ub - data["bu"]))


def laplacian(params, data, create_graph):
    xs = [data["x"], data["y"], data["z"]]
    u = mlp(params, eddy.concatenate(xs, 1))
    first = d(u, xs)
    lap = d(first[0], xs[0], create_graph) + d(first[1], xs[1], create_graph) + d(first[2], xs[2], create_graph)
    return eddy.mean(lap * lap) + eddy.mean(u * u), lap


def kovasznay(params, data):
    nu = 1.0 / common.KOVASZNAY_RE
    x, y = data["x"], data["y"]
    out = mlp(params, eddy.concatenate([x, y], 1))
    u, v, p = out[:, 0:1], out[:, 1:2], out[:, 2:3]
    u_x, u_y = d(u, [x, y])
    v_x, v_y = d(v, [x, y])
    p_x, p_y = d(p, [x, y])
    u_xx, u_yy, v_xx, v_yy = d(u_x, x), d(u_y, y), d(v_x, x), d(v_y, y)
    r1 = u * u_x + v * u_y + p_x - nu * (u_xx + u_yy)
    r2 = u * v_x + v * v_y + p_y - nu * (v_xx + v_yy)
    r3 = u_x + v_y
    ob = mlp(params, eddy.concatenate([data["bx"], data["by"]], 1))
    return (eddy.mean(r1 * r1) + eddy.mean(r2 * r2) + eddy.mean(r3 * r3)
            + eddy.mean(eddy.square(ob[:, 0:1] - data["bu"])) + eddy.mean(eddy.square(ob[:, 1:2] - data["bv"])))


def main():
    args = common.arguments()
    eddy.set_num_threads(args.threads)
    inputs, _ = eddy.load_safetensors(args.data)
    wl = args.workload
    prefix = {"burgers": "burgers", "kovasznay": "kovasznay", "fno": "fno"}.get(wl, "laplacian")
    data = {k[len(prefix) + 1:]: v for k, v in inputs.items() if k.startswith(prefix + ".")}
    a = common.ADAM

    if prefix == "fno":
        c = common.FNO
        model = eddy.nn.FNO(1, 1, [c["modes"], c["modes"]], width=c["width"], layers=c["layers"],
                            projection_width=c["projection"], activation="gelu",
                            dtype=common.dtype_of(inputs))
        model.load_state_dict({k: v for k, v in data.items() if k not in ("a", "y")})
        plist = model.parameters()

        def loss_fn():
            return eddy.mean(eddy.square(model(data["a"]) - data["y"]))
    else:
        keys = sorted((k for k in data if k[0] in "wb" and k[1:].isdigit()), key=lambda k: (int(k[1:]), k[0] == "b"))
        plist = [data[k].requires_grad_(wl != "laplacian-fwd") for k in keys]
        for k in {"burgers": "xt", "laplacian": "xyz", "kovasznay": "xy"}[prefix]:
            data[k].requires_grad_(True)
        loss_fn = {"burgers": lambda: burgers(plist, data), "kovasznay": lambda: kovasznay(plist, data)}.get(wl)

    if wl in ("burgers", "kovasznay", "fno"):
        opt = eddy.optim.Adam(plist, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"])

        def step():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            opt.step()
            return loss.item()
        checks = [step(), step()]
    elif wl == "laplacian-fwd":
        def step():
            loss, lap = laplacian(plist, data, False)
            return loss.item(), lap
        loss, lap = step()
        checks = [loss, eddy.mean(lap).item()]
    else:
        def step():
            loss, _ = laplacian(plist, data, True)
            return loss.item(), eddy.gradients(loss, plist)
        loss, grads = step()
        checks = [loss, sum(eddy.sum(eddy.square(g)).item() for g in grads)]

    common.verify("eddy Python", args, checks)
    median, steps = common.time_steps(step, args.min_time)
    common.report("eddy Python", args, checks, median, steps)


if __name__ == "__main__":
    main()
