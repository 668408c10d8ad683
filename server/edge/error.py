"""The frontend's one error type and its HTTP mapping: every failure a client can see is an
:class:`APIError`, whose ``kind`` decides the HTTP status and the error ``type`` here and
nowhere else (``rust/server/src/edge/error.rs`` maps the same kinds the same way).
Behaviour: docs/api.md, "Routes".
"""

from __future__ import annotations

import enum

import msgspec

from server.edge import Send, send_json
from server.edge.metrics import Rejection


class ErrorKind(enum.Enum):
    """(HTTP status, error type) of each class of failure."""

    BAD_REQUEST = (400, "BadRequestError")
    UNAUTHORIZED = (401, "AuthenticationError")  # missing or wrong API key
    NOT_FOUND = (404, "NotFoundError")  # unknown model or route
    METHOD_NOT_ALLOWED = (405, "MethodNotAllowedError")
    PAYLOAD_TOO_LARGE = (413, "PayloadTooLargeError")
    TOO_MANY_REQUESTS = (429, "TooManyRequestsError")  # admission: server at capacity
    INTERNAL = (500, "InternalServerError")  # an engine error for one request, or our bug
    ENGINE_DEAD = (503, "ServiceUnavailableError")  # engine gone, or a request shed
    TIMEOUT = (504, "TimeoutError")  # --request-timeout expired

    def __init__(self, status: int, type_name: str) -> None:
        self.status = status
        self.type_name = type_name


class ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: int


class ErrorBody(msgspec.Struct):
    error: ErrorDetail


_encode = msgspec.json.Encoder().encode


class Dialect(enum.Enum):
    """Which API's error shape a route answers in: OpenAI's (every route but
    Anthropic's) or Anthropic's Messages API's (``/v1/messages*``: its status codes and
    ``{"type": "error", "error": {"type", "message"}}``). As ``Dialect`` in
    ``rust/server/src/edge/error/dialect.rs``."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"

    @staticmethod
    def for_path(path: str) -> Dialect:
        if path == "/v1/messages" or path.startswith("/v1/messages/"):
            return Dialect.ANTHROPIC
        return Dialect.OPENAI


# Anthropic's error type by HTTP status (its documented table); 503 is answered 529.
_ANTHROPIC_TYPES = {401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}
ANTHROPIC_OVERLOADED = 529


class AnthropicDetail(msgspec.Struct):
    type: str
    message: str


class AnthropicBody(msgspec.Struct):
    type: str
    error: AnthropicDetail


class APIError(Exception):
    """A failure reported to the client with ``kind``'s status and the OpenAI error body."""

    def __init__(self, kind: ErrorKind, message: str, param: str | None = None,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.headers = headers or []  # extra response headers (e.g. Retry-After)
        self.rejection: Rejection | None = None  # an overload refusal's /metrics reason

    @property
    def status(self) -> int:
        return self.kind.status

    def status_in(self, dialect: Dialect) -> int:
        """The HTTP status in ``dialect``: Anthropic answers an unavailable server with
        529 (overloaded), which its clients retry."""
        status = self.kind.status
        if dialect is Dialect.ANTHROPIC and status == 503:
            return ANTHROPIC_OVERLOADED
        return status

    def to_json(self, dialect: Dialect = Dialect.OPENAI) -> bytes:
        if dialect is Dialect.ANTHROPIC:
            status = self.status_in(dialect)
            kind = _ANTHROPIC_TYPES.get(
                status, "api_error" if status >= 500 else "invalid_request_error")
            message = self.message
            if (self.kind is ErrorKind.BAD_REQUEST and self.param is not None
                    and not message.startswith(self.param)):
                message = f"{self.param}: {message}"
            return _encode(AnthropicBody("error", AnthropicDetail(kind, message)))
        detail = ErrorDetail(self.message, self.kind.type_name, self.param, self.kind.status)
        return _encode(ErrorBody(detail))


RETRY_AFTER_S = 1  # seconds a client told 429 or a full queue's 503 should wait
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_S).encode())


class QueueTimeoutError(APIError):
    """A request still queued at ``--max-queue-wait``: 503 with ``Retry-After``, answered
    as a JSON error even by a stream whose head waits for the first output."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorKind.ENGINE_DEAD, message, headers=[RETRY_AFTER])
        self.rejection = Rejection.QUEUE_WAIT_TIMEOUT


def bad_request(message: str, param: str | None = None) -> APIError:
    """A 400; ``param`` names the offending field when there is one."""
    return APIError(ErrorKind.BAD_REQUEST, message, param)


def model_not_found(model: str) -> APIError:
    return APIError(ErrorKind.NOT_FOUND, f"The model `{model}` does not exist.", "model")


def engine_dead(reason: str) -> APIError:
    return APIError(ErrorKind.ENGINE_DEAD, reason)


LIMIT_FLAG = "--max-request-body"  # the option that sets the serving API's body limit


def mib(size: int) -> str:
    """``size`` bytes in MiB, exactly (a whole number, or its binary fraction in decimal)."""
    whole, frac = divmod(size, 1 << 20)
    if frac == 0:
        return str(whole)
    digits = f"{frac * 5**20:020d}".rstrip("0")  # frac / 2**20 = frac * 5**20 / 10**20
    return f"{whole}.{digits}"


def payload_too_large(limit: int, flag: str | None = None) -> APIError:
    """The 413 of a body over ``limit`` bytes, naming ``flag`` (the option that raises it)
    when the server has one; the same words as ``too_large`` in
    ``rust/server/src/edge/error.rs``."""
    size = mib(limit)
    message = f"request body is larger than the limit of {size} MiB ({size} MiB = {limit} bytes)"
    if flag is not None:
        message += f"; raise {flag}"
    return APIError(ErrorKind.PAYLOAD_TOO_LARGE, message)


async def send_error(send: Send, error: APIError,
                     extra: list[tuple[bytes, bytes]] | None = None,
                     dialect: Dialect = Dialect.OPENAI) -> None:
    await send_json(send, error.status_in(dialect), error.to_json(dialect),
                    [*error.headers, *(extra or ())])
