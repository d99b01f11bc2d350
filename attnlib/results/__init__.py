"""The results side of attnlib (issue 32): reading saved runs, never training them. Nothing here imports the
trainer (attnlib.train), data loading (attnlib.data) or the lab (attnlib.lab); CONTRIBUTING.md's module map
says what each module holds.
"""
