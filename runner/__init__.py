"""ect-runner: Evidence-Carrying Termination and the sandboxed closed-loop study runner.

Subpackages, each importing only from those before it (DESIGN §2)::

    canonical -> ect -> worlds -> sandbox -> store -> providers -> control
      -> policies -> loop -> study -> analysis -> view -> cli

``runner.errors`` holds the single exception root and is importable from every layer.
"""

__version__ = "0.1.0"
