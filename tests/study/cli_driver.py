"""The ``ect`` CLI, exactly as shipped, except that preflight runs only the mandatory probes.

Tests start it as a child process (``python tests/study/cli_driver.py run ...``) where the real
exit codes, signal handling and logging matter but running all ~20 s of sandbox probes for every
child would blow the suite's time budget. The probe choice is recorded in the preflight report
(``"probes": "mandatory"``) and therefore in the store header. At least one end-to-end test runs
``python -m runner`` with every probe.
"""

from __future__ import annotations

import functools

import runner.cli._study as study_cli
from runner.study import run_preflight

study_cli.run_preflight = functools.partial(run_preflight, probes="mandatory")  # type: ignore[assignment]

from runner.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
