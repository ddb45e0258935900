# ibrepro: MVAPICH2 (CH3 "mrail", the OFA-IB-CH3 interface) built for the papers' multi-rail
# experiments. Subclasses the builtin recipe, so its versions, patches and variants are inherited.
#
# Sources read (MVAPICH2 2.3.1-2.3.7 release imports, github.com/nmorey/mvapich tags v2.3.x):
# * src/mpid/ch3/channels/mrail/src/gen2/ibv_param.h: `MAX_NUM_PORTS` is (2) up to 2.3.4 and (1)
#   from 2.3.5 on, always inside `#ifndef MAX_NUM_PORTS`, and MV2_NUM_PORTS is capped at it. So
#   `-DMAX_NUM_PORTS=2` lets one process drive both ports of a two-port HCA again.
# * .../gen2/ibv_param.c: the striping decision uses `rdma_large_msg_rail_sharing_threshold`
#   (env MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD, default: the vbuf size); MV2_STRIPING_THRESHOLD is
#   parsed but no data path reads it in 2.3.x. striping-threshold-default.patch makes the default
#   a build-time value (IBREPRO_STRIPING_THRESHOLD); the environment variable still overrides it.
from spack_repo.builtin.packages.mvapich2.package import Mvapich2

from spack.package import *

#: The releases whose ibv_param.h / ibv_param.c were read and which the patch applies to.
#: 2.3.7-1 is excluded: its source was not available to check.
VERIFIED_RELEASES = "@2.3.1:2.3.6,=2.3.7"


def _positive_bytes(value):
    """A striping threshold in bytes: a positive integer."""
    return str(value).isdigit() and int(value) > 0


class Mvapich2Striping(Mvapich2):
    """MVAPICH2 (CH3 mrail) with two usable ports per HCA and the papers' striping threshold
    (8192 B) as build-time default, for the multi-rail / two-port striping experiments."""

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

    requires("fabrics=mrail", msg="multi-rail striping exists only in the CH3 mrail interface")
    requires(
        VERIFIED_RELEASES, msg="ibrepro checked its patch on MVAPICH2 2.3.1-2.3.7 only (use @=2.3.7)"
    )

    patch("striping-threshold-default.patch")

    def flag_handler(self, name, flags):
        flags, env_flags, build_flags = super().flag_handler(name, flags)
        if name == "cflags":
            flags = list(flags or []) + [
                f"-DMAX_NUM_PORTS={self.spec.variants['ports'].value}",
                f"-DIBREPRO_STRIPING_THRESHOLD={self.spec.variants['striping_threshold'].value}",
            ]
        return (flags, env_flags, build_flags)
