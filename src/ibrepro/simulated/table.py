"""Placeholder: the paper-vs-model table (filled in below)."""


def add_cli(subparsers):
    pass
