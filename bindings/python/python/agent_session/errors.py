"""The store's errors as Python exceptions, one class per error kind."""

from __future__ import annotations

import json
from typing import Any


class SessionError(Exception):
    """A store error. ``kind`` names it (``not_found``, ``conflict``, ...),
    ``problem`` holds its fields (the problem document of the HTTP API)."""

    kind = "backend"

    def __init__(self, message: str, problem: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.problem: dict[str, Any] = problem or {}

    @property
    def detail(self) -> str:
        """The error's message with its causes."""
        return str(self.problem.get("detail", self.args[0] if self.args else ""))


class NotFoundError(SessionError, LookupError):
    """The session does not exist, has expired, or belongs to another owner."""

    kind = "not_found"


class AlreadyExistsError(SessionError):
    """A create named an id that is taken."""

    kind = "already_exists"


class ExpiredError(SessionError):
    """A write to a session whose expiry has passed."""

    kind = "expired"


class SessionEndedError(SessionError):
    """A write to an ended session (reopen it first)."""

    kind = "session_ended"


class QuotaExceededError(SessionError):
    """The write would pass a quota of the store; nothing was written."""

    kind = "quota_exceeded"


class ConflictError(SessionError):
    """A version check failed: someone else wrote in between."""

    kind = "conflict"


class InvalidInputError(SessionError, ValueError):
    """The store will not take this input; ``problem["field"]`` names it."""

    kind = "invalid_input"


class UnsupportedError(SessionError):
    """The store lacks the capability (e.g. ranked search)."""

    kind = "unsupported"


class BackendError(SessionError):
    """The storage engine failed in a way retrying will not fix."""

    kind = "backend"


class SerializationError(SessionError):
    """Stored data could not be decoded (a corrupt row)."""

    kind = "serialization"


class UnavailableError(SessionError):
    """The store is unreachable or busy; the same call may succeed later."""

    kind = "unavailable"


class EncryptionError(SessionError):
    """Encrypted data does not open with the keyring."""

    kind = "encryption"


class UnauthorizedError(SessionError):
    """A served store refused the API key."""

    kind = "unauthorized"


_BY_KIND = {
    cls.kind: cls
    for cls in (
        NotFoundError,
        AlreadyExistsError,
        ExpiredError,
        SessionEndedError,
        QuotaExceededError,
        ConflictError,
        InvalidInputError,
        UnsupportedError,
        BackendError,
        SerializationError,
        UnavailableError,
        EncryptionError,
        UnauthorizedError,
    )
}


def from_native(error: Exception) -> SessionError:
    """The exception of a native error (its argument is the problem as JSON)."""
    try:
        problem = json.loads(error.args[0])
    except (IndexError, TypeError, ValueError):
        return BackendError(str(error))
    cls = _BY_KIND.get(problem.get("kind"), BackendError)
    return cls(problem.get("detail", ""), problem)
