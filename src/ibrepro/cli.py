"""The ``ibrepro`` command: one subcommand per concern, each defined next to the code it drives."""

import argparse
import importlib
import sys

from . import __version__

# Modules that define a subcommand with add_cli(subparsers); the order is the order of --help.
_COMMAND_MODULES = [
    'ibrepro.parsers',
    'ibrepro.results',
    'ibrepro.baseline',
    'ibrepro.references',
    'ibrepro.limits',
    'ibrepro.topology',
    'ibrepro.pair',
    'ibrepro.catalog',
    'ibrepro.softroce',
    'ibrepro.simulated',
    'ibrepro.software',
    'ibrepro.report',
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog='ibrepro',
        description='Reproduce the Ohio State InfiniBand / PCIe / MPI studies: parse benchmark '
                    'output, show the papers\' reference data and link limits, and report.')
    parser.add_argument('--version', action='version', version=f'ibrepro {__version__}')
    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
    for module in _COMMAND_MODULES:
        importlib.import_module(module).add_cli(subparsers)

    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, 'func', None):
        parser.print_help()
        return 2

    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == '__main__':
    sys.exit(main())
