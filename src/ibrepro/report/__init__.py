"""``ibrepro report``: this system beside the papers, its own history and its link limit.

Reads sessions from ReFrame's results database (default: the latest; ``--sessions``, ``--last``, ``--since``) or
JSON run reports (``--report``): the selected sessions' whole reports, and the history's values from the values
index beside the database (``ibrepro results``: each session extracted once). It writes, per system,
``reports/<system>/<timestamp>/index.html`` (one self-contained page: inline CSS, PNG figures as data URIs,
nothing fetched when viewed) and ``summary.md`` (for CI job summaries and merge-request comments). The page has

* the papers: per figure with measured data, this system's curves on the papers' axes (message size, log2) with
  the numbers the papers state (by seed) and the link limits, then a headline table: paper value, measured value,
  ratio, and the fraction of the theoretical limit of the paper's testbed and of this system's links;
* regressions: ReFrame's verdict against the system's references, and the history test of every variable and
  test case (``ibrepro.stats``: the selected sessions against the ``--window`` sessions before them), with trends;
* provenance: system, partitions, environments, topology and limits, software versions, ibrepro commit, ReFrame
  version, dates, failures, and the check families this system did not run with the reason (from the platforms
  the sessions recorded, or the configuration given with ``-C``: never the file a session names).

What cannot be read (a session that is not a run report, a malformed test case or field, a value outside its
metric's domain such as a stored ``inf``) is left out with one line naming the session, test case and field.

``--nightly`` also prints the night's verdict (:mod:`ibrepro.verdict`: regressions with change, interval and q;
suspects a confirmation cleared; test cases too noisy to judge) and exits with its status:

  0  judged, no regression
  1  a test case regressed (confirmed by its re-run; or flagged where no confirmation ran)
  2  could not judge: nothing to report on, unreadable references or data, a crash of the report itself, or the
     third inconclusive night in a row
  3  inconclusive: a test case was too noisy to judge this night (and its confirmation too), nothing regressed

``ibrepro nightly`` runs the checks, this test, the confirmation of the suspects, and this test again.
"""

from ..results import run_id
from .model import build
from .provenance import LABEL_EMULATED, LABEL_LOCAL
from .render import write
from .selection import DEFAULT_HISTORY, Inputs, ReportError, parse_since, select

# the package's API; render (HTML and Markdown of a model) is the submodule ibrepro.report.render
__all__ = ['DEFAULT_HISTORY', 'LABEL_EMULATED', 'LABEL_LOCAL', 'Inputs', 'ReportError', 'build', 'parse_since',
           'run_id', 'select', 'write']
