"""ect-runner: Evidence-Carrying Termination and the sandboxed closed-loop study runner.

Subpackages, each importing only from those before it (tests/test_layering.py checks it)::

    canonical -> ect -> worlds -> sandbox -> store -> providers -> control
      -> integrations -> policies -> loop -> study -> analysis -> view -> cli

``runner.integrations`` (ECT adapters for agent frameworks) imports only canonical, ect and
control; its framework modules import their SDK only when used.

``runner.errors`` holds the single exception root and is importable from every layer.
"""

__version__ = "0.1.0"
