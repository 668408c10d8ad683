"""Where the Python servers listen (as ``rust/server/src/edge/listener/`` in vrs-rs): TCP or
a Unix socket, plain or TLS (one ``ssl.SSLContext``, loaded before anything starts). ``vrs
frontend`` binds the socket the same way (cli/supervisor.py) and hands the fd to vrs-rs; the
connections on it: server/edge/listener/conn.py. Behaviour: docs/api.md, "TLS and Unix
sockets".
"""

from __future__ import annotations

import os
import socket
import ssl
import stat

from server.edge.listener.conn import LISTEN_BACKLOG
from server.http_args import HttpArgs


class ListenError(RuntimeError):
    """The HTTP listener cannot be set up (its message says what to change)."""


# ---------------------------------------------------------------- TLS


def ssl_context(http: HttpArgs) -> ssl.SSLContext | None:
    """The server's TLS context, None for plain HTTP; raises ListenError naming the file."""
    if http.ssl_certfile is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(http.ssl_certfile, http.ssl_keyfile)
    except (OSError, ssl.SSLError) as exc:
        key = f" with key {http.ssl_keyfile}" if http.ssl_keyfile else ""
        raise ListenError(f"cannot load the TLS certificate {http.ssl_certfile}{key}: "
                          f"{_reason(exc)}; pass a PEM certificate chain and its private "
                          "key") from None
    if http.ssl_ca_certs is not None:
        try:
            context.load_verify_locations(cafile=http.ssl_ca_certs)
        except (OSError, ssl.SSLError) as exc:
            raise ListenError(f"cannot load the CA certificates {http.ssl_ca_certs}: "
                              f"{_reason(exc)}; pass a PEM file of CA certificates") from None
    context.verify_mode = ssl.VerifyMode(http.ssl_cert_reqs)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _reason(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError) or not exc.strerror:
        return str(exc)
    return exc.strerror


# ---------------------------------------------------------------- binding


def bind_tcp(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (IPv4 or IPv6, whichever host resolves to);
    raises OSError."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def _remove_stale(path: str) -> None:
    """Unlink a socket file nobody listens on; raise ListenError for a live one or a file
    that is not a socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ListenError(f"--uds {path} exists and is not a socket; remove it or pick "
                          "another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        pass  # stale: its server is gone
    except OSError as exc:
        raise ListenError(f"--uds {path}: cannot tell whether a server listens there "
                          f"({exc.strerror or exc})") from None
    else:
        raise ListenError(f"--uds {path}: another server is listening on it; stop it or "
                          "pick another path")
    finally:
        probe.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def bind_unix(path: str) -> socket.socket:
    """A listening Unix socket at ``path`` (a stale socket file is replaced, a live one is
    an error); raises ListenError."""
    _remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on unix:{path}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


class Listener:
    """The bound HTTP socket and how it is announced; ``close`` also removes our socket
    file (only while it is still ours: the same inode)."""

    def __init__(self, sock: socket.socket, host: str, tls: bool, uds: str | None) -> None:
        self.sock = sock
        self.host = host
        self.tls = tls
        self.uds = uds
        self._inode = os.stat(uds).st_ino if uds is not None else None

    def address(self) -> str:
        """``https://host:port``, ``http://host:port`` or ``unix:PATH``."""
        if self.uds is not None:
            return f"unix:{self.uds}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()
        remove_socket_file(self.uds, self._inode)


def remove_socket_file(path: str | None, inode: int | None) -> None:
    """Unlink the Unix socket at ``path`` if it is still the one with ``inode``."""
    if path is None:
        return
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


def bind_listener(http: HttpArgs, host: str, port: int) -> Listener:
    """Bind where ``http`` says (``uds`` or host:port); raises ListenError."""
    if http.uds is not None:
        return Listener(bind_unix(http.uds), host, http.ssl_certfile is not None, http.uds)
    try:
        sock = bind_tcp(host, port)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return Listener(sock, host, http.ssl_certfile is not None, None)
