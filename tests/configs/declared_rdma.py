"""A test system that DECLARES RDMA features this machine does not have (no device exists here).

Used to show what the verbs families do when a partition promises hardware that is not there: perftest fails
with its own "no device" report and the check says so.
"""

from ibrepro import rfmconfig

system = rfmconfig.local_system()
system.update(name='declared-rdma', descr='one node that claims a dual-port RoCE HCA it does not have')
partition = system['partitions'][0]
partition.update(features=['mpi', 'shm', 'nodes1', 'roce', 'dual-port'], environs=['system'])
partition['extras'] = {**partition['extras'], 'rdma_devices': ['rxe_a', 'rxe_b']}

site_configuration = rfmconfig.site_configuration(systems=[system],
                                                  environments=[rfmconfig.system_environment()])
