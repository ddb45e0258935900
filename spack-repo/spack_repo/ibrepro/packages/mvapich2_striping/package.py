# ibrepro: MVAPICH2 2.3.x built for the papers' multi-rail experiments, with its CH3 "mrail"
# device (the OFA-IB-CH3 interface, where the MV2_* multi-rail parameters live).
#
# A recipe of its own rather than a subclass of the builtin `mvapich2`: a subclass re-runs every
# directive of its parent, so it would carry the parent's maintainers, external detection and
# all its versions (2.3.7-1 included, which our patch was not checked on). Its build follows the
# builtin recipe of spack-packages v2026.06.0 (there, every mvapich2 is deprecated in favour of
# the CH4-only `mvapich` 3.x/4.x, which has no mrail device).
#
# Sources read (MVAPICH2 2.3.1-2.3.7 release imports, github.com/nmorey/mvapich tags v2.3.x):
# * src/mpid/ch3/channels/mrail/src/gen2/ibv_param.h: `MAX_NUM_PORTS` is (2) up to 2.3.4 and (1)
#   from 2.3.5 on, always inside `#ifndef MAX_NUM_PORTS`, and MV2_NUM_PORTS is capped at it. So
#   `-DMAX_NUM_PORTS=2` lets one process drive both ports of a two-port HCA again.
# * .../gen2/ibv_param.c: the striping decision uses `rdma_large_msg_rail_sharing_threshold`
#   (env MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD, default: the vbuf size); MV2_STRIPING_THRESHOLD is
#   parsed but no data path reads it in 2.3.x. striping-threshold-default.patch makes the default
#   a build-time value (IBREPRO_STRIPING_THRESHOLD); the environment variable still overrides it.
# * ports=2 doubles MAX_NUM_SUBRAILS (ibv_param.h: HCAs x ports x QPs per port), so the UD
#   connection manager's cm_msg (common/src/cm/cm.c: 22 B per subrail) grows from 1296 to
#   2176 B, more than a 2048-byte IB MTU; cm.c refuses it ("sizeof cm_msg (2176) >=
#   rdma_default_mtu") when connections are made on demand (more processes than
#   MV2_ON_DEMAND_THRESHOLD, 64): use ports=1 on such fabrics for large jobs. RoCE ports need
#   MV2_USE_RoCE=1 (ibrepro sets it on partitions with feature roce).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage
from spack_repo.builtin.packages.mpich.package import MpichEnvironmentModifications

from spack.package import *


def _positive_bytes(value):
    """A striping threshold in bytes: a positive integer."""
    return str(value).isdigit() and int(value) > 0


