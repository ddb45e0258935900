"""ibrepro: the Ohio State InfiniBand / PCI Express / MPI studies as ReFrame regression tests.

Layers (data flows one way):
  ibrepro.parsers     benchmark output -> tables, one row per message size
  ibrepro.references  the papers' numbers and testbeds (reference-data/)
  ibrepro.limits      theoretical bus and link limits
  ibrepro.topology    what RDMA hardware this machine has
  ibrepro.rfm         what ReFrame checks share (sanity, performance variables, tags)
  ibrepro.results     stored sessions (ReFrame's results database and run reports)
  ibrepro.cli         the `ibrepro` command
"""

__version__ = '0.1.0'
