"""A small FTP server on loopback for tests: passive mode, anonymous login, files from a
dict, and the ways a server goes wrong (a refused login, a transfer that never comes).

Each control connection is logged (monotonic arrival time, then the commands it sent),
so a test can judge the gaps between requests to the server as it saw them. Bounded:
every socket has a timeout and the accept loop ends after ``lifetime`` seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Session:
    """One control connection: when it arrived and the commands it sent."""

    arrived: float
    commands: list[str] = field(default_factory=list)

    @property
    def retrieved(self) -> str | None:
        for command in self.commands:
            if command.startswith("RETR "):
                return command[5:]
        return None


class FtpServer:
    """``files``: path -> bytes (a missing path answers 550). ``stall``: paths whose RETR
    is never answered (the connection stays open until the client gives up).
    ``broken``: paths whose RETR fails with 451 (Scrapy's handler answers 503).
    ``refuse_login``: every login answered 530."""

    def __init__(self, files: dict[str, bytes], *, stall: frozenset[str] = frozenset(),
                 broken: frozenset[str] = frozenset(), refuse_login: bool = False, lifetime: float = 120.0) -> None:  # fmt: skip
        self.files = files
        self.stall = stall
        self.broken = broken
        self.refuse_login = refuse_login
        self.lifetime = lifetime
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.sessions: list[Session] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self) -> FtpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()

    def url(self, path: str) -> str:
        return f"ftp://127.0.0.1:{self.port}{path}"

    def _accept_loop(self) -> None:
        deadline = time.monotonic() + self.lifetime
        while not self.stopping.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            session = Session(time.monotonic())
            with self.lock:
                self.sessions.append(session)
            threading.Thread(target=self._serve, args=(conn, session), daemon=True).start()

    def _serve(self, conn: socket.socket, session: Session) -> None:
        conn.settimeout(30)
        data_listener: socket.socket | None = None
        try:
            with conn, conn.makefile("rb") as lines:
                conn.sendall(b"220 ready\r\n")
                for _ in range(50):  # bounded: a client sends a handful of commands
                    raw = lines.readline()
                    if not raw:
                        return
                    command = raw.decode("latin-1").strip()
                    with self.lock:
                        session.commands.append(command)
                    verb, _, argument = command.partition(" ")
                    verb = verb.upper()
                    if verb == "USER":
                        conn.sendall(b"530 Login incorrect.\r\n" if self.refuse_login
                                     else b"331 Password please.\r\n")  # fmt: skip
                    elif verb == "PASS":
                        conn.sendall(b"230 Logged in.\r\n")
                    elif verb == "PASV":
                        data_listener = socket.create_server(("127.0.0.1", 0))
                        data_listener.settimeout(10)
                        port = data_listener.getsockname()[1]
                        conn.sendall(f"227 Entering Passive Mode (127,0,0,1,{port >> 8},"
                                     f"{port & 255}).\r\n".encode())  # fmt: skip
                    elif verb == "RETR":
                        self._retrieve(conn, data_listener, argument)
                    elif verb == "QUIT":
                        conn.sendall(b"221 Bye.\r\n")
                        return
                    else:
                        conn.sendall(b"200 OK.\r\n")
        except OSError:
            return
        finally:
            if data_listener is not None:
                data_listener.close()

    def _retrieve(self, conn: socket.socket, listener: socket.socket | None, path: str) -> None:
        if path in self.stall:
            self.stopping.wait(60)  # never answers (bounded)
            return
        if path in self.broken:
            conn.sendall(b"451 Local error.\r\n")
            return
        body = self.files.get(path)
        if body is None or listener is None:
            conn.sendall(b"550 No such file.\r\n")
            return
        data, _ = listener.accept()
        with data:
            conn.sendall(b"150 Sending.\r\n")
            data.sendall(body)
        conn.sendall(b"226 Done.\r\n")
