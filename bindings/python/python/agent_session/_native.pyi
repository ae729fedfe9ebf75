from typing import Awaitable

class NativeError(Exception):
    """A store error; ``args[0]`` is its problem document as JSON."""

class NativeStore:
    @staticmethod
    def open(url: str) -> Awaitable[NativeStore]: ...
    def call(self, op: str, args: str) -> Awaitable[str]: ...
    @property
    def backend(self) -> str: ...
