"""Reference trajectories of torch.optim.Adam, AdamW and SGD for tests/optim/test_optim.cpp.

Run:  python3 scripts/reference/adam_reference.py
(recorded with torch 2.15.0, CPU, float64). Prints each problem's parameters after every step
as C++ initialiser lists, ready to paste into the test.
"""
import torch

torch.set_default_dtype(torch.float64)

STEPS = 5


def quadratic(x):
    """0.5 * sum(a * (x - c)^2): separable, badly scaled."""
    a = torch.tensor([1.0, 10.0, 0.1])
    c = torch.tensor([0.3, 0.2, -0.4])
    return 0.5 * (a * (x - c) ** 2).sum()


def banana(x):
    """(1 - x0)^2 + 5 (x1 - x0^2)^2: two coupled parameters."""
    return (1 - x[0]) ** 2 + 5 * (x[1] - x[0] ** 2) ** 2


PROBLEMS = {
    "quadratic": (quadratic, [1.0, -2.0, 0.5]),
    "banana": (banana, [-1.2, 1.0]),
}

OPTIMISERS = {
    "adam": lambda p: torch.optim.Adam(p, lr=0.1, betas=(0.9, 0.999), eps=1e-8,
                                       weight_decay=0.05, amsgrad=False),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.1, betas=(0.8, 0.99), eps=1e-6,
                                         weight_decay=0.1, amsgrad=False),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.9, dampening=0,
                                              weight_decay=0.01, nesterov=True),
}


def trajectory(make_optimiser, f, x0):
    x = torch.tensor(x0, requires_grad=True)
    opt = make_optimiser([x])
    rows = []
    for _ in range(STEPS):
        opt.zero_grad()
        f(x).backward()
        opt.step()
        rows.append([v.item() for v in x.detach()])
    return rows


def main():
    print(f"// torch {torch.__version__}")
    for opt_name, make in OPTIMISERS.items():
        for prob_name, (f, x0) in PROBLEMS.items():
            rows = trajectory(make, f, x0)
            print(f"// {opt_name} on {prob_name}, from {x0}")
            print("{")
            for row in rows:
                print("    {" + ", ".join(repr(v) for v in row) + "},")
            print("}")


if __name__ == "__main__":
    main()
