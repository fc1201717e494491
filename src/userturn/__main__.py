"""``python -m userturn`` runs the command line."""

from userturn.cli.app import main

main()
