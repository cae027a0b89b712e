"""Inside the browser's sandbox: its proxy port, forwarded to the fence outside, then Chromium.

Run by bubblewrap as ``python3 -I -S forward.py PORT SOCKET CHROMIUM ARGS...`` in a network
namespace of its own (nothing but loopback): it listens on ``127.0.0.1:PORT`` there (the
``--proxy-server`` Chromium is given), hands every connection to the Unix socket ``SOCKET``
(the fence, ``bot.browser.fence``, bound into the sandbox), starts Chromium with Playwright's
pipe (descriptors 3 and 4) and exits with it. The standard library only: it runs with the
system's Python, isolated (``-I -S``), never the bot's packages.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

_CHUNK = 65_536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        outward = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            outward.connect(path)
        except OSError:
            client.close()
            outward.close()
            continue
        threading.Thread(target=_pump, args=(client, outward), daemon=True).start()
        threading.Thread(target=_pump, args=(outward, client), daemon=True).start()


def main(argv: list[str]) -> int:
    port, path, command = int(argv[0]), argv[1], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))  # before Chromium starts: its first request finds it
    listener.listen(128)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    child = subprocess.Popen(command, pass_fds=(3, 4))  # Playwright's pipe
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
