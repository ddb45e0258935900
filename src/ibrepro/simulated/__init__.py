"""Simulated testbeds: the papers' clusters as SimGrid SMPI platforms, on which the families run unmodified.

* :mod:`.platform`: one model per testbed of the papers, every parameter with where it comes from (calibrated on
  a paper number, a physical limit, or assumed and why), rendered as a SimGrid platform file and ``smpirun``
  options; its hash and SimGrid's version go with every session.
* :mod:`.config`: the ``simulated`` ReFrame system (``configs/simulated.py``) and the ``smpirun`` launcher.
* :mod:`.launch`: what the launcher runs inside a job (host file, program path, ``smpirun``).
* :mod:`.build`: SimGrid present or not, our benchmarks and NAS IS built with ``smpicc``.
* :mod:`.table`: the papers' numbers beside the model's values (docs/simulation.md, ``ibrepro report``).

Simulated results are model values, not measurements: they are stored under the system ``simulated`` and
labelled as such everywhere (docs/simulation.md).
"""

#: The ReFrame system name of the simulated testbeds: its sessions never mix with a real system's history.
SYSTEM = 'simulated'

#: The partition feature every simulated partition has (checks and reports test for it).
FEATURE = 'simulated'


def add_cli(subparsers):
    p = subparsers.add_parser(
        'simulated', help="the papers' testbeds as SimGrid SMPI models: build, platforms, paper vs model",
        description="The papers' testbeds as SimGrid SMPI models (configs/simulated.py, docs/simulation.md): build "
                    "what they run, show each model's parameters and where they come from, and put the papers' "
                    "numbers beside the model's values.")
    sub = p.add_subparsers(dest='action', metavar='ACTION', required=True)
    from . import build, platform, table   # noqa: PLC0415  (each defines its action)
    build.add_cli(sub)
    platform.add_cli(sub)
    table.add_cli(sub)
