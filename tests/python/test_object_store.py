"""s3:// and gs:// dataset paths against real local emulators started here: moto's S3 server and
gcp-storage-emulator (both from PyPI, installed by scripts/install_deps.sh). Objects and prefixes
are fetched into the local cache and read; a changed object is fetched again; the cache serves
when the store is down; credentials come from the environment and ~/.aws files; libcurl's SigV4
signature equals botocore's; a service-account key becomes an OAuth token sent as a bearer; and
missing credentials, 403, 404 and malformed URLs are one clear error naming the URL or key."""
import base64
import hashlib
import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import run_surogate

moto_server = pytest.importorskip("moto.server", reason="scripts/install_deps.sh installs moto[server]")
gcs_emulator = pytest.importorskip("gcp_storage_emulator.server",
                                   reason="scripts/install_deps.sh installs gcp-storage-emulator")
boto3 = pytest.importorskip("boto3")


def jsonl(texts):
    return "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def s3():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    client.create_bucket(Bucket="data")
    client.put_object(Bucket="data", Key="sft/train.jsonl", Body=jsonl(["s3 train one", "s3 train two"]))
    client.put_object(Bucket="data", Key="sft/test.jsonl", Body=jsonl(["s3 test"]))
    client.put_object(Bucket="data", Key="sft/notes.csv", Body=b"not,read\n")
    client.put_object(Bucket="data", Key="single.jsonl", Body=jsonl(["single object"]))
    yield endpoint, client, server
    server.stop()


