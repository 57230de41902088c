"""Passes ``Graph -> Graph`` on the IR, one file per pass."""
