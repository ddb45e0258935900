"""ReFrame configuration of the embedded default system ``local``: this machine, whatever its host name.

    reframe -C configs/local.py -c reframe-checks -r

Programming environments: ``impi`` (Intel MPI + IMB, installed by ``make setup``), ``mpich`` (MPICH with
mpicc, ``make setup``), ``system`` (whatever MPI and benchmarks PATH or modules provide), and ``spack-<env>``
for each Spack view ``make spack SPACK_ENV=<env>`` built (.deps/spack-view/<env>).
Results go to the per-user results database (``ibrepro where`` prints the paths; ``$IBREPRO_HOME`` moves them).
"""

from ibrepro import rfmconfig

environments = rfmconfig.local_environments()
site_configuration = rfmconfig.site_configuration(systems=[rfmconfig.local_system(environments)],
                                                  environments=environments)
