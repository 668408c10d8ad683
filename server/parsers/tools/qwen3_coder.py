"""The ``qwen3_coder`` tool-call format (Qwen3-Coder model card): a scanner of XML-style calls
(``<function=NAME>``, ``<parameter=P>`` VALUE ``</parameter>`` ...), committing at the
function tag and giving each parameter, typed by :mod:`server.parsers.tools.typed`, when its
end tag arrives; the markers are :mod:`server.parsers.tools.formats`'. Mirrors
``rust/server/src/parsers/tools/qwen3_coder.rs``. Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

from typing import Any

from server.parsers.tools.formats import QWEN_BEGIN as BEGIN
from server.parsers.tools.formats import QWEN_END as END
from server.parsers.tools.formats import QWEN_FUNCTION as FUNCTION
from server.parsers.tools.formats import QWEN_FUNCTION_END as FUNCTION_END
from server.parsers.tools.formats import QWEN_PARAMETER as PARAMETER
from server.parsers.tools.formats import QWEN_PARAMETER_END as PARAMETER_END
from server.parsers.tools.json_call import skip_ws
from server.parsers.tools.scanner import Scanner, Sink, is_partial, scan_content
from server.parsers.tools.settings import ToolSettings, property_types
from server.parsers.tools.typed import json_string, schema_types, typed

CONTENT, PENDING, PARAMS, CLOSE = range(4)


class Qwen3Coder(Scanner):
    def __init__(self, sink: Sink, settings: ToolSettings) -> None:
        super().__init__(sink, settings)
        self.state = CONTENT
        self._properties: dict[str, Any] = {}
        self._first = True

    def step(self, buf: str, final: bool) -> int | None:
        if self.state == CONTENT:
            used, found = scan_content(self.sink, buf, BEGIN, final)
            if found:
                self.state = PENDING
            return used
        if self.state == PENDING:
            return self._pending(buf, final)
        if self.state == PARAMS:
            return self._params(buf, final)
        i = skip_ws(buf, 0)  # CLOSE: ws </tool_call>
        if buf.startswith(END, i):
            self.state = CONTENT
            return i + len(END)
        if not final and (i == len(buf) or is_partial(buf[i:], END)):
            return None
        self.state = CONTENT
        return i if final and i == len(buf) else 0

    def _pending(self, buf: str, final: bool) -> int | None:
        i = skip_ws(buf, len(BEGIN))
        if not buf.startswith(FUNCTION, i):
            if is_partial(buf[i:], FUNCTION):
                return self._reject(buf, len(buf)) if final else None
            return self._reject(buf, i)
        start = i + len(FUNCTION)
        end = start
        while end < len(buf) and buf[end] not in ">\n<":
            end += 1
        if end == len(buf):
            return self._reject(buf, end) if final else None
        name = buf[start:end]
        if buf[end] != ">":
            return self._reject(buf, start)
        if name not in self.sink.names:
            return self._reject(buf, end + 1)
        self.sink.open(name, "{")
        self._properties = property_types(self.settings, name)
        self._first = True
        self.state = PARAMS
        return end + 1

    def _reject(self, buf: str, at: int) -> int:
        """Not a call: content up to where it failed, the marker search resumes there."""
        at = max(at, len(BEGIN))
        self.sink.content(buf[:at])
        self.state = CONTENT
        return at

    def _params(self, buf: str, final: bool) -> int | None:
        i = skip_ws(buf, 0)
        rest = buf[i:]
        if rest.startswith(FUNCTION_END):
            self.sink.args("}")
            self.sink.close()
            self.state = CLOSE
            return i + len(FUNCTION_END)
        if rest.startswith(PARAMETER):
            # The name runs to ">"; a "<" or a line break first makes the call malformed.
            name_end = len(PARAMETER)
            while name_end < len(rest) and rest[name_end] not in ">\n<":
                name_end += 1
            if name_end == len(rest) or rest[name_end] == ">":
                value_end = (rest.find(PARAMETER_END, name_end + 1) if name_end < len(rest)
                             else -1)
                if value_end != -1:
                    name = rest[len(PARAMETER):name_end]
                    value = rest[name_end + 1:value_end]
                    value = value[1:] if value.startswith("\n") else value
                    value = value[:-1] if value.endswith("\n") else value
                    text = typed(value, schema_types(self._properties, name))
                    self.sink.args(("" if self._first else ", ") + json_string(name) + ": "
                                   + text)
                    self._first = False
                    return i + value_end + len(PARAMETER_END)
                if not final:
                    return None
                return len(buf)  # truncated inside a parameter: dropped, the call stays as is
        elif not final and (not rest or is_partial(rest, PARAMETER)
                            or is_partial(rest, FUNCTION_END)):
            return None
        if final and not rest:
            return len(buf)  # truncated between parameters
        self.sink.args("}")  # malformed: close the arguments, the rest (from the
        self.sink.close()  # whitespace before it) is content
        self.state = CONTENT
        return 0
