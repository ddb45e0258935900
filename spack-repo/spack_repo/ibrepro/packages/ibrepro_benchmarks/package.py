# ibrepro: our own C benchmarks (benchmarks/ of the ibrepro checkout).
import os
from pathlib import Path

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *

#: The ibrepro checkout holding this package repository
#: (<checkout>/spack-repo/spack_repo/ibrepro/packages/ibrepro_benchmarks/package.py).
CHECKOUT = Path(__file__).resolve().parents[5]


class IbreproBenchmarks(MakefilePackage):
    """ibrepro's own MPI (and, with +verbs, InfiniBand verbs) micro-benchmarks."""

    # The project has no public address: its home is the checkout this repository sits in.
    homepage = (CHECKOUT / "README.md").as_uri()
    # The source is that checkout too, never a download (hence no checksum): the environments
    # in configs/spack/ build its working tree through their `develop:` section; a plain
    # `spack install ibrepro-benchmarks` clones the tip of its main branch.
    git = CHECKOUT.as_uri()

    maintainers("ibrepro")

    license("BSD-3-Clause")  # the project's licence (pyproject.toml)

    version("develop", branch="main")

    variant("verbs", default=False, description="Also build the verbs benchmarks (rdma-core)")

    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("mpi")
    depends_on("rdma-core", when="+verbs")

    @property
    def build_directory(self):
        # A clone of the checkout holds the benchmarks in benchmarks/; the environments'
        # `develop:` path is benchmarks/ itself (so that Spack watches only those files).
        subdir = os.path.join(self.stage.source_path, "benchmarks")
        return subdir if os.path.isdir(subdir) else self.stage.source_path

    def _make_args(self):
        # BUILD: a build directory per spec, outside the source, so that environments built
        # against different MPIs never share object files.
        return [
            f"MPICC={self.spec['mpi'].mpicc}",
            f"CC={spack_cc}",
            f"BUILD={join_path(self.stage.path, 'ibrepro-build')}",
        ]

    @property
    def build_targets(self):
        return self._make_args() + ["mpi"] + (["verbs"] if self.spec.satisfies("+verbs") else [])

    @property
    def install_targets(self):
        return self._make_args() + [f"PREFIX={self.prefix}", "install"]

    @run_after("install")
    def check_verbs_installed(self):
        # benchmarks/Makefile skips the verbs programs (with a message) when it cannot link
        # rdma-core; +verbs must not install without them.
        if self.spec.satisfies("+verbs") and not os.path.exists(self.prefix.bin.ibrepro_rdma):
            raise InstallError("+verbs, but benchmarks/Makefile did not build ibrepro_rdma")
