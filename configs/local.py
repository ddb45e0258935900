"""ReFrame configuration of the embedded default system ``local``: this machine, whatever its host name.

    reframe -C configs/local.py -c reframe-checks -r

Programming environments: ``impi`` (Intel MPI + IMB, installed by ``make setup``), ``mpich`` (MPICH with
mpicc, ``make setup``) and ``system`` (whatever MPI and benchmarks PATH, modules or a Spack view provide).
Results go to the per-user results database (``ibrepro where`` prints the paths; ``$IBREPRO_HOME`` moves them).
"""

from ibrepro import rfmconfig

site_configuration = rfmconfig.site_configuration(
    systems=[rfmconfig.local_system()],
    environments=[rfmconfig.impi_environment(), rfmconfig.mpich_environment(),
                  rfmconfig.system_environment()],
)
