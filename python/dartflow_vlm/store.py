"""The trainer's view of MinIO/S3: the few calls it needs, signed with AWS Signature V4 over httpx.

Why not boto3 or minio-py: neither is in the VLM lock, and the trainer needs six calls (GET, PUT,
conditional PUT, HEAD, DELETE, LIST). The semantics are those of storage/object-store.ts, so both
trainers read and write the same bytes:

- every write records the object's sha256 in `x-amz-meta-sha256` and sends it as the signed payload
  hash, so the server refuses a body altered on the way;
- every read checks the recorded sha256 (or the caller's), so a truncated or altered object is a
  CorruptObjectError naming its key, never half-read;
- `put_if_absent` is S3's conditional PUT (`If-None-Match: *`): of two writers exactly one succeeds
  (commit records, version claims);
- an unreachable server is StorageUnavailableError: retryable, unlike a missing or corrupt object.

Settings come from the same environment variables as infra/settings.ts (S3_ENDPOINT, S3_ACCESS_KEY /
S3_SECRET_KEY or their *_FILE forms, S3_BUCKET, S3_REGION; the local MinIO's dev defaults otherwise).
"""

import datetime as dt
import hashlib
import hmac
import os
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

# The local MinIO's development credentials (infra/settings.ts DEV_MINIO_USER / DEV_MINIO_PASSWORD);
# never sent to an external S3_ENDPOINT.
DEV_MINIO_USER = "dartflow"
DEV_MINIO_PASSWORD = "dartflow-dev-secret"

SHA_META = "x-amz-meta-sha256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# S3 answers 409 while another conditional write of the key is in flight: ask again once it settled.
CONDITIONAL_CONFLICT_TRIES = 5
CHUNK = 1024 * 1024


class StorageError(Exception):
    """Base of the storage errors; each names the key or the endpoint."""


class ObjectNotFoundError(StorageError):
    def __init__(self, key: str, bucket: str) -> None:
        super().__init__(f"object not found: s3://{bucket}/{key}")
        self.key = key


