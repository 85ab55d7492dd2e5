"""The ``ect`` CLI, exactly as shipped, except that preflight runs only the mandatory probes.

Tests start it as a child process (``python tests/study/cli_driver.py run ...``) where the real
exit codes, signal handling and logging matter but running all ~20 s of sandbox probes for every
child would blow the suite's time budget. The probe choice is recorded in the preflight report
(``"probes": "mandatory"``) and therefore in the store header. At least one end-to-end test runs
``python -m runner`` with every probe.

With ``ECT_TEST_SPAWN_LOG=<file>`` every child process the CLI starts (``subprocess.Popen``:
the sandbox's bwrap children among them) is appended to that file as one JSON line
``{"argv": [...], "env": {...} | null}`` (``null``: the child inherits this environment), so a
test can check what reaches a child.
"""

from __future__ import annotations

from runner._entry import install_early_interrupt_handlers

install_early_interrupt_handlers()  # as the shipped entry point does, before any heavy import

import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

import runner.study  # noqa: E402
from runner.study import run_preflight  # noqa: E402

# The CLI imports the library when a command runs: patch the name it imports.
vars(runner.study)["run_preflight"] = functools.partial(run_preflight, probes="mandatory")

_SPAWN_LOG = os.environ.get("ECT_TEST_SPAWN_LOG", "")
if _SPAWN_LOG:
    _popen_init = subprocess.Popen.__init__

    def _logged_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        env = kwargs.get("env")
        entry = {"argv": [os.fsdecode(a) for a in ([args] if isinstance(args, str | bytes)
                                                   else args)],
                 "executable": (None if kwargs.get("executable") is None
                                else os.fsdecode(kwargs["executable"])),
                 "env": None if env is None else {os.fsdecode(k): os.fsdecode(v)
                                                  for k, v in env.items()}}
        with open(_SPAWN_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")  # noqa: TID251 - a test log, not a digest
        _popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = _logged_init  # type: ignore[method-assign]

from runner.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
