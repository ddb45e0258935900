# ibrepro: Spack package for the linux-rdma verbs micro-benchmarks (absent from spack-packages).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Perftest(AutotoolsPackage):
    """InfiniBand / RoCE verbs micro-benchmarks (ib_write_bw, ib_send_lat, ib_read_lat, ...)."""

    homepage = "https://github.com/linux-rdma/perftest"
    git = "https://github.com/linux-rdma/perftest.git"

    license("GPL-2.0-only OR Linux-OpenIB")  # COPYING: GPL-2 or the OpenIB.org BSD licence

    # Each commit is the one its tag points to in linux-rdma/perftest (checked on a snapshot of
    # the repository; Spack also checks that the tag still points there when it clones).
    # 4.5-0.17 is the source of Debian 12's perftest 4.5+0.17-1 used by the test fixtures.
    version("26.04.17", tag="26.04.17", commit="720b61082454e189b1f21835ec175536a944afc3")
    version("4.5-0.17", tag="v4.5-0.17", commit="e63987c4223b08f8c67390c7f60836ad2bf4a6e0")

    depends_on("c", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")

    depends_on("rdma-core")  # libibverbs, librdmacm, libibumad
    # configure requires libpci on Linux; a shared libpci carries its own dependencies
    # (zlib, udev), a static one would make configure's link test fail.
    depends_on("pciutils+shared")

    # No external detection: `ib_write_bw --version` prints perftest's internal version
    # (6.06 for both v4.5-0.17 and v4.5-0.18), which does not name the release. Declare a
    # distribution's perftest in packages.yaml instead (docs/spack.md).

    def autoreconf(self, spec, prefix):
        bash = which("bash", required=True)
        bash("./autogen.sh")
