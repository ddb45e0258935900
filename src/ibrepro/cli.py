"""The ``ibrepro`` command: one subcommand per concern, each defined next to the code it drives.

Only the module of the subcommand being run is imported (``ibrepro pair`` must not pay for matplotlib); the
whole list is imported for ``--help``.
"""

import argparse
import importlib
import sys

from . import __version__, trust

# Subcommand -> the module that defines it with add_cli(subparsers); the order is the order of --help.
COMMANDS = {
    'parse': 'ibrepro.parsers',
    'where': 'ibrepro.results',
    'results': 'ibrepro.results',
    'baseline': 'ibrepro.baseline',
    'refs': 'ibrepro.references',
    'limits': 'ibrepro.limits',
    'topology': 'ibrepro.topology',
    'pair': 'ibrepro.pair',
    'fleet': 'ibrepro.fleet.cli',
    'catalog': 'ibrepro.catalog',
    'softroce': 'ibrepro.softroce',
    'simulated': 'ibrepro.simulated',
    'software': 'ibrepro.software',
    'report': 'ibrepro.report.cli',
    'nightly': 'ibrepro.nightly',
    'charts': 'ibrepro.evidence',
}


def build_parser(command=None):
    """The argument parser; with ``command`` (a known subcommand) only its module is imported."""
    parser = argparse.ArgumentParser(
        prog='ibrepro',
        description='Reproduce the Ohio State InfiniBand / PCIe / MPI studies: parse benchmark '
                    'output, show the papers\' reference data and link limits, and report.')
    parser.add_argument('--version', action='version', version=f'ibrepro {__version__}')
    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(module).add_cli(subparsers)

    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith('-')), None))
    args = parser.parse_args(argv)
    if not getattr(args, 'func', None):
        parser.print_help()
        return 2

    try:
        return args.func(args) or 0
    except trust.Refused as err:     # a path not ours to trust, a refused setting: one line, never a traceback
        print(f'ibrepro {args.command}: {err}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == '__main__':
    sys.exit(main())
