"""configs/softroce.py with the perftest server address of every partition set to an address nobody has
(on the subnet of the guests' rxe0 cable): a fault for tests/test_softroce.py; the client must give up
with a clear reason."""

from ibrepro import rfmconfig
from ibrepro.softroce import config as softroce

system = softroce.system()
for partition in system['partitions']:
    partition['extras']['perftest_addresses'] = ['198.51.100.99', '198.51.100.99']

site_configuration = rfmconfig.site_configuration(systems=[system], environments=[softroce.environment()])
