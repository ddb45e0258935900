"""The fleet package's shape: one :class:`Component` type for every part a night names (parsed in one place, stored
as its label), no import cycle through a fleet module, and the modules a compute node runs closed under their own
imports (a node has a copy of them only: what they import and the copy lacks fails there, not here)."""

import ast
import json
import pickle
import sys
from pathlib import Path

import pytest

from ibrepro.fleet import localise as fl
from ibrepro.fleet import plan as fp
from ibrepro.fleet import rounds as fleet_rounds
from ibrepro.fleet.component import Component, component_or_none
from ibrepro.rfm import system

PACKAGE = Path(fl.__file__).resolve().parents[1]


# -- Component ---------------------------------------------------------------------------------------------

def test_every_component_a_flow_crosses_reads_back_as_its_parts():
    fabric = fp.fat_tree(64, leaf_size=8, spines=4)
    src, dst = fabric.nodes[0], fabric.nodes[-1]
    cs = fabric.components(src, dst)
    assert [c.kind for c in cs] == ['node', 'node', 'port', 'port', 'cable', 'cable', 'uplink', 'downlink',
                                    'spine link', 'spine link']
    q = fabric.spine_for(dst, fabric.leaf_of(src))
    up, down = cs[6], cs[7]
    assert (up.leaf, up.spine, down.leaf, down.spine) == (fabric.leaf_of(src), q, fabric.leaf_of(dst), q)
    assert cs[4].host == src and cs[4].direction == 'up' and cs[5].host == dst and cs[5].direction == 'down'
    assert cs[2].rail == 'mlx5_0/1'
    for c in cs:                     # the label is the type: stored, compared, parsed back
        assert Component(str(c)) == c and Component(str(c)).kind == c.kind
        assert json.loads(json.dumps(c)) == c
        assert pickle.loads(pickle.dumps(c)).kind == c.kind
    assert set(up.directed_links()) | set(down.directed_links()) <= set(fabric.directed_links(src, dst))
    assert not cs[0].is_link and up.is_link and cs[0].on_host(src) and not cs[0].on_host(dst)


@pytest.mark.parametrize('leaf', ['ib-leaf-01', 'rack.3-sw', 'a>b', 'x-spine2'])
def test_switch_names_with_dashes_dots_or_arrows_keep_their_spine(leaf):
    """Sites name switches ``ib-leaf-01``: the spine is read from the label's end, not from a split on ``-``."""
    for c in (Component.uplink(leaf, 3), Component.downlink(3, leaf), Component.spine_link(leaf, 3)):
        assert (Component(str(c)).leaf, Component(str(c)).spine) == (leaf, 3)
    assert Component.spine_link(leaf, 3).directed_links() == {f'{leaf}>spine3', f'spine3>{leaf}'}


@pytest.mark.parametrize('text', ['', 'node', 'node n1;reboot', 'node n1 ', 'port n1', 'port n1:mlx5_0',
                                  'cable n1:mlx5_0/1 sideways', 'uplink leaf1>spine', 'downlink leaf1>spine0',
                                  'spine leaf1-spine0', 'switch leaf1', 'node $(reboot)', 'uplink a\nb>spine0',
                                  'no topology: localised to node'])
def test_text_that_is_no_component_is_refused(text):
    with pytest.raises(ValueError, match='is not a fabric component'):
        Component(text)
    assert component_or_none(text) is None


def test_a_confirmation_on_a_fabric_of_dashed_switch_names_loads_each_suspect_link():
    """The confirmation plan parses the suspects it re-tests: on a site whose leaves are ``ib-leaf-01`` a suspect
    ``spine link ib-leaf-01-spine1`` is loaded by its own pair, as on ``leaf000``."""
    nodes = [f'cn{i:03d}' for i in range(16)]
    fabric = fp.fabric_from_leaves({'ib-leaf-01': nodes[:8], 'ib-leaf-02': nodes[8:]}, 4)
    suspect = Component.spine_link('ib-leaf-01', 1)
    (r,) = fp.confirmation_rounds([suspect], fabric, fabric.nodes)
    loaded = [p for p, role in zip(r.pairs, r.roles) if role == fp.LINK_CONFIRMATION]
    crossing = [f for f in fp.flows_of(loaded) if suspect.directed_links() & set(fabric.directed_links(*f))]
    assert loaded and crossing


# -- the package's imports -----------------------------------------------------------------------------------

def _module(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix('')
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)


def _resolve(name):
    """The module ``name`` is, or its package when ``name`` is an attribute of one (``from . import x``)."""
    while name and name != 'ibrepro':
        base = PACKAGE.parent / name.replace('.', '/')
        if base.with_suffix('.py').exists() or (base / '__init__.py').exists():
            return name
        name = name.rpartition('.')[0]
    return name


def _imports(path, top_level_only=False):
    """The ibrepro modules ``path`` imports (in functions too, unless ``top_level_only``), and the other top-level
    packages it imports."""
    module, ours, others = _module(path), set(), set()
    package = module if path.name == '__init__.py' else module.rpartition('.')[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(anchor + ([base] if base else []))
            names = [f'{base}.{a.name}' for a in node.names] if base.startswith('ibrepro') else [base]
        else:
            continue
        for name in names:
            if name.startswith('ibrepro'):
                ours.add(_resolve(name))
            elif name:
                others.add(name.split('.')[0])
    ours.discard(module)
    return ours, others


def test_no_import_cycle_runs_through_a_fleet_module():
    graph = {_module(p): _imports(p)[0] for p in PACKAGE.rglob('*.py')}
    fleet = sorted(m for m in graph if m.startswith('ibrepro.fleet'))
    assert {'ibrepro.fleet.component', 'ibrepro.fleet.rounds', 'ibrepro.fleet.cli'} <= set(fleet)

    def reaches(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    cycles = [m for m in fleet if m in reaches(m)]
    assert cycles == []
    assert graph['ibrepro.fleet'] == set()          # importing any fleet module runs no other


@pytest.mark.parametrize('modules', [fleet_rounds.NODE_MODULES, system.NODE_MODULES], ids=['rounds', 'sweep'])
def test_what_a_node_runs_imports_only_what_it_is_given_and_the_standard_library(modules):
    files = {PACKAGE / m for m in modules if not (PACKAGE / m).is_dir()}
    files |= {p for m in modules if (PACKAGE / m).is_dir() for p in (PACKAGE / m).rglob('*.py')}
    given = {_module(p) for p in files}
    for path in sorted(files):
        ours, others = _imports(path, top_level_only=True)
        assert ours <= given | {'ibrepro'}, (path.name, sorted(ours - given))
        assert others <= set(sys.stdlib_module_names), (path.name, sorted(others - set(sys.stdlib_module_names)))
