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
    "autoconf", "automake", "gmake", "intel-mpi-benchmarks", "intel-oneapi-mpi", "libtool", "m4",
    "mpich", "mvapich2", "npb", "openmpi", "osu-micro-benchmarks", "pciutils", "rdma-core",
]
#: Virtual packages (provided by others) they refer to.
VIRTUALS = ["c", "cxx", "fortran", "mpi"]

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
json.dump(facts, sys.stdout, indent=1)
print()
