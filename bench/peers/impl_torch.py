"""PyTorch, eager or compiled.

eager:   torch.autograd.grad(..., create_graph=True) for the PDE derivatives (nested reverse
         mode, as PINN code in PyTorch is usually written), torch.optim.Adam.
compile: torch.compile cannot compile a double backward through torch.autograd.grad, so the PINN
         workloads are written with torch.func (vmap of grad / hessian per point, grad_and_value
         for the weight gradient) and that whole function is compiled; FNO compiles the forward
         (AOTAutograd compiles its backward). Adam is torch.optim.Adam, eager, in both modes.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.func import grad, grad_and_value, hessian, vmap  # noqa: E402


def mlp(params, z):
    for l in range(0, len(params), 2):
        z = z @ params[l] + params[l + 1]
        if l + 2 < len(params):
            z = torch.tanh(z)
    return z


def d(y, x, create_graph=True):
    return torch.autograd.grad(y.sum(), x, create_graph=create_graph, retain_graph=True)


# --- eager losses (nested reverse mode) ---

def burgers_eager(params, data):
    x = data["x"].requires_grad_()
    t = data["t"].requires_grad_()
    u = mlp(params, torch.cat([x, t], 1))
    u_x, u_t = d(u, (x, t))
    (u_xx,) = d(u_x, x)
    r = u_t + u * u_x - common.BURGERS_NU * u_xx
    ub = mlp(params, torch.cat([data["bx"], data["bt"]], 1))
    return (r * r).mean() + ((ub - data["bu"]) ** 2).mean()


def laplacian_eager(params, data, create_graph):
    xs = [data[k].requires_grad_() for k in ("x", "y", "z")]
    u = mlp(params, torch.cat(xs, 1))
    first = d(u, xs)
    lap = sum(d(g, x, create_graph)[0] for g, x in zip(first, xs))
    return (lap * lap).mean() + (u * u).mean(), lap


def kovasznay_eager(params, data):
    nu = 1.0 / common.KOVASZNAY_RE
    x = data["x"].requires_grad_()
    y = data["y"].requires_grad_()
    out = mlp(params, torch.cat([x, y], 1))
    u, v, p = out[:, 0:1], out[:, 1:2], out[:, 2:3]
    u_x, u_y = d(u, (x, y))
    v_x, v_y = d(v, (x, y))
    p_x, p_y = d(p, (x, y))
    (u_xx,) = d(u_x, x)
    (u_yy,) = d(u_y, y)
    (v_xx,) = d(v_x, x)
    (v_yy,) = d(v_y, y)
    r1 = u * u_x + v * u_y + p_x - nu * (u_xx + u_yy)
    r2 = u * v_x + v * v_y + p_y - nu * (v_xx + v_yy)
    r3 = u_x + v_y
    ob = mlp(params, torch.cat([data["bx"], data["by"]], 1))
    return ((r1 ** 2).mean() + (r2 ** 2).mean() + (r3 ** 2).mean()
            + ((ob[:, 0:1] - data["bu"]) ** 2).mean() + ((ob[:, 1:2] - data["bv"]) ** 2).mean())


# --- torch.func losses (per point, vmapped) ---

def burgers_func(params, data):
    def u_pt(x, t):
        return mlp(params, torch.stack([x, t]))[0]

    x, t = data["x"][:, 0], data["t"][:, 0]
    u = vmap(u_pt)(x, t)
    u_x = vmap(grad(u_pt, 0))(x, t)
    u_t = vmap(grad(u_pt, 1))(x, t)
    u_xx = vmap(grad(grad(u_pt, 0), 0))(x, t)
    r = u_t + u * u_x - common.BURGERS_NU * u_xx
    ub = mlp(params, torch.cat([data["bx"], data["bt"]], 1))
    return (r * r).mean() + ((ub - data["bu"]) ** 2).mean()


def laplacian_func(params, data):
    def u_pt(p):
        return mlp(params, p)[0]

    pts = torch.cat([data["x"], data["y"], data["z"]], 1)
    u = mlp(params, pts)[:, 0]
    lap = vmap(lambda p: torch.diagonal(hessian(u_pt)(p)).sum())(pts)
    return (lap * lap).mean() + (u * u).mean(), lap


def kovasznay_func(params, data):
    nu = 1.0 / common.KOVASZNAY_RE

    def f_pt(p):
        return mlp(params, p)

    pts = torch.cat([data["x"], data["y"]], 1)
    out = mlp(params, pts)
    jac = vmap(torch.func.jacrev(f_pt))(pts)  # [N, 3, 2]
    hes = vmap(hessian(f_pt))(pts)  # [N, 3, 2, 2]
    u, v = out[:, 0], out[:, 1]
    u_x, u_y, v_x, v_y, p_x, p_y = jac[:, 0, 0], jac[:, 0, 1], jac[:, 1, 0], jac[:, 1, 1], jac[:, 2, 0], jac[:, 2, 1]
    lap_u = hes[:, 0, 0, 0] + hes[:, 0, 1, 1]
    lap_v = hes[:, 1, 0, 0] + hes[:, 1, 1, 1]
    r1 = u * u_x + v * u_y + p_x - nu * lap_u
    r2 = u * v_x + v * v_y + p_y - nu * lap_v
    r3 = u_x + v_y
    ob = mlp(params, torch.cat([data["bx"], data["by"]], 1))
    return ((r1 ** 2).mean() + (r2 ** 2).mean() + (r3 ** 2).mean()
            + ((ob[:, 0:1] - data["bu"]) ** 2).mean() + ((ob[:, 1:2] - data["bv"]) ** 2).mean())


# --- FNO ---

def pointwise(params, name, h):
    w, b = params[f"{name}.weight"], params[f"{name}.bias"]
    shape = h.shape
    return (w @ h.reshape(shape[0], shape[1], -1) + b).reshape(shape[0], w.shape[0], *shape[2:])


def spectral(weight, h, m):
    w = torch.view_as_complex(weight)
    n1, n2 = h.shape[-2], h.shape[-1]
    spec = torch.fft.rfft2(h)
    block = torch.cat([spec[:, :, :m, :m], spec[:, :, -m:, :m]], 2)
    mixed = torch.einsum("bixy,ioxy->boxy", block, w)
    out = torch.zeros(h.shape[0], w.shape[1], n1, n2 // 2 + 1, dtype=spec.dtype)
    out[:, :, :m, :m] = mixed[:, :, :m]
    out[:, :, -m:, :m] = mixed[:, :, m:]
    return torch.fft.irfft2(out, s=(n1, n2))


def fno(params, a):
    c = common.FNO
    b, n = a.shape[0], a.shape[-1]
    coords = torch.arange(n, dtype=a.dtype) / n
    gx = coords.reshape(1, 1, n, 1).expand(b, 1, n, n)
    gy = coords.reshape(1, 1, 1, n).expand(b, 1, n, n)
    h = pointwise(params, "lift", torch.cat([a, gx, gy], 1))
    for l in range(c["layers"]):
        h = spectral(params[f"spectral{l}.weight"], h, c["modes"]) + pointwise(params, f"skip{l}", h)
        if l + 1 < c["layers"]:
            h = F.gelu(h, approximate="tanh")
    return pointwise(params, "project_out", F.gelu(pointwise(params, "project_hidden", h), approximate="tanh"))


def main():
    args = common.arguments(lambda p: p.add_argument("--mode", choices=("eager", "compile"), default="eager"),
                            devices=("cpu", "cuda"))
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    # float32 products in float32, as eddy's cuBLAS calls make them (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    inputs = {k: torch.from_numpy(v).to(device) for k, v in common.load_inputs(args.data).items()}
    wl = args.workload
    prefix = {"burgers": "burgers", "kovasznay": "kovasznay", "fno": "fno"}.get(wl, "laplacian")
    data = {k[len(prefix) + 1:]: v for k, v in inputs.items() if k.startswith(prefix + ".")}
    compiled = args.mode == "compile"
    impl = "torch.compile" if compiled else "torch eager"
    note = ""

    if prefix == "fno":
        names = [k for k in data if k not in ("a", "y")]
        params = {k: data[k].clone().requires_grad_() for k in names}
        forward = torch.compile(fno) if compiled else fno

        def loss_fn():
            return ((forward(params, data["a"]) - data["y"]) ** 2).mean()
        plist = list(params.values())
    else:
        plist = [data[k].clone().requires_grad_(wl != "laplacian-fwd")
                 for k in sorted((k for k in data if k[0] in "wb" and k[1:].isdigit()),
                                 key=lambda k: (int(k[1:]), k[0] == "b"))]
        pdata = {k: v for k, v in data.items() if not (k[0] in "wb" and k[1:].isdigit())}
        if compiled:
            note = "torch.func (vmap of grad/hessian) under torch.compile"
            eager_loss = {"burgers": burgers_func, "kovasznay": kovasznay_func}.get(wl)
        else:
            eager_loss = {"burgers": burgers_eager, "kovasznay": kovasznay_eager}.get(wl)

    if prefix == "fno" or wl in ("burgers", "kovasznay"):
        opt = torch.optim.Adam(plist, lr=common.ADAM["lr"], betas=(common.ADAM["beta1"], common.ADAM["beta2"]),
                               eps=common.ADAM["eps"])
        if prefix == "fno":
            def step():
                opt.zero_grad(set_to_none=True)
                loss = loss_fn()
                loss.backward()
                opt.step()
                return loss.detach()
        elif compiled:
            gv = torch.compile(grad_and_value(lambda ps: eager_loss(ps, pdata)))

            def step():
                grads, loss = gv(tuple(p.detach() for p in plist))
                for p, g in zip(plist, grads):
                    p.grad = g
                opt.step()
                return loss.detach()
        else:
            def step():
                opt.zero_grad(set_to_none=True)
                loss = eager_loss(plist, {k: v.detach() for k, v in pdata.items()})
                loss.backward()
                opt.step()
                return loss.detach()
        checks = [float(step()), float(step())]
    elif wl == "laplacian-fwd":
        if compiled:
            fwd = torch.compile(lambda: laplacian_func(plist, pdata))
        else:
            def fwd():
                return laplacian_eager(plist, {k: v.detach() for k, v in pdata.items()}, False)

        def step():
            loss, lap = fwd()
            return loss.detach(), lap.detach()
        loss, lap = step()
        checks = [float(loss), float(lap.mean())]
    else:  # laplacian-grad
        if compiled:
            gv = torch.compile(grad_and_value(lambda ps: laplacian_func(ps, pdata), has_aux=True))

            def step():
                grads, (loss, _) = gv(tuple(p.detach() for p in plist))
                return loss, grads
        else:
            def step():
                loss, _ = laplacian_eager(plist, {k: v.detach() for k, v in pdata.items()}, True)
                grads = torch.autograd.grad(loss, plist)
                return loss.detach(), grads
        loss, grads = step()
        checks = [float(loss), float(sum((g.double() ** 2).sum() for g in grads))]

    common.verify(impl, args, checks)
    timed = step
    if device.type == "cuda":
        def timed():  # a step's time includes the GPU's work, not only its launch
            step()
            torch.cuda.synchronize()
    median, steps = common.time_steps(timed, args.min_time)
    common.report(impl, args, checks, median, steps, note)


if __name__ == "__main__":
    main()
