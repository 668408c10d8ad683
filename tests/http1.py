"""A raw HTTP/1.1 client over one socket, for the tests of kept-alive connections
(tests/server/test_keep_alive.py, tests/e2e/test_keep_alive.py): a request's head and body
can go out in separate writes with a pause between (so that the server answers before the
body has arrived, as it may with any client), and every answer is read off the same
connection, so a connection the server dropped shows as an error, never as a silent
reconnect."""

from __future__ import annotations

import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit


class Dropped(Exception):
    """The server closed the connection without answering the request."""


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # names lower-case
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def closes(self) -> bool:
        """The answer says the server closes the connection after it."""
        return self.headers.get("connection", "").lower() == "close"


class Connection:
    """One kept-alive connection to ``host:port``."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def request(self, method: str, path: str, body: Any = None, *,
                pause: float = 0.0, headers: dict[str, str] | None = None) -> Answer:
        """Sends a request (``body``: JSON, or bytes as they are) and reads its answer. With
        ``pause`` the head goes out first and the body that many seconds later."""
        data = body if isinstance(body, bytes) else (
            b"" if body is None else json.dumps(body).encode())
        lines = [f"{method} {path} HTTP/1.1", "host: localhost",
                 f"content-length: {len(data)}"]
        if body is not None:
            lines.append("content-type: application/json")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        try:
            if pause and data:
                self.sock.sendall(head)
                time.sleep(pause)
                self.sock.sendall(data)
            else:
                self.sock.sendall(head + data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise Dropped(f"the server closed the connection: {exc}") from None
        return self._answer()

    def _fill(self) -> None:
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise Dropped("the server closed the connection")
        self._buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._fill()
        line, _, self._buf = self._buf.partition(b"\r\n")
        return line

    def _take(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _answer(self) -> Answer:
        status_line = self._line()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int(self._line().split(b";")[0], 16):
                body += self._take(size)
                self._take(2)
            self._take(2)
        else:
            body = self._take(int(headers.get("content-length", "0")))
        return Answer(status, headers, body)


def connect(url: str) -> Connection:
    """A connection to the server at ``url`` (``http://HOST:PORT``)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None, url
    return Connection(parts.hostname, parts.port)


def closed(conn: Connection) -> bool:
    """Whether the server has closed ``conn`` (nothing more to read, or a reset)."""
    try:
        return conn.sock.recv(1) == b""
    except ConnectionResetError:
        return True
