"""ModuleList and ModuleDict: submodules held in a list or a dict, registered under their index or
key so that parameters(), state_dict() and train() reach them, as torch.nn's containers do (a plain
list or dict attribute is not a submodule in either framework)."""

from ._eddy import nn


def _require_module(container, where, value):
    # A value that is no module was held and listed by values() but reached by no parameters(),
    # state_dict() or train(); torch refuses it too.
    if not isinstance(value, nn.Module):
        raise TypeError(f"{container} holds modules (eddy.nn.Module), got {type(value).__name__} for {where}")


class ModuleList(nn.Module):
    """Modules by position, registered as "0", "1", ...; no forward of its own."""

    def __init__(self, modules=()):
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module):
        _require_module("ModuleList", f"index {len(self)}", module)
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def __len__(self):
        count = 0
        while hasattr(self, str(count)):
            count += 1
        return count

    def __getitem__(self, index):
        size = len(self)
        if isinstance(index, slice):  # a new ModuleList of the same modules, as torch's
            return ModuleList([getattr(self, str(i)) for i in range(size)][index])
        if not -size <= index < size:
            raise IndexError(f"ModuleList index {index} out of range for {size} modules")
        return getattr(self, str(index % size))

    def __iter__(self):
        return (getattr(self, str(i)) for i in range(len(self)))

    def forward(self, *args):
        raise TypeError("ModuleList has no forward: call its modules (for layer in self.layers: x = layer(x))")


class ModuleDict(nn.Module):
    """Modules by name, registered under their keys; no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        self._keys = []
        for key, module in dict(modules or {}).items():
            self[key] = module

    def __setitem__(self, key, module):
        if not isinstance(key, str) or not key.isidentifier():
            raise KeyError(f"ModuleDict keys are names (letters, digits and _), got {key!r}")
        if hasattr(type(self), key) or key == "_keys":
            raise KeyError(f"ModuleDict key {key!r} is the name of one of its methods or of its key list; "
                           "choose another")
        _require_module("ModuleDict", f"key {key!r}", module)
        setattr(self, key, module)
        if key not in self._keys:
            self._keys.append(key)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))

    def keys(self):
        return list(self._keys)

    def items(self):
        return [(key, getattr(self, key)) for key in self._keys]

    def values(self):
        return [getattr(self, key) for key in self._keys]

    def forward(self, *args):
        raise TypeError("ModuleDict has no forward: call its modules by key")
