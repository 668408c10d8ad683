"""The frontend's one error type and its HTTP mapping (design §7).

Every failure a client can see is an :class:`APIError`. Its ``kind`` decides the HTTP
status and the OpenAI ``type`` string, here and nowhere else, so that both frontends
(and every route) answer the same way. The body is always::

    {"error": {"message": str, "type": str, "param": str | null, "code": str | null}}

``param`` names the offending request field (a path such as ``messages[0].role``);
``code`` is a short machine-readable reason (the ``CODE_*`` constants below).
"""

from __future__ import annotations

import enum

import msgspec


class ErrorKind(enum.Enum):
    """(HTTP status, OpenAI error type) of each class of failure."""

    BAD_REQUEST = (400, "invalid_request_error")
    NOT_FOUND = (404, "not_found_error")
    METHOD_NOT_ALLOWED = (405, "invalid_request_error")
    INTERNAL = (500, "internal_error")
    UNAVAILABLE = (503, "service_unavailable_error")

    @property
    def status(self) -> int:
        return self.value[0]

    @property
    def type_name(self) -> str:
        return self.value[1]


# Reasons (the ``code`` field).
CODE_INVALID_JSON = "invalid_json"
CODE_INVALID_TYPE = "invalid_type"
CODE_MISSING_FIELD = "missing_field"
CODE_UNKNOWN_FIELD = "unknown_field"
CODE_UNSUPPORTED_FIELD = "unsupported_field"
CODE_INVALID_VALUE = "invalid_value"
CODE_CONTEXT_LENGTH = "context_length_exceeded"
CODE_TEMPLATE = "template_error"
CODE_MODEL_NOT_FOUND = "model_not_found"
CODE_ROUTE_NOT_FOUND = "route_not_found"
CODE_METHOD_NOT_ALLOWED = "method_not_allowed"
CODE_ENGINE_DEAD = "engine_dead"
CODE_ENGINE_ERROR = "engine_error"
CODE_SHUTTING_DOWN = "shutting_down"


class ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(msgspec.Struct):
    error: ErrorDetail


_encoder = msgspec.json.Encoder()


class APIError(Exception):
    """A failure reported to the client with ``kind``'s status and the OpenAI error body."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code

    @property
    def status(self) -> int:
        return self.kind.status

    def body(self) -> ErrorBody:
        return ErrorBody(ErrorDetail(self.message, self.kind.type_name, self.param, self.code))

    def to_json(self) -> bytes:
        return _encoder.encode(self.body())


def bad_request(message: str, param: str | None = None,
                code: str = CODE_INVALID_VALUE) -> APIError:
    return APIError(ErrorKind.BAD_REQUEST, message, param=param, code=code)


def engine_dead(reason: str) -> APIError:
    return APIError(ErrorKind.UNAVAILABLE, f"the engine is not available: {reason}",
                    code=CODE_ENGINE_DEAD)
