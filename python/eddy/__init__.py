"""eddy: differentiable physics and scientific machine learning.

The tensor and autodiff engine, FFTs, models, optimisers and solvers of eddy's C++ core, from
Python. Tensors share memory with NumPy (``numpy.asarray(t)``, ``eddy.as_tensor(array)``) and
DLPack; every op differentiates to any order in forward and reverse mode::

    import eddy
    f = lambda x: eddy.sum(eddy.sin(x) * x)
    x = eddy.tensor([0.5, 1.0], dtype="float64")
    eddy.grad(f)(x)                                       # sin(x) + x cos(x)
    eddy.grad(lambda x: eddy.grad(f)(x).sum())(x)         # composes to any order
    eddy.hessian(f, x)                                    # and eddy.jvp, eddy.vjp, ...
"""

import functools as _functools
import os as _os

# OpenMP threads that spin briefly, then sleep, while they wait, as the `eddy` command's do
# (src/cli/thread_waits.h): libgomp's long default spin takes a busy core's time slices from the
# thread the others wait for, and sleeping at once makes every parallel region wait for a wake-up
# (docs/benchmarks.md, "A busy machine"). libgomp reads this as it is loaded, with _eddy below; a
# policy the user set is kept.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "1000"

from . import _eddy
from ._eddy import *  # noqa: F401,F403  (the op API, Tensor, dtypes, solve/train/generate)
from ._eddy import Error, Tensor, dist, fft, lm, nn, optim, vjp
from ._containers import ModuleDict, ModuleList

nn.ModuleList, nn.ModuleDict = ModuleList, ModuleDict
del ModuleDict, ModuleList


def _scope_each_call(make_scope, function):
    """``function`` run in a scope of its own at each call: a scope shared by calls in two threads
    mixed their grad modes up."""

    @_functools.wraps(function)
    def scoped(*args, **kwargs):
        with make_scope():
            return function(*args, **kwargs)

    return scoped


def no_grad(function=None):
    """``with eddy.no_grad():``, ``@eddy.no_grad()`` or ``@eddy.no_grad``: ops record nothing for reverse mode."""
    return _eddy.no_grad() if function is None else _scope_each_call(_eddy.no_grad, function)


def enable_grad(function=None):
    """``with eddy.enable_grad():`` (or as a decorator): ops record for reverse mode, inside ``no_grad`` too."""
    return _eddy.enable_grad() if function is None else _scope_each_call(_eddy.enable_grad, function)


# @eddy.no_grad() and @eddy.enable_grad(), as PyTorch's decorators.
_eddy._GradModeContext.__call__ = lambda scope, function: _scope_each_call(
    _eddy.enable_grad if scope.enabled else _eddy.no_grad, function)

float32 = _eddy.dtype.float32
float64 = _eddy.dtype.float64
complex64 = _eddy.dtype.complex64
complex128 = _eddy.dtype.complex128
int32 = _eddy.dtype.int32
int64 = _eddy.dtype.int64
bool_ = _eddy.dtype.bool
bfloat16 = _eddy.dtype.bfloat16
float16 = _eddy.dtype.float16

__version__ = "0.1.0"


