import socket

import pytest


def test_outside_connection_is_refused() -> None:
    with socket.socket() as s, pytest.raises(ConnectionRefusedError, match="127.0.0.1"):
        s.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed, refused before any packet


def test_loopback_is_allowed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
