"""This machine as a one-node system whose partition names the Python its nodes have (extras ``python``): the
interpreter ``IBREPRO_TEST_NODE_PYTHON`` names (tests/test_compat.py: an EL8 node's 3.6, an EL9 node's 3.9)."""

import os

from ibrepro import rfmconfig

system = rfmconfig.local_system()
system.update(name='node-python', descr="this machine, its jobs' ibrepro code run by the nodes' own Python")
partition = system['partitions'][0]
partition['extras'] = {**partition['extras'], 'python': os.environ['IBREPRO_TEST_NODE_PYTHON']}
partition['environs'] = ['system']

site_configuration = rfmconfig.site_configuration(systems=[system], environments=[rfmconfig.system_environment()])