def _end_the_job_on_an_uncaught_exception():
    """Under mpirun, a rank that dies of an exception waits at exit (MPI_Finalize) for ranks that
    wait in a collective for it: the job hangs. End every process instead, as `eddy` does. The same
    for sys.exit, exit and quit with an error status (argparse's, say) that ends the rank, which
    Python's excepthook never sees: the job ends with that status once this rank's exit has
    unwound. A bare `raise SystemExit(n)` cannot be seen (docs/distributed.md)."""
    import atexit
    import builtins
    import sys

    if dist._launcher_size() <= 1:
        return
    previous = sys.excepthook

    def end_the_job(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stdout.flush()
        sys.stderr.flush()
        dist._abort_job(f"an uncaught {kind.__name__} (above) ended this rank, so the job ends")

    sys.excepthook = end_the_job
    ended_the_rank = []

    class ErrorExit(SystemExit):
        """The SystemExit of an error status. Python frees it once it is handled: by the program (a
        try/except, a thread's end), with the program's frames on the stack, or, when it ends the
        main thread, by the interpreter's exit, with none. Only the latter ends the job; one the
        program caught goes no further."""

        def __init__(self, call, status):
            super().__init__(status)
            self.call = call

        def __del__(self):
            try:
                sys._getframe(1)
            except ValueError:
                ended_the_rank.append(self)

    def noting_an_error(name, exit_function):
        def exit_noting_an_error(status=None):
            if status in (None, 0):
                return exit_function(status)
            try:
                exit_function(status)  # exit and quit close stdin first
            except SystemExit:
                raise ErrorExit(f"{name}({status!r})", status) from None

        return exit_noting_an_error

    def end_the_job_after_an_error_exit():
        if not ended_the_rank:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        error = ended_the_rank[-1]
        # The status the rank exits with, as Python gives it to the OS: an integer's low byte (255
        # for one beyond a C long), 1 for any other object (Python prints it).
        if isinstance(error.code, int):
            status = error.code & 0xFF if -2**63 <= error.code < 2**63 else 255
        else:
            status = 1
        dist._abort_job(f"{error.call} ended this rank, so the job ends", status)

    sys.exit = noting_an_error("sys.exit", sys.exit)
    # The interactive helpers raise SystemExit themselves, not through sys.exit.
    for name in ("exit", "quit"):
        if hasattr(builtins, name):
            setattr(builtins, name, noting_an_error(name, getattr(builtins, name)))
    atexit.register(end_the_job_after_an_error_exit)


_end_the_job_on_an_uncaught_exception()


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (a NumPy array, nested lists or a scalar)."""
    return Tensor(data, dtype, requires_grad)


def _value_and_gradient(f, argnums):
    """``(f(*args), gradient)`` from one evaluation of ``f``: the function behind grad and value_and_grad."""
    many = not isinstance(argnums, int)
    positions = tuple(argnums) if many else (argnums,)

    def both(*args):
        args = list(args)
        for position in positions:
            if not -len(args) <= position < len(args):
                raise TypeError(f"grad: argnums {argnums} names argument {position}, but f got {len(args)}")
        named = [position % len(args) for position in positions]
        # A second replacement of one argument overwrote the first, whose gradient came back 0.
        if len(set(named)) != len(named):
            raise ValueError(f"grad: argnums {argnums} names one argument twice")

        def with_replaced(*replacements):
            call = list(args)
            for position, value in zip(named, replacements):
                call[position] = value
            out = f(*call)
            if not isinstance(out, Tensor) or out.size != 1:
                shape = getattr(out, "shape", type(out).__name__)
                raise ValueError(f"grad: f returned {shape}; grad needs a one-element tensor "
                                 "(use eddy.vjp or eddy.jacobian otherwise)")
            return out

        value, grads = vjp(with_replaced, tuple(as_tensor(args[p]) for p in named))
        return value, (tuple(grads) if many else grads[0])

    return both


def grad(f, argnums=0):
    """The gradient of ``f`` (one-element output) with respect to argument(s) ``argnums``.

    Returns a function of the same arguments; with a tuple ``argnums`` it returns a tuple of
    gradients. Built on reverse mode with the graph kept, so ``grad(grad(f))`` gives second
    derivatives, and so on to any order.
    """
    both = _value_and_gradient(f, argnums)

    def gradient(*args):
        return both(*args)[1]

    return gradient


def value_and_grad(f, argnums=0):
    """Like :func:`grad`, returning ``(f(*args), gradient)`` from one evaluation of ``f``."""
    return _value_and_gradient(f, argnums)


def _method(function):
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__name__ = function.__name__
    method.__doc__ = function.__doc__
    return method


# Tensor methods that are shorthand for the module functions of the same name: every unary math
# function of the op list, and these.
_unary_math_functions = tuple(name for name, arity in _eddy._math_functions if arity == 1)
for _name in _unary_math_functions + ("sum", "mean", "prod", "max", "min", "norm", "reshape", "permute",
                                      "transpose", "conj", "flatten", "square",
                                      "contiguous", "squeeze", "expand_dims", "flip", "cast"):
    setattr(Tensor, _name, _method(getattr(_eddy, _name)))
Tensor.astype = _method(_eddy.cast)
# Properties, as NumPy's, PyTorch's and JAX's are: as methods, z.real * 2 was a TypeError and
# numpy.asarray(z.real) an object array holding the method.
Tensor.real = property(_eddy.real, doc="The real part (of a real tensor, the tensor).")
Tensor.imag = property(_eddy.imag, doc="The imaginary part (of a real tensor, zeros).")
del _name, _unary_math_functions


def _tensor_from_state(values, dtype, device, requires_grad):
    """Rebuilds a tensor that was pickled or copied (``Tensor.__reduce__``)."""
    rebuilt = tensor(values, dtype=dtype)
    if device != "cpu":
        rebuilt = rebuilt.to(device)
    return rebuilt.requires_grad_() if requires_grad else rebuilt


def _tensor_reduce(self):
    # pickle, copy.copy and copy.deepcopy, as PyTorch's: a new tensor with the values, dtype, device
    # and requires_grad (not .grad); refused for a value with autodiff history, whose copy could
    # not keep it.
    if self.requires_grad and not self.is_leaf:
        raise Error(f"a tensor computed with gradient tracking (shape {list(self.shape)}) cannot be pickled or "
                    "copied with its history; copy t.detach(), or pickle the leaves it was computed from")
    on_host = self.to("cpu") if str(self.device) != "cpu" else self
    if self.dtype == bfloat16:  # NumPy has no bfloat16; float32 holds every value
        on_host = _eddy.cast(on_host, float32)
    values = _eddy.contiguous(on_host.detach()).numpy().copy()
    return _tensor_from_state, (values, self.dtype.name, str(self.device), self.requires_grad)


Tensor.__reduce__ = _tensor_reduce
