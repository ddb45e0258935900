#!/usr/bin/env python3
"""Write the file map of docs/design.md from the tree: every module of the package, check file and script with the
first sentence of its docstring.

The map sits between two marker lines of docs/design.md; the prose around it is written by hand. A file without a
docstring is an error: the map would have nothing to say of it.

    .venv/bin/python scripts/design_tree.py           # rewrites the map; tests/test_design_doc.py checks it is current
    .venv/bin/python scripts/design_tree.py --check   # exit 1 when docs/design.md is out of date
"""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / 'docs' / 'design.md'
BEGIN = '<!-- file map: written by scripts/design_tree.py from the docstrings; do not edit by hand -->'
END = '<!-- end of file map -->'
#: The parts of the tree the map covers, in its order: (heading, directory, glob).
PARTS = [('The package', 'src/ibrepro', '**/*.py'),
         ('The check files', 'reframe-checks', '**/*.py'),
         ('Scripts', 'scripts', '*.py')]


def summary(path):
    """The first sentence of the module docstring of ``path``, on one line (ValueError when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding='utf-8'), str(path)))
    if not doc:
        raise ValueError(f'{path}: no module docstring')
    text = ' '.join(doc.split('\n\n', 1)[0].split())
    # the first full stop before a capital that ends no abbreviation (Sec. 3, Figs. 1-2, e.g. IMB)
    end = re.search(r'(?<!\bSec)(?<!\bFig)(?<!\bFigs)(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z`(])', text)
    return (text[:end.start() + 1] if end else text).replace('|', '\\|')


def mapped(path):
    """Whether the map lists ``path``: not a cache, and of third-party code shipped unchanged (``_vendor``) only
    its package, whose docstring says what it is."""
    return '__pycache__' not in path.parts and not ('_vendor' in path.parts and path.name != '__init__.py')


def file_map():
    """The Markdown of the map (without the markers)."""
    lines = []
    for heading, directory, pattern in PARTS:
        lines += [f'### {heading}', '', '| file | what |', '|---|---|']
        for path in sorted((ROOT / directory).glob(pattern)):
            if mapped(path):
                lines.append(f'| `{path.relative_to(ROOT)}` | {summary(path)} |')
        lines.append('')
    return '\n'.join(lines).rstrip('\n') + '\n'


def rendered(text):
    """``text`` (docs/design.md) with its map rewritten (ValueError when the markers are missing)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f'{DESIGN.relative_to(ROOT)}: expected one {BEGIN!r} line, then one {END!r} line')
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f'{head}{BEGIN}\n\n{file_map()}\n{END}{tail}'


def main(argv):
    check = argv == ['--check']
    if argv and not check:
        print('usage: design_tree.py [--check]', file=sys.stderr)
        return 2
    try:
        text = DESIGN.read_text(encoding='utf-8')
        new = rendered(text)
    except (OSError, SyntaxError, ValueError) as err:
        print(f'design_tree.py: {err}', file=sys.stderr)
        return 2
    if check:
        if new != text:
            print(f'{DESIGN.relative_to(ROOT)} is out of date: run scripts/design_tree.py', file=sys.stderr)
            return 1
        return 0
    if new != text:
        DESIGN.write_text(new, encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
