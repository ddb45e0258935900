from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Perftest(AutotoolsPackage):
    """InfiniBand and RoCE verbs micro-benchmarks (ib_write_bw, ib_send_lat, ib_read_lat, ...)
    from the linux-rdma project."""

    homepage = "https://github.com/linux-rdma/perftest"
    url = "https://github.com/linux-rdma/perftest/archive/refs/tags/26.04.17.tar.gz"
    git = "https://github.com/linux-rdma/perftest.git"

    maintainers("ibrepro")

    license("GPL-2.0-only OR Linux-OpenIB")  # COPYING: GPL-2 or the OpenIB.org BSD text

    # GitHub's tag archives. Their sha256 were computed from `git archive --format=tar
    # --prefix=perftest-<version>/ <tag> | gzip -n` of the tagged commits (tag 26.04.17 ->
    # 720b6108, tag v4.5-0.17 -> e63987c4); for 26.04.17 that sum equals the one another
    # distribution publishes for the GitHub download.
    version("26.04.17", sha256="18446f0390dbb097e623ab5f100ba163de6867bc5ad4e42669701e3ca3c4a4bf")
    # The source of Debian 12's perftest 4.5+0.17-1 (`ib_write_bw --version`: 6.06).
    version(
        "4.5-0.17",
        sha256="e0cce1eed8414d9c22e58b5cc65b43718ea341b6020a08266b751695ef2b620a",
        url="https://github.com/linux-rdma/perftest/archive/refs/tags/v4.5-0.17.tar.gz",
    )

    variant("cuda", default=False, description="GPUDirect RDMA benchmarks on CUDA memory")

    depends_on("c", type="build")
    # configure probes a C++ compiler; +cuda builds a CUDA kernel and links libstdc++.
    depends_on("cxx", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")

    depends_on("rdma-core")  # libibverbs, librdmacm, libibumad
    # configure requires libpci on Linux; a static libpci would fail its link test.
    depends_on("pciutils+shared")
    # From 26.04 configure links libnuma whenever it finds it.
    depends_on("numactl", when="@26.04:")
    depends_on("cuda", when="+cuda")

    # From 25.07 configure enables CUDA whenever /usr/local/cuda/include/cuda.h exists;
    # CUDA then comes only from CUDA_H_PATH, i.e. from +cuda.
    patch("no-usr-local-cuda.patch", when="@25.07:")

    # No external detection: `ib_write_bw --version` prints perftest's internal version
    # (6.06 for both 4.5-0.17 and 4.5-0.18), not the release.

    def autoreconf(self, spec, prefix):
        which("bash", required=True)("./autogen.sh")

    def configure_args(self):
        args = []
        if self.spec.satisfies("+cuda"):
            args.append(f"CUDA_H_PATH={join_path(self.spec['cuda'].prefix.include, 'cuda.h')}")
        if self.spec.satisfies("@25.07:"):
            # the CUDA runtime (GPU data validation); off unless +cuda
            args.extend(self.enable_or_disable("cudart", variant="cuda"))
        return args
