"""Errors from S3 and the REST catalog are classified as on a local disk: what waiting does
not heal (access denied, unknown key, no such bucket / key, refused catalog credentials)
is permanent, typed, names the object and is raised at once; network faults, timeouts and
throttling are transient. Each error is the one PyArrow / PyIceberg really raise, against
SeaweedFS or a loopback server that answers as a struggling S3 would."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from pyarrow import fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO

from icefloe import IcebergSource
from icefloe.cli import main
from icefloe.cli.failures import EXIT_CATALOG
from icefloe.errors import CatalogAuthError, CatalogError, DataFileError, IcefloeError
from icefloe.retry import RetryPolicy, is_transient
from tests.helpers.seaweed import SECRET_KEY, SeaweedFS
from tests.helpers.tables import live_data_files, rows
from tests.objectstore.conftest import History, S3Catalog

SLOW = {"maxAttempts": "4", "retryBackoffMs": "5000"}
"""Retry options under which a retried error would take at least 5 s (the ``retries``
fixture counts the backoffs instead of waiting them)."""


@pytest.fixture
def retries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The attempts after which icefloe backed off to retry (every retry path asks
    :meth:`RetryPolicy.delay_s` for its wait; here it waits nothing and is counted)."""
    attempts: list[int] = []

    def counted(self: RetryPolicy, attempt: int) -> float:
        attempts.append(attempt)
        return 0.0

    monkeypatch.setattr(RetryPolicy, "delay_s", counted)
    return attempts


def _s3(seaweed: SeaweedFS, **overrides: str) -> pafs.S3FileSystem:
    from icefloe.state.object_store import s3_filesystem

    return s3_filesystem({**seaweed.s3_properties(), **overrides})


def _raised(call: Callable[[], object]) -> OSError:
    with pytest.raises(OSError) as info:
        call()
    return info.value


def _read(s3: pafs.FileSystem, path: str) -> Callable[[], object]:
    return lambda: s3.open_input_stream(path).read()


def test_seaweedfs_refusals_and_missing_objects_are_permanent(seaweed: SeaweedFS) -> None:
    good = _s3(seaweed)
    path = f"{seaweed.bucket}/errors/object"
    with good.open_output_stream(path) as out:
        out.write(b"x")
    cases = {
        "SIGNATURE_DOES_NOT_MATCH|ACCESS_DENIED": _read(
            _s3(seaweed, **{"s3.secret-access-key": "wrong"}), path),
        "ACCESS_DENIED|INVALID_ACCESS_KEY_ID": _read(
            _s3(seaweed, **{"s3.access-key-id": "nobody"}), path),
        "does not exist": _read(good, f"{seaweed.bucket}/errors/missing"),
        "does not exist ": _read(good, "no-such-bucket-icefloe/key"),
    }
    for expected, call in cases.items():
        exc = _raised(call)
        assert any(part in str(exc) for part in expected.strip().split("|")), str(exc)
        assert not is_transient(exc), str(exc)
    # the same through PyIceberg's FileIO (which translates only some of them)
    io = PyArrowFileIO({**seaweed.s3_properties(), "s3.secret-access-key": "wrong"})
    exc = _raised(lambda: io.new_input(f"s3://{path}").open().read())
    assert not is_transient(exc), str(exc)


class _StrugglingS3(socketserver.BaseRequestHandler):
    """Answers every request as a throttling (503 SlowDown), resetting or hanging S3 would."""

    mode = "slowdown"

    def handle(self) -> None:
        request = self.request.recv(65536)
        if self.mode == "reset":  # RST instead of an answer
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            self.request.close()
            return
        if self.mode == "hang":
            time.sleep(2)
            return
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                b"<Message>Please reduce your request rate.</Message></Error>")
        head = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        self.request.sendall(head + (b"" if request.startswith(b"HEAD") else body))