@pytest.fixture
def gcs():
    port = free_port()
    server = gcs_emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket="gdata")
    server.start()
    host = f"127.0.0.1:{port}"

    def upload(name, body):
        request = urllib.request.Request(
            f"http://{host}/upload/storage/v1/b/gdata/o?uploadType=media&name={urllib.parse.quote(name, safe='')}",
            data=body, method="POST", headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(request).read()

    upload("corpus/train-00000-of-00001.jsonl", jsonl(["gcs train"]))
    upload("corpus/validation.jsonl", jsonl(["gcs validation"]))
    upload("one.jsonl", jsonl(["gcs single"]))
    yield host, upload
    server.stop()


def base_env(tmp_path, **extra):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR", "SUROGATE_CACHE", "XDG_CACHE"))}
    env.update(HOME=str(tmp_path / "home"), SUROGATE_CACHE=str(tmp_path / "cache"))
    env.update(extra)
    return env


def s3_env(tmp_path, endpoint, **extra):
    return base_env(tmp_path, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                    AWS_ENDPOINT_URL=endpoint, **extra)


def write_config(tmp_path, tokenizers_dir, path, name="run.yaml", **dataset):
    config = tmp_path / name
    entry = "".join(f"    {key}: {value}\n" for key, value in dataset.items())
    config.write_text(f"model: {tokenizers_dir / 'qwen3'}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 64\n"
                      f"validation_split_ratio: 0\ndatasets:\n  - type: text\n    path: {path}\n{entry}")
    return config


def preview(surogate_bin, config, env):
    return run_surogate(surogate_bin, "preview", config, "-n", 10, env=env)


def test_s3_prefix_and_object_are_fetched_cached_and_refreshed(surogate_bin, tmp_path, tokenizers_dir, s3):
    endpoint, client, server = s3
    env = s3_env(tmp_path, endpoint)
    prefix = write_config(tmp_path, tokenizers_dir, "s3://data/sft", name="prefix.yaml")
    result = preview(surogate_bin, prefix, env)
    assert result.returncode == 0, result.stderr
    assert "s3 train one" in result.stdout and "s3 train two" in result.stdout and "s3 test" not in result.stdout
    bucket = tmp_path / "cache" / "objects" / "s3" / f"127.0.0.1_{endpoint.rsplit(':', 1)[1]}" / "data"
    assert sorted(p.name for p in (bucket / "sft").iterdir() if not p.name.startswith(".")) == \
        ["test.jsonl", "train.jsonl"]  # notes.csv is not a data file: not fetched
    assert (bucket / "sft" / "train.jsonl").read_bytes() == jsonl(["s3 train one", "s3 train two"])

    single = write_config(tmp_path, tokenizers_dir, "s3://data/single.jsonl", name="single.yaml")
    result = preview(surogate_bin, single, env)
    assert result.returncode == 0, result.stderr
    assert "single object" in result.stdout

    # A changed object (new ETag) is fetched again; an unchanged one is not.
    client.put_object(Bucket="data", Key="sft/train.jsonl", Body=jsonl(["s3 train changed"]))
    result = preview(surogate_bin, prefix, env)
    assert result.returncode == 0, result.stderr
    assert "s3 train changed" in result.stdout and "s3 train one" not in result.stdout
    assert "sft/train.jsonl" in result.stderr and "sft/test.jsonl" not in result.stderr  # only the changed one

    # An object deleted from the prefix leaves the cached folder too.
    client.delete_object(Bucket="data", Key="sft/test.jsonl")
    assert preview(surogate_bin, prefix, env).returncode == 0
    assert not (bucket / "sft" / "test.jsonl").exists()

    # The store down: the cached copy, with a note.
    server.stop()
    result = preview(surogate_bin, prefix, env)
    assert result.returncode == 0, result.stderr
    assert "s3 train changed" in result.stdout and "using the cached copy" in result.stderr


def test_s3_credentials_from_the_aws_files_and_missing_credentials(surogate_bin, tmp_path, tokenizers_dir, s3):
    endpoint, _, _ = s3
    config = write_config(tmp_path, tokenizers_dir, "s3://data/single.jsonl")
    missing = preview(surogate_bin, config, base_env(tmp_path, AWS_ENDPOINT_URL=endpoint))
    assert missing.returncode == 2
    assert "s3://data/single.jsonl: no AWS credentials" in missing.stderr and "AWS_ACCESS_KEY_ID" in missing.stderr

    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    (aws / "credentials").write_text("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n"
                                     "[team]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    (aws / "config").write_text(f"[profile team]\nregion = eu-west-1\nendpoint_url = {endpoint}\n")
    result = preview(surogate_bin, config, base_env(tmp_path, AWS_PROFILE="team"))
    assert result.returncode == 0, result.stderr
    assert "single object" in result.stdout


class RecordingStore:
    """A one-route HTTP server that records each request's headers and answers with a fixed
    status and body (or, for GCS, serves one object)."""

    def __init__(self, answer):
        self.requests = []
        self.answer = answer
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                store.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, body, headers = store.answer(self.path)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                store.requests.append((self.path, {"body": self.rfile.read(length).decode()}))
                body = json.dumps({"access_token": "token-from-service-account", "expires_in": 3600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_s3_requests_carry_a_sigv4_signature_botocore_agrees_with_and_403_is_clear(surogate_bin, tmp_path,
                                                                                   tokenizers_dir):
    denied = (b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
    store = RecordingStore(lambda path: (403, denied, {"Content-Type": "application/xml"}))
    try:
        env = base_env(tmp_path, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret/key+value",
                       AWS_SESSION_TOKEN="session-token", AWS_REGION="eu-central-1", AWS_ENDPOINT_URL=store.url)
        config = write_config(tmp_path, tokenizers_dir, "s3://my-bucket/folder with space/")
        result = preview(surogate_bin, config, env)
        assert result.returncode == 2
        assert "s3://my-bucket/folder with space/: access denied" in result.stderr
        assert "AccessDenied" in result.stderr and "AWS_ACCESS_KEY_ID" in result.stderr
        path, headers = store.requests[0]
        assert path == "/my-bucket/?list-type=2&prefix=folder%20with%20space%2F"
        assert headers["x-amz-security-token"] == "session-token"

        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        signed = [name for name in headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")]
        # AWS rejects requests whose x-amz-* headers are not all signed.
        assert {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"} <= set(signed), signed
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-central-1/s3/aws4_request" in headers["authorization"]
        request = AWSRequest(method="GET", url=store.url + path,
                             headers={name: headers[name] for name in signed if name != "host"})
        request.context["timestamp"] = headers["x-amz-date"]
        auth = SigV4Auth(Credentials("AKIDEXAMPLE", "secret/key+value", "session-token"), "s3", "eu-central-1")
        canonical = auth.canonical_request(request)
        string_to_sign = auth.string_to_sign(request, canonical)
        expected = auth.signature(string_to_sign, request)
        assert headers["authorization"].endswith("Signature=" + expected), (headers, canonical)
    finally:
        store.stop()


def test_gcs_prefix_and_object_through_the_emulator(surogate_bin, tmp_path, tokenizers_dir, gcs):
    host, upload = gcs
    env = base_env(tmp_path, STORAGE_EMULATOR_HOST=host)
    result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://gdata/corpus/"), env)
    assert result.returncode == 0, result.stderr
    assert "gcs train" in result.stdout and "gcs validation" not in result.stdout
    result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://gdata/corpus", split="validation"), env)
    assert result.returncode == 0, result.stderr
    assert "gcs validation" in result.stdout and "gcs train" not in result.stdout
    result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://gdata/one.jsonl"), env)
    assert result.returncode == 0, result.stderr
    assert "gcs single" in result.stdout
    upload("one.jsonl", jsonl(["gcs single, second version"]))
    result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://gdata/one.jsonl"), env)
    assert "gcs single, second version" in result.stdout

    missing = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://gdata/nothing-here"), env)
    assert missing.returncode == 2
    assert "gs://gdata/nothing-here: no object of that name" in missing.stderr
    no_bucket = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://no-such-bucket/x.jsonl"), env)
    assert no_bucket.returncode == 2
    assert "gs://no-such-bucket/x.jsonl: not found" in no_bucket.stderr


def test_gcs_service_account_key_becomes_a_bearer_token_and_missing_credentials_are_named(surogate_bin, tmp_path,
                                                                                         tokenizers_dir):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    body = jsonl(["through a service account"])
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()

    def answer(path):
        if "alt=media" in path:
            return 200, body, {}
        listing = {"items": [{"name": "data.jsonl", "size": str(len(body)), "md5Hash": md5, "etag": "e1"}]}
        return 200, json.dumps(listing).encode(), {"Content-Type": "application/json"}

    store = RecordingStore(answer)
    try:
        key_file = tmp_path / "sa.json"
        key_file.write_text(json.dumps({"type": "service_account", "client_email": "trainer@project.iam",
                                        "private_key": pem, "token_uri": store.url + "/token"}))
        env = base_env(tmp_path, STORAGE_EMULATOR_HOST=store.url, GOOGLE_APPLICATION_CREDENTIALS=str(key_file))
        result = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://bucket/data.jsonl"), env)
        assert result.returncode == 0, result.stderr
        assert "through a service account" in result.stdout
        token_request = urllib.parse.parse_qs(store.requests[0][1]["body"])
        assert token_request["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
        header, claims, signature = token_request["assertion"][0].split(".")
        padded = lambda text: base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        key.public_key().verify(padded(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(padded(claims))
        assert claims["iss"] == "trainer@project.iam" and claims["aud"] == store.url + "/token"
        assert claims["scope"] == "https://www.googleapis.com/auth/devstorage.read_only"
        assert claims["exp"] - claims["iat"] == 3600
        assert all(headers.get("authorization") == "Bearer token-from-service-account"
                   for path, headers in store.requests[1:])
    finally:
        store.stop()

    missing = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "gs://bucket/data.jsonl"), base_env(tmp_path))
    assert missing.returncode == 2
    assert "gs://bucket/data.jsonl: no Google Cloud credentials" in missing.stderr
    assert "GOOGLE_APPLICATION_CREDENTIALS" in missing.stderr


def test_malformed_urls_are_errors_naming_the_url_or_key(surogate_bin, tmp_path, tokenizers_dir):
    env = base_env(tmp_path, AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b")
    upper = preview(surogate_bin, write_config(tmp_path, tokenizers_dir, "s3://Bad_Bucket/x.jsonl"), env)
    assert upper.returncode == 2
    assert "'Bad_Bucket' is not a bucket name" in upper.stderr
    empty = run_surogate(surogate_bin, "sft", write_config(tmp_path, tokenizers_dir, "gs:///x.jsonl"), "--dry-run",
                         env=env)
    assert empty.returncode == 2
    assert "datasets[0].path" in empty.stderr and "names no bucket" in empty.stderr