class CorruptObjectError(StorageError):
    """The object exists but its bytes are not what was written (truncated, altered, unparseable)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"corrupt object {key}: {reason}")
        self.key = key
        self.reason = reason


class StorageUnavailableError(StorageError):
    """The server cannot be reached: retryable (the activity fails and Temporal retries it)."""

    def __init__(self, endpoint: str, cause: object) -> None:
        super().__init__(
            f"object storage at {endpoint} is unreachable ({cause}). Start it with `npm run infra:up`, "
            "or check S3_ENDPOINT and credentials."
        )


@dataclass(frozen=True)
class S3Settings:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    region: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "S3Settings":
        e = dict(os.environ if env is None else env)

        def secret(name: str) -> str | None:
            path = e.get(f"{name}_FILE")
            if path:
                return Path(path).read_text(encoding="utf-8").strip()
            return e.get(name)

        external = bool(e.get("S3_ENDPOINT"))
        access = secret("S3_ACCESS_KEY") or secret("MINIO_ROOT_USER")
        secret_key = secret("S3_SECRET_KEY") or secret("MINIO_ROOT_PASSWORD")
        if external and not (access and secret_key):
            missing = "S3_ACCESS_KEY" if not access else "S3_SECRET_KEY"
            raise ValueError(
                f"S3_ENDPOINT={e['S3_ENDPOINT']} is set but {missing} is not: set S3_ACCESS_KEY and "
                "S3_SECRET_KEY (or *_FILE paths to files holding them); the development credentials are "
                "only for the local MinIO dartflow starts itself"
            )
        port = e.get("DARTFLOW_MINIO_PORT", "9000")
        return cls(
            endpoint=(e.get("S3_ENDPOINT") or f"http://127.0.0.1:{port}").rstrip("/"),
            access_key=access or DEV_MINIO_USER,
            secret_key=secret_key or DEV_MINIO_PASSWORD,
            bucket=e.get("S3_BUCKET", "dartflow"),
            region=e.get("S3_REGION", "us-east-1"),
        )


@dataclass(frozen=True)
class ObjectRef:
    """What storage/object-store.ts returns for a write (schemas/records.ts ObjectRefSchema)."""

    bucket: str
    key: str
    sha256: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "key": self.key, "sha256": self.sha256, "bytes": self.bytes}


def sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _quote(text: str, safe: str) -> str:
    return urllib.parse.quote(text, safe=safe)


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sign_v4(
    *,
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    payload_sha256: str,
    access_key: str,
    secret_key: str,
    region: str,
    now: dt.datetime,
) -> dict[str, str]:
    """The headers to add for AWS Signature V4 (service s3). `path` is already URI-encoded; `headers`
    are the extra headers to sign (lower-case names). Pure, so it is tested against AWS's example."""
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    signed = {**{k.lower(): v.strip() for k, v in headers.items()}, "host": host}
    signed["x-amz-content-sha256"] = payload_sha256
    signed["x-amz-date"] = amz_date
    names = sorted(signed)
    canonical_query = "&".join(f"{_quote(k, '-_.~')}={_quote(v, '-_.~')}" for k, v in sorted(query.items()))
    canonical = "\n".join(
        [
            method,
            path,
            canonical_query,
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            payload_sha256,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return {
        "x-amz-date": amz_date,
        "x-amz-content-sha256": payload_sha256,
        "authorization": (
            f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
            f"Signature={signature}"
        ),
    }


class ObjectStore:
    """One bucket on one S3 endpoint (path-style addressing, as MinIO serves it)."""

    def __init__(self, settings: S3Settings, bucket: str | None = None, timeout: float = 600.0) -> None:
        self.settings = settings
        self.bucket = bucket or settings.bucket
        self.endpoint = settings.endpoint
        parsed = urllib.parse.urlsplit(settings.endpoint)
        self._host = parsed.netloc
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))

    def close(self) -> None:
        self._client.close()

    def with_bucket(self, bucket: str) -> "ObjectStore":
        return ObjectStore(self.settings, bucket)

    # --- transport ---------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        key: str | None,
        *,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        signed_headers: dict[str, str] | None = None,
        body: bytes | IO[bytes] | None = None,
        payload_sha256: str = EMPTY_SHA256,
        stream: bool = False,
    ) -> httpx.Response:
        path = f"/{_quote(self.bucket, '')}" + (f"/{_quote(key, '/-_.~')}" if key is not None else "")
        query = query or {}
        auth = sign_v4(
            method=method,
            host=self._host,
            path=path,
            query=query,
            headers=signed_headers or {},
            payload_sha256=payload_sha256,
            access_key=self.settings.access_key,
            secret_key=self.settings.secret_key,
            region=self.settings.region,
            now=dt.datetime.now(dt.UTC),
        )
        qs = "&".join(f"{_quote(k, '-_.~')}={_quote(v, '-_.~')}" for k, v in sorted(query.items()))
        url = f"{self.endpoint}{path}" + (f"?{qs}" if qs else "")
        all_headers = {**(headers or {}), **(signed_headers or {}), **auth}
        try:
            request = self._client.build_request(method, url, headers=all_headers, content=body)
            return self._client.send(request, stream=stream)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as err:
            raise StorageUnavailableError(self.endpoint, err) from err

    def _fail(self, response: httpx.Response, key: str) -> StorageError:
        if response.status_code == 404:
            return ObjectNotFoundError(key, self.bucket)
        text = response.read().decode(errors="replace")[:500]
        return StorageError(f"s3://{self.bucket}/{key}: {response.status_code} {text}")

    # --- bucket ------------------------------------------------------------------------------------

    def ensure_bucket(self) -> None:
        """Creates the bucket if missing (idempotent; safe when several workers race)."""
        r = self._request("HEAD", None)
        if r.status_code == 200:
            return
        r = self._request("PUT", None)
        if r.status_code not in (200, 409):  # 409: BucketAlreadyOwnedByYou / BucketAlreadyExists
            raise self._fail(r, "")

    # --- objects -----------------------------------------------------------------------------------

    def exists(self, key: str) -> bool:
        r = self._request("HEAD", key)
        if r.status_code == 200:
            return True
        if r.status_code == 404:
            return False
        raise self._fail(r, key)

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> ObjectRef:
        sha = hashlib.sha256(data).hexdigest()
        r = self._request(
            "PUT",
            key,
            headers={"content-type": content_type},
            signed_headers={SHA_META: sha},
            body=data,
            payload_sha256=sha,
        )
        if r.status_code != 200:
            raise self._fail(r, key)
        return ObjectRef(self.bucket, key, sha, len(data))

    def put_if_absent(self, key: str, data: bytes, content_type: str = "application/json") -> bool:
        """Writes only if no object has this key yet (`If-None-Match: *`); False when the key was taken.
        A refused writer reads the object to learn what won (it may be its own write whose answer was
        lost)."""
        sha = hashlib.sha256(data).hexdigest()
        for attempt in range(1, CONDITIONAL_CONFLICT_TRIES + 1):
            r = self._request(
                "PUT",
                key,
                headers={"content-type": content_type, "if-none-match": "*"},
                signed_headers={SHA_META: sha},
                body=data,
                payload_sha256=sha,
            )
            if r.status_code == 200:
                return True
            if r.status_code == 412:
                return False
            if r.status_code == 409 and attempt < CONDITIONAL_CONFLICT_TRIES:
                time.sleep(0.05 * attempt)
                continue
            raise self._fail(r, key)
        raise StorageError(f"s3://{self.bucket}/{key}: conditional PUT kept conflicting")

    def put_file(self, key: str, path: Path, content_type: str = "application/octet-stream") -> ObjectRef:
        """Streams a file up (hashed first: the hash is the signed payload hash and the recorded one).
        One PUT: MinIO takes objects up to 5 TiB this way (AWS S3: 5 GiB; checkpoints shard below it)."""
        sha, size = sha256_file(path)
        with path.open("rb") as f:
            r = self._request(
                "PUT",
                key,
                headers={"content-type": content_type, "content-length": str(size)},
                signed_headers={SHA_META: sha},
                body=f,
                payload_sha256=sha,
            )
        if r.status_code != 200:
            raise self._fail(r, key)
        return ObjectRef(self.bucket, key, sha, size)

    def get_bytes(self, key: str, expected_sha256: str | None = None) -> bytes:
        """The whole object, its length and sha256 (the recorded one, or `expected_sha256`) checked."""
        r = self._request("GET", key)
        if r.status_code != 200:
            raise self._fail(r, key)
        data = r.content
        length = r.headers.get("content-length")
        if length is not None and int(length) != len(data):
            raise CorruptObjectError(key, f"truncated: read {len(data)} of {length} bytes")
        want = expected_sha256 or r.headers.get(SHA_META)
        if want:
            got = hashlib.sha256(data).hexdigest()
            if got != want:
                raise CorruptObjectError(key, f"sha256 {got[:12]}… does not match the recorded {want[:12]}…")
        return data

    def get_file(self, key: str, dest: Path, expected_sha256: str, expected_bytes: int) -> None:
        """Streams an object to `dest` through sha256; CorruptObjectError unless both match."""
        h = hashlib.sha256()
        size = 0
        r = self._request("GET", key, stream=True)
        try:
            if r.status_code != 200:
                raise self._fail(r, key)
            with dest.open("wb") as f:
                for chunk in r.iter_bytes(CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    f.write(chunk)
        finally:
            r.close()
        if size != expected_bytes or h.hexdigest() != expected_sha256:
            raise CorruptObjectError(
                key,
                f"read {size} bytes with sha256 {h.hexdigest()[:12]}…, expected {expected_bytes} bytes, "
                f"{expected_sha256[:12]}…",
            )

    def remove(self, key: str) -> None:
        r = self._request("DELETE", key)
        if r.status_code not in (200, 204, 404):
            raise self._fail(r, key)

    def list(self, prefix: str) -> Iterator[str]:
        """Every key under `prefix` (ListObjectsV2, all pages)."""
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            r = self._request("GET", None, query=query)
            if r.status_code != 200:
                raise self._fail(r, prefix)
            root = ET.fromstring(r.content)
            ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
            for contents in root.iter(f"{ns}Contents"):
                key = contents.findtext(f"{ns}Key")
                if key is not None:
                    yield key
            if root.findtext(f"{ns}IsTruncated") != "true":
                return
            token = root.findtext(f"{ns}NextContinuationToken")

    def remove_prefix(self, prefix: str) -> None:
        for key in list(self.list(prefix)):
            self.remove(key)

    def remove_bucket(self) -> None:
        r = self._request("DELETE", None)
        if r.status_code not in (200, 204, 404):
            raise self._fail(r, "")
