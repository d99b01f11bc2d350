"""The results side of attnlib (issue 32): reading saved runs, never training them.

attnlib.results.load      read and check a run folder (status, metrics, provenance, fingerprint); RunResult, Runs
attnlib.results.config    a run's folder and configuration (run_dir, run_config, the fingerprint)
attnlib.results.validate  what a saved result may hold (results are untrusted input)
attnlib.results.store     reading result files safely (no links, bounded), checksums
attnlib.results.tables    the one results table (CLI and book), seed statistics, Table 1 and Table 3
attnlib.results.timing    saved timing reports read back (Table 3's wall times), never measured here

Nothing here imports the trainer (attnlib.train), data loading (attnlib.data) or the lab (attnlib.lab).
"""
