"""The S3 signing against AWS's documented example (pure), and the store's conditional PUT and hash
checks against the real MinIO (skipped when none answers)."""

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest

from dartflow_vlm.store import (
    EMPTY_SHA256,
    CorruptObjectError,
    ObjectNotFoundError,
    ObjectStore,
    S3Settings,
    StorageUnavailableError,
    sign_v4,
)


def test_signature_v4_matches_the_aws_example() -> None:
    # "Example: GET Object" of the AWS S3 Signature Version 4 documentation.
    headers = sign_v4(
        method="GET",
        host="examplebucket.s3.amazonaws.com",
        path="/test.txt",
        query={},
        headers={"range": "bytes=0-9"},
        payload_sha256=EMPTY_SHA256,
        access_key="AKIAIOSFODNN7EXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region="us-east-1",
        now=dt.datetime(2013, 5, 24, tzinfo=dt.UTC),
    )
    assert headers["authorization"].endswith(
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_an_external_endpoint_needs_credentials() -> None:
    with pytest.raises(ValueError, match="S3_ACCESS_KEY"):
        S3Settings.from_env({"S3_ENDPOINT": "https://s3.example.com"})


@pytest.fixture
def store() -> Iterator[ObjectStore]:
    s = ObjectStore(S3Settings.from_env(), f"pytest-store-{uuid.uuid4().hex[:10]}")
    try:
        s.ensure_bucket()
    except StorageUnavailableError as err:
        pytest.skip(f"no MinIO: {err}")
    yield s
    s.remove_prefix("")
    s.remove_bucket()


def test_conditional_put_hash_checks_and_listing(store: ObjectStore) -> None:
    assert store.put_if_absent("a/v=1/claim.json", b'{"a": 1}')
    assert not store.put_if_absent("a/v=1/claim.json", b'{"a": 2}')
    assert store.get_bytes("a/v=1/claim.json") == b'{"a": 1}'
    with pytest.raises(CorruptObjectError, match="does not match"):
        store.get_bytes("a/v=1/claim.json", "0" * 64)
    with pytest.raises(ObjectNotFoundError, match="a/missing"):
        store.get_bytes("a/missing")
    assert list(store.list("a/")) == ["a/v=1/claim.json"]
    assert not store.exists("a/missing")
