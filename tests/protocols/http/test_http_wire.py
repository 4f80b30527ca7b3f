"""The request writer, pure: what it writes parses back (llhttp's request parser) into exactly the
request it was given, and what would not is refused before anything is written."""

from __future__ import annotations

import httptools
import pytest
from ceprotocols.http.wire import RequestError, request_head, target_of
from hypothesis import given
from hypothesis import strategies as st

TARGET = target_of("http://127.0.0.1:8080/in?x=1")


class _Parsed:
    def __init__(self, data: bytes) -> None:
        self.headers: list[tuple[str, str]] = []
        self.url = b""
        self.complete = False
        parser = httptools.HttpRequestParser(self)
        parser.feed_data(data)
        self.method = parser.get_method().decode()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode(), value.decode()))

    def on_message_complete(self) -> None:
        self.complete = True


def test_the_head_holds_the_request_as_given() -> None:
    head = request_head("POST", TARGET, {"ce-id": "1", "x-tab": "a\tb", "x-text": "ünï"}, 4)
    parsed = _Parsed(head + b"body")
    assert parsed.complete
    assert (parsed.method, parsed.url) == ("POST", b"/in?x=1")
    assert parsed.headers == [
        ("ce-id", "1"),
        ("x-tab", "a\tb"),
        ("x-text", "ünï"),
        ("Host", "127.0.0.1:8080"),
        ("User-Agent", "ceprotocols"),
        ("Content-Length", "4"),
    ]


def test_a_given_host_and_agent_replace_the_transports_and_the_default_port_is_left_out() -> None:
    head = request_head("PUT", target_of("https://example.com/"), {"host": "other", "User-Agent": "u"}, 0)
    assert head == b"PUT / HTTP/1.1\r\nhost: other\r\nUser-Agent: u\r\nContent-Length: 0\r\n\r\n"
    assert target_of("https://[::1]/p").authority == "[::1]"


@pytest.mark.parametrize(
    ("method", "headers", "words"),
    [
        ("POST", {"x": "a\rb"}, "control character"),
        ("POST", {"x": "a\nb"}, "control character"),
        ("POST", {"x": "a\x0bb"}, "control character"),
        ("POST", {"x": "a\x7f"}, "control character"),
        ("POST", {"x\r\ny": "v"}, "control character"),
        ("POST", {"x y": "v"}, "not a token"),
        ("POST", {"x:y": "v"}, "not a token"),
        ("PO ST", {}, "not a token"),
        ("HEAD", {}, "HEAD"),
        ("POST", {"Content-Length": "1"}, "written by the transport"),
        ("POST", {"Transfer-Encoding": "chunked"}, "written by the transport"),
    ],
)
def test_what_cannot_be_written_is_refused(method: str, headers: dict[str, str], words: str) -> None:
    with pytest.raises(RequestError, match=words):
        request_head(method, TARGET, headers, 0)


@pytest.mark.parametrize("url", ["ftp://h/", "http://", "http://h:99999/", "/relative"])
def test_unusable_urls_are_refused(url: str) -> None:
    with pytest.raises(RequestError, match="not a usable"):
        target_of(url)


def test_a_paths_control_characters_and_spaces_travel_encoded_or_dropped() -> None:
    # (yarl drops CR, LF and tab from a URL, as WHATWG URL parsing does)
    assert target_of("http://h/a\x00b c\r\n?q=1 2").path == "/a%00b%20c?q=1+2"


_NAMES = st.text(st.characters(codec="latin-1"), min_size=1, max_size=12)
_VALUES = st.text(st.characters(codec="utf-8"), max_size=20)


@given(st.dictionaries(_NAMES, _VALUES, max_size=6))
def test_any_headers_are_written_exactly_or_refused(headers: dict[str, str]) -> None:
    """Property: whatever the caller's headers, the written head parses back into exactly those
    headers (plus the transport's own), or nothing is written at all."""
    try:
        head = request_head("POST", TARGET, headers, 0)
    except RequestError:
        return
    parsed = _Parsed(head)
    assert parsed.complete
    assert parsed.headers[: len(headers)] == list(headers.items())
    given = {n.lower() for n in headers}
    own = [n for n in ("Host", "User-Agent") if n.lower() not in given] + ["Content-Length"]
    assert [n for n, _ in parsed.headers[len(headers) :]] == own
