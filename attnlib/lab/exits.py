"""The command line's name and exit codes, shared by `attnlib.lab.cli` (which turns the library's exceptions into
them), `attnlib.lab.commands` and `attnlib.lab.queue` (which reads a `train` child's)."""

PROG = "python -m attnlib"

EXIT_MISSING = 1  # no usable result (tables, loading)
EXIT_USAGE = 2  # bad input
# refused: another process trains the run, or `train` would replace a complete result of another configuration
# (`--force`)
EXIT_LOCKED = 3
EXIT_DIVERGED = 4
EXIT_FILES = 5  # a file-system error (read-only, full or missing folder): one line naming the path
EXIT_BUSY = 6  # the load average says the cores are shared (a timing would be wrong)
EXIT_INTERRUPTED = 130
