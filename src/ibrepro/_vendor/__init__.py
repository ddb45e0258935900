"""Third-party code shipped unchanged, for compute nodes that have only their platform Python.

``dataclasses.py``: the backport of :mod:`dataclasses` to Python 3.6 by its author (PyPI ``dataclasses`` 0.8,
https://github.com/ericvsmith/dataclasses, Apache License 2.0: LICENSE.dataclasses.txt), the file of the wheel
``dataclasses-0.8-py3-none-any.whl`` unchanged (sha256 of the wheel
0201d89fa866f68c8ebd9d08ee6ff50c0b255f8ec63a71c16fda7af82bb887bf, of the file
4c1b7676ee2a931c57759e68956173c07a629b6721e23ee42898b6552feaa19c). Imported only where the interpreter has no
:mod:`dataclasses` (3.6: EL8's platform Python), by :mod:`ibrepro.compat`.
"""
