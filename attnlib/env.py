"""The environment variables attnlib reads, each named once here and imported where it is used."""

DATA_ENV = "ATTNLIB_DATA"  # the CIFAR-10 folder when none is given (attnlib.data, attnbook)
RESULTS_ENV = "ATTNLIB_RESULTS"  # the book's results folder (attnbook)
TRAIN_MISSING_ENV = "ATTNLIB_TRAIN_MISSING"  # train runs that are not saved yet (0 during the book build)
CHECKPOINT_SECONDS_ENV = "ATTNLIB_CHECKPOINT_SECONDS"  # seconds between checkpoints (attnlib.train)
CHROMIUM_ENV = "ATTNLIB_CHROMIUM"  # the browser `make check-book` drives (tools/bookcheck.py)
RECORD_HOST_ENV = "ATTNLIB_RECORD_HOST"  # 1: a run's provenance names the host (attnlib.lab.run)
