"""configs/softroce.py with a device name the guest does not have as rail 0 (rxe9), as a typo in extras
rdma_devices would give: a fault for tests/test_softroce.py; the perftest check must fail within seconds,
naming the device, and a check that does not use it must pass."""

from ibrepro import rfmconfig
from ibrepro.softroce import config as softroce

system = softroce.system()
for partition in system['partitions']:
    partition['extras']['rdma_devices'] = ['rxe9', 'rxe1']

site_configuration = rfmconfig.site_configuration(
    systems=[system], environments=[softroce.environment(), softroce.mvapich2_environment(['softroce'])])
