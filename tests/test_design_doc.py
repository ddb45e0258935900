"""docs/design.md stays true to the tree: its file map is the one scripts/design_tree.py writes from the docstrings,
and every file or directory its prose names exists."""

import importlib.util
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def _design_tree():
    spec = importlib.util.spec_from_file_location('design_tree', ROOT / 'scripts' / 'design_tree.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_file_map_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / 'scripts' / 'design_tree.py'), '--check'],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_map_names_every_module_with_its_docstring():
    design = _design_tree()
    text = (ROOT / 'docs' / 'design.md').read_text()
    for path in filter(design.mapped, sorted((ROOT / 'src' / 'ibrepro').rglob('*.py'))):
        assert f'| `{path.relative_to(ROOT)}` | {design.summary(path)} |' in text
    assert '| `src/ibrepro/report/model.py` | The model of one system' in text


def test_every_path_the_prose_names_exists():
    text = (ROOT / 'docs' / 'design.md').read_text()
    named = set()
    for token in re.findall(r'`([^`\s]+)`', text):
        path = token.split(':')[0]
        # a path of the checkout: its first part is a top-level directory (not a unit such as MB/s)
        if '/' in path and not re.search(r'[<>*{]', path) and (ROOT / path.split('/')[0]).is_dir():
            named.add(path.rstrip('/'))
    assert {'src/ibrepro/report', 'reference-data/experiments.yaml', 'src/ibrepro/cli.py'} <= named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f'docs/design.md names files that do not exist: {missing}'


def test_a_module_without_a_docstring_and_a_page_without_markers_are_errors(tmp_path):
    design = _design_tree()
    bare = tmp_path / 'bare.py'
    bare.write_text('x = 1\n')
    with pytest.raises(ValueError, match='no module docstring'):
        design.summary(bare)
    with pytest.raises(ValueError, match='expected one'):
        design.rendered('# design\n\nno map here\n')
    text = f'a\n{design.BEGIN}\nold\n{design.END}\nb\n'
    assert design.rendered(text).startswith(f'a\n{design.BEGIN}\n\n### The package\n')
    assert design.rendered(text).endswith(f'{design.END}\nb\n')


def test_summary_is_the_first_sentence(tmp_path):
    module = tmp_path / 'm.py'
    module.write_text('"""Collectives (002 Sec. 3.7, Figs. 11-12) on e.g. IMB: a | b.\n\nMore. Text."""\n')
    assert _design_tree().summary(module) == 'Collectives (002 Sec. 3.7, Figs. 11-12) on e.g. IMB: a \\| b.'
