"""Dump what tests/test_spack_static.py needs to know about Spack's builtin packages.

Run with the pinned Spack and spack-packages (scripts/spack-setup.sh):
    spack python tests/data/spack_builtin_facts.py > tests/data/spack-builtin.json
"""
import json
import subprocess
import sys

import spack
import spack.repo

#: Builtin packages the ibrepro environments, packages and examples refer to.
PACKAGES = [
    "autoconf", "automake", "bison", "cuda", "findutils", "gmake", "intel-mpi-benchmarks",
    "intel-oneapi-mpi", "libpciaccess", "libtool", "libxml2", "m4", "mpich", "mvapich2", "npb",
    "numactl", "openmpi", "osu-micro-benchmarks", "pciutils", "pmix", "rdma-core", "slurm",
]
#: Virtual packages (provided by others) they refer to.
VIRTUALS = ["c", "cxx", "fortran", "mpi", "pkgconfig", "zlib-api"]
#: Packages whose checksums ibrepro copies (mvapich2-striping's releases are builtin mvapich2's).
CHECKSUMS = ["mvapich2"]

builtin = spack.repo.PATH.get_repo("builtin")
described = subprocess.run(
    ["git", "-C", builtin.root, "describe", "--tags", "--long"], capture_output=True, text=True
)
facts = {
    "provenance": {
        "spack": spack.spack_version,
        "spack_packages": described.stdout.strip() or "unknown (not a git clone)",
        "command": "spack python tests/data/spack_builtin_facts.py",
    },
    "virtuals": sorted(v for v in VIRTUALS if spack.repo.PATH.is_virtual(v)),
    "packages": {},
}
for name in PACKAGES:
    cls = spack.repo.PATH.get_pkg_class(name)
    facts["packages"][name] = {
        "versions": [str(v) for v in sorted(cls.versions, reverse=True)],
        "variants": sorted(cls.variant_names()),
    }
    if name in CHECKSUMS:
        facts["packages"][name]["sha256"] = {
            str(v): args["sha256"] for v, args in cls.versions.items() if "sha256" in args
        }
json.dump(facts, sys.stdout, indent=1)
print()
