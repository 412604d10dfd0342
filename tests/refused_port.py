"""A loopback port where every connection is refused, for tests of an unreachable server.

A fixed port (9, discard) is refused only while nothing on the machine happens to listen there. This one is bound
by the test itself, on 127.0.0.1, and never listened on: Linux answers a connection to it with a reset (refused at
once), and while the socket stays open no other process can take the port.
"""
from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))  # bound, never listen(): reserved, and connections are refused
        yield sock.getsockname()[1]
    finally:
        sock.close()
