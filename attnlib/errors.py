"""The one exception type for bad user input: it names the parameter and the allowed values."""


class ConfigError(ValueError):
    """Invalid user-facing parameter. The message names the parameter and what is allowed."""

    def __init__(self, parameter: str, value, allowed):
        self.parameter, self.value, self.allowed = parameter, value, allowed
        super().__init__(f"{parameter}: got {value!r}; allowed: {allowed}")


def with_path(err: OSError, path) -> OSError:
    """``err`` (a failed write: full disk, read-only folder) as the same OSError subclass naming ``path``,
    the file the caller meant to write, rather than a temporary file or nothing."""
    return type(err)(err.errno, err.strerror or str(err), str(path))
