"""CLI subcommands; every module here registers its commands on ``attngraph.cli.main``."""
