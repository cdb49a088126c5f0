#!/usr/bin/env python3
"""Fails when modules of one crate depend on each other in a cycle.

A module depends on another when its code (not its comments, not its unit tests) names it by a
`crate::`, `super::` or `self::` path, in a `use` (groups expanded) or inline. A module naming
its own ancestors is the usual Rust shape (a child uses its parent's items) and does not count.
Usage: scripts/module-cycles.py CRATE_SRC_DIR...   (prints each cycle; exit 1 if any)
"""
import os
import re
import sys


def modules(src):
    """Module path (tuple) -> file, for every .rs file under `src` (tests.rs files are test-only)."""
    found = {}
    for folder, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs") or name == "tests.rs":
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found[tuple(parts)] = path
    return found


def code_of(path):
    """The file's text without comments and without its `#[cfg(test)] mod tests { … }`."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)


def expand(tree):
    """The paths of one `use` tree: `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0 or "}" not in tree:
        return [re.split(r"\s+as\s+", tree)[0].strip()]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [prefix + p for part in parts if part.strip() for p in expand(part)]


def resolve(current, path, known):
    """The module a `crate::`/`super::`/`self::` path names (its longest known prefix)."""
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        base = list(current)
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
    else:
        return None
    full = base + [p for p in parts if p != "self"]
    for i in range(len(full), 0, -1):
        if tuple(full[:i]) in known:
            return tuple(full[:i])
    return None


def dependencies(known):
    """Each module's dependencies on others, ancestors left out."""
    deps = {m: set() for m in known}
    for module, path in known.items():
        code = code_of(path)
        paths = [p for tree in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code, flags=re.M) for p in expand(tree)]
        paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", code)
        for p in paths:
            target = resolve(module, p, known)
            if target and target != module and module[: len(target)] != target:
                deps[module].add(target)
    return deps


def cycles(deps):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in deps:
        if root in index:
            continue
        work = [(root, iter(sorted(deps[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(deps[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted("/".join(m) or "(root)" for m in component))
    return found


def main():
    failed = False
    for src in sys.argv[1:]:
        for cycle in cycles(dependencies(modules(src))):
            print(f"{src}: modules in a cycle: {', '.join(cycle)}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
