"""A test case that fails on its first attempt and passes on the retry (``--max-retries=1``): what a fault that
shows every other night looks like to a nightly run with retries. The first attempt leaves a mark in
``mark_dir`` (``-S FailsOnce.mark_dir=DIR``, a directory of the test's own); the retry finds it."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable


@rfm.simple_test
class FailsOnce(rfm.RunOnlyRegressionTest):
    #: Where the first attempt leaves its mark.
    mark_dir = variable(str, value='')

    valid_systems = ['*']
    valid_prog_environs = ['*']
    executable = 'true'

    @run_before('run')
    def attempt(self):
        mark = os.path.join(self.mark_dir, 'attempted')
        self.first = not os.path.exists(mark)
        open(mark, 'w').close()

    @sanity_function
    def second_attempt(self):
        return sn.assert_false(self.first, msg='first attempt: the fault shows every other time')
