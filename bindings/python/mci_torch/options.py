"""pg_options for the backend "mci": mci's settings per group.

    dist.init_process_group("mci", pg_options=mci_torch.Options(algorithm="ring"))
    sub = dist.new_group([0, 1], backend="mci", pg_options=mci_torch.Options(transport="tcp"))
    dist.init_process_group("mci", pg_options=mci_torch.Options(reproducible=True))

A setting given here wins over the environment (the fallback), for this
group only; groups split from it inherit it. Names are mci's variables
(docs/env.md, "Tuning and diagnostics"); a few have keyword shortcuts. A
plain dict of settings by variable name is taken too."""

import datetime

from .errors import ConfigError

# Keyword shortcuts for the settings users set most.
_NAMED = {
    "algorithm": "MCI_ALGO",
    "transport": "MCI_TRANSPORT",
    "flight_recorder_entries": "MCI_FLIGHT_RECORDER_ENTRIES",
    "hang_report_wait_ms": "MCI_HANG_REPORT_WAIT_MS",
    # The same bits whatever the layout (docs/env.md, "Same bits"): every
    # rank of the group must give the same.
    "reproducible": "MCI_REPRODUCIBLE",
}


class Options:
    """engine: mci's backend under this group ("cpu", "gloo", "mpi"; default
    MCI_TORCH_ENGINE, else "cpu"). timeout: a timedelta that replaces the
    group's (None: the one torch gives). settings: {"MCI_ALGO": "ring", ...}.
    Keywords: algorithm, transport, flight_recorder_entries,
    hang_report_wait_ms (their variables' values, as strings or numbers),
    reproducible (True or False: MCI_REPRODUCIBLE)."""

    def __init__(self, engine=None, timeout=None, settings=None, **named):
        unknown = sorted(set(named) - set(_NAMED))
        if unknown:
            raise ConfigError(f"mci_torch.Options: unknown keyword(s) {', '.join(unknown)}; the keywords are "
                              f"{', '.join(sorted(_NAMED))}, and settings={{'MCI_...': value}} takes any setting")
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            raise ConfigError(f"mci_torch.Options: timeout must be a datetime.timedelta, got {timeout!r}")
        if timeout is not None and timeout.total_seconds() <= 0:
            raise ConfigError(f"mci_torch.Options: timeout must be positive, got {timeout}")
        self.engine = engine
        self.timeout = timeout
        self.settings = {str(k): str(v) for k, v in (settings or {}).items()}
        for k, v in named.items():
            if isinstance(v, bool):
                v = int(v)  # MCI_REPRODUCIBLE=1, not "True"
            if v is not None:
                self.settings[_NAMED[k]] = str(v)

    @classmethod
    def of(cls, pg_options):
        """pg_options as torch hands it over: None, an Options or a dict."""
        if pg_options is None:
            return cls()
        if isinstance(pg_options, cls):
            return pg_options
        if isinstance(pg_options, dict):
            return cls(settings=pg_options)
        raise ConfigError(f"pg_options for backend mci must be mci_torch.Options or a dict of mci settings, got "
                          f"{type(pg_options).__name__}")

    def __repr__(self):
        return f"mci_torch.Options(engine={self.engine!r}, timeout={self.timeout!r}, settings={self.settings!r})"
