#!/usr/bin/env python3
"""Fails when a layer defines a member of a class that a lower layer's header defines.

The link check (cmake/LayerChecks.cmake) catches a layer calling upward, but not a member that a
lower layer declares and only a higher one defines (Tensor::reshape declared in core, defined in
ops): nothing below calls it, so every lower link succeeds. This reads the classes defined at
namespace scope in each layer's headers and the strong symbols in each layer's library (nm), and
reports every member defined above its class's layer.

usage: check_layer_definitions.py --root src/eddy --layers core,backends,... --lib-dir build/src
       [--stamp FILE, touched when the check passes]
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

TOKEN = re.compile(r'namespace\s+([\w:]+)\s*\{|namespace\s*\{|\b(?:class|struct)\s+(\w+)\s*(?:final\s*)?(?::[^;{]*)?\{|[{}]')


def strip_comments_and_strings(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def classes_in(header):
    """Fully qualified names of the classes a header defines at namespace scope."""
    text = strip_comments_and_strings(header.read_text())
    stack = []  # one entry per open brace: a namespace name, '' for an anonymous one, or None
    found = set()
    for m in TOKEN.finditer(text):
        if m.group(0).startswith('namespace'):
            stack.append(m.group(1) or '')
        elif m.group(2):
            if all(entry is not None for entry in stack):
                found.add('::'.join([s for s in stack if s] + [m.group(2)]))
            stack.append(None)
        elif m.group(0) == '{':
            stack.append(None)
        elif stack:
            stack.pop()
    return found


def split_scope(symbol):
    """'eddy::Tensor::reshape(...) const' -> 'eddy::Tensor'; None for names without a scope."""
    depth = 0
    end = len(symbol)
    for i, c in enumerate(symbol):
        if c == '<':
            depth += 1
        elif c == '>':
            depth -= 1
        elif c == '(' and depth == 0:
            end = i
            break
    name = symbol[:end].replace('[abi:cxx11]', '')
    depth = 0
    cut = -1
    for i, c in enumerate(name):
        if c == '<':
            depth += 1
        elif c == '>':
            depth -= 1
        elif c == ':' and depth == 0 and name[i:i + 2] == '::':
            cut = i
    return name[:cut] if cut > 0 else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--root', required=True)
    parser.add_argument('--layers', required=True)
    parser.add_argument('--lib-dir', required=True)
    parser.add_argument('--nm', default='nm')
    parser.add_argument('--stamp')
    args = parser.parse_args()
    layers = args.layers.split(',')
    owner = {}
    for index, layer in enumerate(layers):
        for header in sorted(Path(args.root, layer).rglob('*.h')):
            for cls in classes_in(header):
                owner.setdefault(cls, (index, layer, header))
    violations = []
    for index, layer in enumerate(layers):
        library = Path(args.lib_dir, f'libeddy_{layer}.a')
        out = subprocess.run([args.nm, '-C', '--defined-only', str(library)], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split(' ', 2)
            # Strong definitions only: inline functions from headers are weak (W) in every user.
            if len(parts) != 3 or parts[1] not in 'TDBR':
                continue
            scope = split_scope(parts[2])
            if scope in owner and owner[scope][0] < index:
                _, below, header = owner[scope]
                violations.append(f'  {parts[2]}: defined in {layer}, but {scope} is {below}\'s '
                                  f'({header})')
    if violations:
        print('Members defined above the layer of their class (docs/architecture.md):')
        print('\n'.join(sorted(set(violations))))
        return 1
    print(f'{len(owner)} classes, no member defined above its layer')
    if args.stamp:
        Path(args.stamp).touch()
    return 0


if __name__ == '__main__':
    sys.exit(main())
