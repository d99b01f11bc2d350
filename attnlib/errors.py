"""The one exception type for bad user input: it names the parameter and the allowed values."""


class ConfigError(ValueError):
    """Invalid user-facing parameter. The message names the parameter and what is allowed."""

    def __init__(self, parameter: str, value, allowed):
        self.parameter, self.value, self.allowed = parameter, value, allowed
        super().__init__(f"{parameter}: got {value!r}; allowed: {allowed}")
