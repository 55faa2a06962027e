"""Errors a user can act on. The CLI prints them as one line and exits non-zero,
without a traceback; anything else is a bug and keeps its traceback."""


class UserError(Exception):
    """Bad input or an environment that cannot run the request (no root, no MPI, ...)."""


class ConfigError(UserError):
    """A cluster file that does not validate; the message names file, line and field."""

    def __init__(self, path: str, line: int | None, field: str, problem: str):
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {field}: {problem}")
        self.path, self.line, self.field, self.problem = path, line, field, problem
