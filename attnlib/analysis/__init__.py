"""The analysis of saved results (issue 32): the claims ledger (claims, rules), the statistics (stats: Welch,
Holm, the paired test), the published figures (literature) and the plan of the runs they read (plan). It reads runs through `attnlib.results` only:
nothing here imports the trainer, data loading or the lab."""
