"""The argument checks every module uses, and the one parser of data specs: each raises
attnlib.errors.ConfigError naming the parameter, the value and what is allowed."""

from __future__ import annotations

from attnlib.errors import ConfigError

SYNTHETIC = "synthetic"
SYNTHETIC_SIZES = (512, 256)  # (N_TRAIN, N_TEST) of a bare "synthetic" (attnlib.data.synthetic_cifar10)


def check(ok: bool, name: str, value, allowed) -> None:
    """Raise ConfigError(name, value, allowed) unless ``ok`` (a condition the caller computed)."""
    if not ok:
        raise ConfigError(name, value, allowed)


def check_positive_int(name: str, value, minimum: int = 1, allowed: str | None = None) -> None:
    """Raise ConfigError unless ``value`` is an int (not a bool) >= ``minimum``. ``allowed`` replaces the
    message's "an integer >= MINIMUM" where a caller says more (what 0 means, for instance)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, allowed or f"an integer >= {minimum}")


def check_choice(name: str, value, allowed) -> None:
    """Raise ConfigError unless ``value`` is one of ``allowed`` (listed in the message)."""
    if value not in allowed:
        raise ConfigError(name, value, list(allowed))


def check_probability(name: str, value) -> None:
    """Raise ConfigError unless ``value`` is a number in [0, 1) (a dropout rate)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ConfigError(name, value, "a float in [0, 1)")


def check_fraction(name: str, value) -> None:
    """Raise ConfigError unless ``value`` is a number strictly between 0 and 1 (a confidence level)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1:
        raise ConfigError(name, value, "a number strictly between 0 and 1")


# ------------------------------------------------------------------------------------------ data specs
def is_synthetic(spec) -> bool:
    """Whether ``spec`` names the synthetic data set: "synthetic" or "synthetic:N_TRAIN:N_TEST"."""
    return isinstance(spec, str) and spec.split(":")[0] == SYNTHETIC


def synthetic_sizes(spec: str, allowed: str = "'synthetic' or 'synthetic:N_TRAIN:N_TEST'") -> tuple[int, int]:
    """(N_TRAIN, N_TEST) of a synthetic spec: "synthetic" (the default sizes) or "synthetic:N_TRAIN:N_TEST"
    with positive integers. Raises ConfigError("data", spec, allowed) for anything else."""
    if not is_synthetic(spec):
        raise ConfigError("data", spec, allowed)
    parts = spec.split(":")[1:]
    if not parts:
        return SYNTHETIC_SIZES
    try:
        n_train, n_test = (int(p) for p in parts)
    except ValueError:
        raise ConfigError("data", spec, allowed) from None
    if n_train < 1 or n_test < 1:
        raise ConfigError("data", spec, "'synthetic:N_TRAIN:N_TEST' with positive sizes")
    return n_train, n_test
