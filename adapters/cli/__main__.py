"""`python -m adapters.cli`: the command line."""

from adapters.cli import main

main()
