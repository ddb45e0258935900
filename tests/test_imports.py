"""The package's import graph (read from the source, every ``from ... import``, lazy ones included): no circle runs
through the catalog, the checks' mixin package or the ReFrame configuration, so each can be read and loaded alone."""

import ast

from conftest import ROOT

PACKAGE = ROOT / 'src' / 'ibrepro'


def import_graph():
    """{module: {modules of the package it imports}}, package-relative names (``ibrepro.rfm.launch``)."""
    modules = {}
    for path in PACKAGE.rglob('*.py'):
        if '_vendor' in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
        modules['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == '__init__.py' else name.rpartition('.')[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom):
                base = package.split('.')[:len(package.split('.')) - node.level + 1] if node.level else []
                module = '.'.join(base + ([node.module] if node.module else []))
                found |= {f'{module}.{a.name}' if f'{module}.{a.name}' in modules else module for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_runs_through_the_catalog_the_checks_mixins_or_the_configuration():
    graph = import_graph()
    assert graph['ibrepro.rfm'] >= {'ibrepro.catalog', 'ibrepro.rfmconfig'}      # the graph is read at all
    assert cycles({'a': {'b'}, 'b': {'a'}, 'c': {'a'}}) == [{'a', 'b'}]
    central = {'ibrepro.catalog', 'ibrepro.rfmconfig'} | {m for m in graph if m.startswith('ibrepro.rfm')}
    assert [sorted(c) for c in cycles(graph) if c & central] == []
