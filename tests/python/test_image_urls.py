"""Row images given by http(s) URL (docs/vision.md, "Image sources") against a server of this test
on 127.0.0.1 (a free port; nothing reaches the internet): the downloaded image gives the same
pixel_values as the file by path (tests/vision/vision_process_tool) and the same tokens in
`surogate preview`; a redirect is followed; a 404, a refused connection, a body over the 64 MiB cap
and a body that is not an image each stop the command with exit 2 and one error naming the
dataset row and the URL; https verifies the server's certificate (OpenSSL's SSL_CERT_FILE)."""
import http.server
import json
import socket
import ssl
import subprocess
import threading

import pytest

from conftest import build_binary, run_surogate, self_signed_certificate
from test_vision_data_cli import VISION, vision_folder, write_config

PHOTO = (VISION / "photo.jpg").read_bytes()
CAP = 64 << 20


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/photo.jpg":
            self.answer(200, PHOTO, "image/jpeg")
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/photo.jpg")
            self.end_headers()
        elif self.path == "/notes.txt":
            self.answer(200, b"this is not an image\n", "text/plain")
        elif self.path == "/huge.jpg":
            # No Content-Length: the body ends when the connection closes, so only counting it
            # finds that it is over the cap.
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.end_headers()
            chunk = PHOTO[:3] + bytes((1 << 20) - 3)
            try:
                for _ in range((CAP >> 20) + 2):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading at the cap
        else:
            self.answer(404, b"not found", "text/plain")

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """The base URL of a server on 127.0.0.1 (see Handler for its paths)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pixel_values(reference, out, env=None):
    tool = build_binary("tests/vision/vision_process_tool")
    result = subprocess.run([str(tool), str(VISION / "qwen2_5_vl"), reference, "drop", "pillow13", str(out)],
                            capture_output=True, text=True, env=env)
    return result, (out.with_name(out.name + ".pixels").read_bytes() if result.returncode == 0 else None)


def url_row(url):
    return {"messages": [{"role": "user", "content": [{"type": "image", "image": url},
                                                      {"type": "text", "text": "What is it?"}]},
                         {"role": "assistant", "content": "A photo."}]}


def preview(tmp_path, tokenizers_dir, surogate_bin, name, rows):
    folder = tmp_path / name
    folder.mkdir()
    config = write_config(folder, vision_folder(folder, tokenizers_dir), rows)
    return run_surogate(surogate_bin, "preview", config, "-n", str(len(rows))), folder / "rows.jsonl"


def test_a_url_gives_the_pixels_of_the_file_by_path(server, tmp_path):
    by_path, expected = pixel_values(str(VISION / "photo.jpg"), tmp_path / "path")
    assert by_path.returncode == 0, by_path.stderr
    for url in (f"{server}/photo.jpg", f"{server}/moved"):
        result, pixels = pixel_values(url, tmp_path / "url")
        assert result.returncode == 0, result.stderr
        assert pixels == expected, url
        assert json.loads(result.stdout) == json.loads(by_path.stdout)


def test_preview_of_url_rows_equals_path_rows(server, tmp_path, surogate_bin, tokenizers_dir):
    by_path, _ = preview(tmp_path, tokenizers_dir, surogate_bin, "path", [url_row(str(VISION / "photo.jpg"))])
    by_url, _ = preview(tmp_path, tokenizers_dir, surogate_bin, "url",
                        [url_row(f"{server}/photo.jpg"), url_row(f"{server}/moved")])
    assert by_path.returncode == 0, by_path.stderr
    assert by_url.returncode == 0, by_url.stderr
    assert "1 image(s), resized to 112×84 (width × height)" in by_path.stdout
    ids = [line for line in by_path.stdout.splitlines() if line.startswith("ids: ")]
    assert len(ids) == 1 and "151652 151655×12 151653" in ids[0]
    assert [line for line in by_url.stdout.splitlines() if line.startswith("ids: ")] == ids * 2
    assert by_url.stdout.count("1 image(s), resized to 112×84 (width × height)") == 2


@pytest.mark.parametrize("path, message", [
    ("/missing.jpg", "the server answered HTTP status 404"),
    (None, "could not connect (the connection was refused, or the host was not found)"),
    ("/huge.jpg", "the body is larger than the 64 MiB allowed for a downloaded image"),
    ("/notes.txt", "not a PNG, JPEG or WebP file"),
])
def test_each_failed_download_is_one_error_naming_row_and_url(server, tmp_path, surogate_bin, tokenizers_dir,
                                                              path, message):
    url = f"{server}{path}" if path else f"http://127.0.0.1:{closed_port()}/photo.jpg"
    good = url_row(f"{server}/photo.jpg")
    result, rows_file = preview(tmp_path, tokenizers_dir, surogate_bin, "bad", [good, url_row(url)])
    assert result.returncode == 2, (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if url in line]
    assert len(errors) == 1, result.stderr
    assert f"{rows_file}:2" in errors[0] and message in errors[0], errors[0]


@pytest.fixture
def tls_server(tmp_path):
    """An https server on 127.0.0.1 with a self-signed certificate for that address; yields its
    base URL and the certificate file."""
    cert, key = self_signed_certificate(tmp_path)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", cert
    httpd.shutdown()
    httpd.server_close()


def test_https_verifies_the_certificate(tls_server, tmp_path):
    base, cert = tls_server
    _, expected = pixel_values(str(VISION / "photo.jpg"), tmp_path / "path")
    trusted, pixels = pixel_values(f"{base}/photo.jpg", tmp_path / "trusted", env={"SSL_CERT_FILE": str(cert)})
    assert trusted.returncode == 0, trusted.stderr
    assert pixels == expected
    untrusted, _ = pixel_values(f"{base}/photo.jpg", tmp_path / "untrusted",
                                env={"SSL_CERT_FILE": str(tmp_path / "no-such.pem"), "SSL_CERT_DIR": str(tmp_path)})
    assert untrusted.returncode != 0
    assert f"downloading image {base}/photo.jpg: the server's certificate was not verified" in untrusted.stderr
