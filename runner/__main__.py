"""``python -m runner`` is the ``ect`` command."""

from runner.cli import main

main()