class Mvapich2Striping(MpichEnvironmentModifications, AutotoolsPackage):
    """MVAPICH2 2.3 (CH3 mrail, OFA-IB-CH3) with two usable ports per HCA and the papers'
    striping threshold (8192 B) as build-time default, for multi-rail and two-port striping
    experiments."""

    homepage = "https://mvapich.cse.ohio-state.edu/"
    url = "https://mvapich.cse.ohio-state.edu/download/mvapich/mv2/mvapich2-2.3.7.tar.gz"

    maintainers("ibrepro")

    # COPYRIGHT: OSU's BSD-3-Clause text and MPICH's (Argonne) notice
    license("BSD-3-Clause AND mpich2")

    # The releases whose ibv_param.h / ibv_param.c were read and which the patch applies to
    # (checksums: spack-packages v2026.06.0, builtin mvapich2). 2.3.7-1 is left out: its
    # source was not available to check.
    version("2.3.7", sha256="c39a4492f4be50df6100785748ba2894e23ce450a94128181d516da5757751ae")
    version("2.3.6", sha256="b3a62f2a05407191b856485f99da05f5e769d6381cd63e2fcb83ee98fc46a249")
    version("2.3.5", sha256="f9f467fec5fc981a89a7beee0374347b10c683023c76880f92a1a0ad4b961a8c")
    version("2.3.4", sha256="7226a45c7c98333c8e5d2888119cce186199b430c13b7b1dca1769909e68ea7a")
    version("2.3.3", sha256="41d3261be57e5bc8aabf4e32981543c015c5443ff032a26f18205985e18c2b73")
    version("2.3.2", sha256="30cc0d7bcaa075d204692f76bca4d65a539e0f661c7460ffa9f835d6249e1ebf")
    version("2.3.1", sha256="314e12829f75f3ed83cd4779a972572d1787aac6543a3d024ea7c6080e0ee3bf")

    provides("mpi@:3.1")

    variant(
        "ports",
        default="2",
        values=("1", "2"),
        multi=False,
        description="MAX_NUM_PORTS: ports per HCA that MV2_NUM_PORTS may select "
        "(upstream 2.3.5+ uses 1)",
    )
    variant(
        "striping_threshold",
        default="8192",
        values=_positive_bytes,
        multi=False,
        description="Default of MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD in bytes: larger messages "
        "are striped over all rails (the papers: 8192)",
    )
    variant("wrapperrpath", default=True, description="Enable wrapper rpath")
    variant("debug", default=False, description="Enable debug info and error messages at run-time")
    variant("regcache", default=True, description="Enable memory registration cache")
    variant(
        "threads",
        default="multiple",
        values=("single", "funneled", "serialized", "multiple"),
        multi=False,
        description="Control the level of thread support",
    )
    variant(
        "process_managers",
        description="List of the process managers to activate",
        values=disjoint_sets(("auto",), ("slurm",), ("hydra", "gforker", "remshell"))
        .prohibit_empty_set()
        .with_error("'slurm' or 'auto' cannot be activated along with other process managers")
        .with_default("auto")
        .with_non_feature_values("auto"),
    )
    variant(
        "pmi_version",
        description="The pmi version to be used with slurm",
        when="process_managers=slurm",
        default="pmi2",
        values=("pmi1", "pmi2", "pmix"),
        multi=False,
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("bison", type="build")
    depends_on("findutils", type="build")
    depends_on("pkgconfig", type="build")

    depends_on("rdma-core")  # the mrail device: libibverbs, librdmacm, libibumad
    depends_on("zlib-api")
    depends_on("libpciaccess")
    depends_on("libxml2")
    depends_on("slurm", when="process_managers=slurm")
    depends_on("pmix", when="pmi_version=pmix")

    patch("striping-threshold-default.patch")
    # the builtin mvapich2's fix of a segfault in MPIR_Attr_delete_list (2.3.7),
    # from spack-packages v2026.06.0, by URL with its checksum
    patch(
        "https://raw.githubusercontent.com/spack/spack-packages/d4f7c711a6a42f1c4d551c8fd10fce9a11340a81/"
        "repos/spack_repo/builtin/packages/mvapich2/mpir_attr_delete_list_segfault.patch",
        sha256="d98d8e78e5aafeb6353d9088914c635ca674f60824a3443eebfda9eeab0058e6",
        when="@2.3.7",
    )

    filter_compiler_wrappers("mpicc", "mpicxx", "mpif77", "mpif90", "mpifort", relative_root="bin")

    @property
    def libs(self):
        query_parameters = self.spec.last_query.extra_parameters
        libraries = ["libmpi"]
        if "cxx" in query_parameters:
            libraries = ["libmpicxx"] + libraries
        return find_libraries(libraries, root=self.prefix, shared=True, recursive=True)

    def flag_handler(self, name, flags):
        if name == "cppflags":
            flags = (flags or []) + [
                f"-DMAX_NUM_PORTS={self.spec.variants['ports'].value}",
                f"-DIBREPRO_STRIPING_THRESHOLD={self.spec.variants['striping_threshold'].value}",
            ]
        elif name == "fflags" and self.spec.satisfies("%gcc@10:"):
            # https://bugzilla.redhat.com/show_bug.cgi?id=1795817
            flags = (flags or []) + ["-fallow-argument-mismatch"]
        return (flags, None, None)

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        if self.spec.satisfies("process_managers=slurm"):
            env.set("SLURM_MPI_TYPE", self.spec.variants["pmi_version"].value)
        env.set("MPI_ROOT", self.prefix)
        # MPI works as a compiler: its wrappers belong in the run environment.
        self.setup_mpi_wrapper_variables(env)

    def setup_dependent_build_environment(
        self, env: EnvironmentModifications, dependent_spec: Spec
    ) -> None:
        self.setup_mpi_wrapper_variables(env)
        MpichEnvironmentModifications.setup_dependent_build_environment(self, env, dependent_spec)

    def process_manager_args(self):
        spec = self.spec
        if spec.satisfies("process_managers=slurm"):
            # https://slurm.schedmd.com/mpi_guide.html#mvapich2
            pmi = spec.variants["pmi_version"].value
            args = ["--with-pm=slurm", f"--with-slurm={spec['slurm'].prefix}", f"--with-pmi={pmi}"]
            if pmi == "pmix":
                args.append(f"--with-pmix={spec['pmix'].prefix}")
            return args
        managers = [
            pm
            for pm in ("hydra", "gforker", "remshell")
            if spec.satisfies(f"process_managers={pm}")
        ]
        return [f"--with-pm={':'.join(managers)}"] if managers else []

    def configure_args(self):
        spec = self.spec
        args = [
            # the CH3 multi-rail InfiniBand device (OFA-IB-CH3)
            "--with-device=ch3:mrail",
            "--with-rdma=gen2",
            "--disable-mcast",
            "--enable-shared",
            "--enable-romio",
            "--disable-silent-rules",
            "--disable-new-dtags",
            "--enable-fortran=all",
            "--disable-cuda",
            "--disable-opencl",
            "--disable-gl",
            "--disable-nvml",
            "--with-ch3-rank-bits=32",
            # link the verbs libraries: dlopen() asks for unversioned names, which only the -dev
            # packages provide, so nodes with the runtime rdma-core alone fail at MPI_Init
            "--disable-ibv-dlopen",
            f"--enable-threads={spec.variants['threads'].value}",
            f"--enable-wrapper-rpath={'yes' if spec.satisfies('+wrapperrpath') else 'no'}",
        ]
        args.extend(self.enable_or_disable("registration-cache", variant="regcache"))
        if spec.satisfies("+debug"):
            args.extend(
                [
                    "--disable-fast",
                    "--enable-error-checking=runtime",
                    "--enable-error-messages=all",
                    "--enable-g=dbg",
                    "--enable-debuginfo",
                ]
            )
        else:
            args.append("--enable-fast=all")
        return args + self.process_manager_args()
