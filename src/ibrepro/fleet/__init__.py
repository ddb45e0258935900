"""The fleet: which node, HCA port, cable, leaf-spine link or switch of a partition got slow.

By role, and by where the code runs (what a compute node runs is standard library only, Python 3.6 at the oldest):

============  ==========================================================================  ==================
module        what                                                                        runs on
============  ==========================================================================  ==================
component     :class:`~ibrepro.fleet.component.Component`: the parts a night can name       compute node
sweep         each node's own state (ports, PCIe links, firmware, counters), judged         compute node
plan          the fabric model, the night's pair rounds and Slurm jobs, the confirmation    compute node
localise      which components explain the slow flows; the confirmation's judgement         compute node
rounds        one job's rounds run by its tasks (``python -m ibrepro.fleet.rounds node``)   compute node
night         the night as the check plans it: topology, routes, the nodes Slurm can give   login node
routes        the fabric's own routing (ibnetdiscover, dump_lfts)                            login node
history       the stored nights: each component's past effects, a night's flows             login node
drain         the verdict file NHC reads, and the drain commands                            login node
world         a simulated fabric that does not share the localiser's assumptions            anywhere
simulate      the localiser (and ClusterKit's, LinkTest's methods) judged on such worlds    anywhere
cli           ``ibrepro fleet``                                                              both
============  ==========================================================================  ==================

Nothing is imported here: a node imports only the modules it runs.
"""
