"""The errors mci reports, as Python exceptions: RuntimeErrors, as torch's own."""


class MciError(RuntimeError):
    """An error reported by mci; the text says what went wrong and what to do."""


class ConfigError(MciError):
    pass


class TimeoutError(MciError):  # noqa: A001 - mci's name; subclasses RuntimeError as torch's errors do
    """An operation did not complete within the group's timeout; the text
    carries mci's hang report (which rank never arrived)."""


class PeerError(MciError):
    """A peer died or left the job."""


class MismatchError(MciError):
    """The ranks called different operations (or the same one differently)."""


for _cls in (MciError, ConfigError, TimeoutError, PeerError, MismatchError):
    _cls.__module__ = "mci_torch"  # as users import them
