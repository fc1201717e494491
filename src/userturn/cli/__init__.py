"""The ``userturn`` command line: one module per command group, all registered on ``app``."""
