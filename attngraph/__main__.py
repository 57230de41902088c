"""``python -m attngraph``: the same as the ``attngraph`` command."""

from attngraph.cli import main

if __name__ == "__main__":
    main()
