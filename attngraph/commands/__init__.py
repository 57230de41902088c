"""CLI subcommands; every module here registers its commands on ``attngraph.cli.main``.

The bounds shared by the commands' options live here, in a module that imports
nothing of the CLI, so that any command module can be imported first."""

#: Bounds of a compile or export's test run: a seed torch takes, and sizes that fit
#: a shape check (a larger forward belongs in a benchmark or in training).
MAX_SEED = 2**63 - 1
MAX_BATCH = 256
MAX_LENGTH = 4096
