from typing import Any, Callable

class NativeError(Exception):
    """A store error; ``args[0]`` is its problem document as JSON."""

#: What a call on the runtime hands its outcome to, from a runtime thread:
#: ``(True, answer)`` or ``(False, problem JSON)``.
Done = Callable[[bool, Any], None]

class NativeStore:
    @staticmethod
    def open(url: str, done: Done) -> None: ...
    @staticmethod
    def open_blocking(url: str) -> NativeStore: ...
    def call(self, op: str, args: str, done: Done) -> None: ...
    @property
    def backend(self) -> str: ...
    def call_blocking(self, op: str, args: str) -> str: ...

def shutdown() -> None:
    """Stops the store's runtime for good (the package's ``atexit`` hook)."""

def after_fork_in_child() -> None:
    """Forgets the parent's runtime in a forked child."""