@pytest.fixture
def struggling() -> Iterator[tuple[str, type[_StrugglingS3]]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _StrugglingS3)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _StrugglingS3
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("mode", "marker"), [
    ("slowdown", "SLOW_DOWN"), ("reset", "Connection reset"), ("hang", "Timeout was reached")])
def test_throttling_resets_and_timeouts_are_transient(
        struggling: tuple[str, type[_StrugglingS3]], mode: str, marker: str) -> None:
    endpoint, handler = struggling
    handler.mode = mode
    s3 = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http",
                           access_key="a", secret_key="b", region="us-east-1",
                           request_timeout=0.5, connect_timeout=0.5,
                           retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    exc = _raised(lambda: s3.get_file_info(pafs.FileSelector("bucket/prefix")))
    assert marker in str(exc)
    assert is_transient(exc), str(exc)


def _bad_s3_options(case: S3Catalog) -> dict[str, str]:
    return case.options(**{"catalog.s3.secret-access-key": "wrong-" + SECRET_KEY}, **SLOW)


def test_wrong_s3_secret_fails_at_once_naming_the_object(s3_catalog: S3Catalog,
                                                         history: History,
                                                         retries: list[int]) -> None:
    with pytest.raises((CatalogError, DataFileError)) as info:
        IcebergSource(history.identifier, options=_bad_s3_options(s3_catalog)).to_arrow()
    assert retries == []  # not retried (maxAttempts 4)
    message = str(info.value)
    # names the object: the manifest list's URI (REST) or the metadata file's key (SQL)
    assert "s3://" in message or ("metadata.json' in bucket" in message)
    assert "ACCESS_DENIED" in message or "SIGNATURE_DOES_NOT_MATCH" in message
    assert "wrong-" not in message and SECRET_KEY not in message and "\n" not in message
    assert not is_transient(info.value)


def test_missing_data_file_is_a_data_file_error_at_once(s3_catalog: S3Catalog,
                                                        seaweed: SeaweedFS,
                                                        retries: list[int]) -> None:
    table = s3_catalog.new_table("missing")
    table.append(rows(10))
    path = next(iter(live_data_files(table)))
    _s3(seaweed).delete_file(path.removeprefix("s3://"))
    with pytest.raises(DataFileError, match=path):
        IcebergSource(".".join(table.name()), options=s3_catalog.options(**SLOW)).to_arrow()
    assert retries == []  # not retried (maxAttempts 4)


def _rest_options(seaweed: SeaweedFS, credential: str) -> dict[str, str]:
    props = {**seaweed.rest_properties(), "credential": credential}
    return {"catalog": "swauth", **{f"catalog.{k}": v for k, v in props.items()}, **SLOW}


def test_wrong_rest_credential_is_a_catalog_auth_error_at_once(seaweed: SeaweedFS,
                                                               history: History,
                                                               retries: list[int]) -> None:
    for credential in (f"AKIAICEFLOETEST:wrong-{SECRET_KEY}", "nobody:nothing"):
        with pytest.raises(CatalogAuthError) as info:
            IcebergSource(history.identifier,
                          options=_rest_options(seaweed, credential)).to_arrow()
        assert retries == []  # not retried (maxAttempts 4)
        message = str(info.value)
        assert "'swauth' refused the credentials" in message and "\n" not in message
        assert credential.split(":")[1] not in message
        assert not is_transient(info.value) and isinstance(info.value, IcefloeError)


def test_wrong_rest_credential_in_the_cli_is_one_line(seaweed: SeaweedFS, history: History,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    args = ["plan", history.identifier]
    for key, value in _rest_options(seaweed, "nobody:s3cr3t-nothing").items():
        args += ["-o", f"{key}={value}"]
    assert main(args) == EXIT_CATALOG  # the CLI's exit status for catalog errors
    err = capsys.readouterr().err
    assert err.startswith("error: CatalogAuthError: ") and err.count("\n") == 1
    assert "s3cr3t-nothing" not in err
