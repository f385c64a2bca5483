"""moto's S3 server on a free port of 127.0.0.1, in a thread of this process."""

from __future__ import annotations

import socket
import threading
import urllib.request
import uuid
from typing import Any
from xml.etree import ElementTree

from resumable.stores.blobs import S3Blobs


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class MotoS3:
    """moto's S3 server on a free port of 127.0.0.1, which a test can stop and restart.

    moto keeps its buckets in the process, so objects outlive a stop: a restart
    is the same endpoint coming back.
    """

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        self._server = make_server(
            "127.0.0.1",
            self.port,
            DomainDispatcherApplication(create_backend_app),
            threaded=True,
            request_handler=MotoRequestHandler,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Close the port: connections are refused until `start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def create_bucket(self) -> str:
        name = f"resumable-{uuid.uuid4().hex[:12]}"
        # an http:// URL this class made, never a user's
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            assert response.status == 200
        return name

    def multipart_uploads(self, bucket: str) -> list[str]:
        """The upload ids of the bucket's incomplete multipart uploads (ListMultipartUploads)."""
        url = f"{self.endpoint}/{bucket}?uploads"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310
            tree = ElementTree.fromstring(response.read())  # noqa: S314 - moto's own reply
        return [
            element.text or ""
            for element in tree.iter()
            if element.tag.rsplit("}", 1)[-1] == "UploadId"
        ]

    @property
    def config(self) -> dict[str, str]:
        """obstore settings for this endpoint (moto takes any credentials)."""
        return {
            "endpoint": self.endpoint,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        }

    def blobs(self, bucket: str, prefix: str = "payloads", **options: Any) -> S3Blobs:
        return S3Blobs(f"s3://{bucket}/{prefix}", config=self.config, **options)
