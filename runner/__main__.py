"""``python -m runner`` is the ``ect`` command."""

from runner._entry import main

main()
