"""A fake Hugging Face Hub on 127.0.0.1 for the download tests (no internet needed).

Serves one repo the way huggingface.co does for the calls Surogate makes:
  GET  /api/{models|datasets}/{repo}/revision/{rev}  -> {"id", "sha", "siblings": [{"rfilename"}]}
  HEAD /[datasets/]{repo}/resolve/{rev}/{file}       -> LFS files: 302 + X-Linked-Etag (sha256) +
                                                        X-Linked-Size; others: 200 + ETag + Content-Length
  GET  same                                          -> the file (LFS: 302 to /lfs-storage/{sha256})
Everything carries X-Repo-Commit. Besides main, other branches can be served with their own files and
commit (`add_revision("refs/convert/parquet", files)`: the hub's Parquet conversion branch). Supports Range requests and can be told to misbehave:
require a token, cut a transfer short (for resume tests), serve corrupted bytes (hash
mismatch), fail the revision API with a given status (api_status). Unknown repos answer 404 with X-Error-Code: RepositoryNotFound. Every request is
logged in `requests`. The server shuts itself down after `lifetime_seconds`.

Use from tests: `with FakeHub(files, repo_id="org/tiny") as hub: hub.url ...`.
Run by hand:   python3 fake_hub_server.py FOLDER org/name   (serves FOLDER's files until Ctrl-C)
"""
import hashlib
import http.server
import json
import pathlib
import sys
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".bin", ".parquet")


class FakeHub:
    def __init__(self, files, repo_id="org/tiny", repo_type="models", commit=None, lifetime_seconds=120, tls=None):
        self.files = dict(files)  # name -> bytes
        self.tls = tls  # (certificate file, key file): serve https
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.commit = commit or hashlib.sha1(repr(sorted(self.files)).encode()).hexdigest()
        self.branches = {}        # other revisions: name -> (commit, files)
        self.required_token = None
        self.cut_short = {}       # file name -> how many more GETs to cut after half the bytes
        self.corrupt = set()      # file names served with one byte flipped
        self.api_status = None    # when set, the revision API answers this HTTP status
        self.requests = []        # (method, path, headers dict)
        self.lock = threading.Lock()
        self.lifetime_seconds = lifetime_seconds
        self._server = None
        self._thread = None
        self._timer = None

    # ---- lifecycle ----
    def start(self):
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            import ssl
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def add_revision(self, name, files):
        """Serves `files` on branch `name` (e.g. "refs/convert/parquet") under a commit of its own."""
        files = dict(files)
        commit = hashlib.sha1((name + repr(sorted(files))).encode()).hexdigest()
        self.branches[name] = (commit, files)
        return commit

    def revision_files(self, revision):
        """(commit, files) of a branch name or commit, or None."""
        if revision in ("main", self.commit):
            return self.commit, self.files
        for name, (commit, files) in self.branches.items():
            if revision in (name, commit):
                return commit, files
        return None

    def all_files(self):
        merged = dict(self.files)
        for _, files in self.branches.values():
            merged.update(files)
        return merged

    # ---- helpers for tests ----
    def is_lfs(self, name):
        return name.endswith(LFS_SUFFIXES)

    def sha256(self, name):
        return hashlib.sha256(self.all_files()[name]).hexdigest()

    def git_etag(self, name):
        data = self.all_files()[name]
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def etag(self, name):
        return self.sha256(name) if self.is_lfs(name) else self.git_etag(name)

    def gets_of(self, name):
        """The GET requests that fetched `name`'s bytes (resolve or storage URL)."""
        with self.lock:
            return [(path, headers) for method, path, headers in self.requests
                    if method == "GET" and (path.endswith("/" + name) or
                                            (self.is_lfs(name) and path.endswith(self.sha256(name))))]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = None

    def log_message(self, *args):
        pass

    def _record(self):
        with self.hub.lock:
            self.hub.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

    def _send(self, status, body=b"", headers=None, head_only=False):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head_only:
            self.wfile.write(body)

    def _error(self, status, code, message, head_only=False):
        body = json.dumps({"error": message}).encode()
        self._send(status, body, {"X-Error-Code": code, "Content-Type": "application/json"}, head_only)

    def _authorized(self, head_only):
        token = self.hub.required_token
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return True
        self._error(401, "GatedRepo" if self.headers.get("Authorization") else "",
                    "Access to this repo is restricted", head_only)
        return False

    def do_HEAD(self):
        self._handle(head_only=True)

    def do_GET(self):
        self._handle(head_only=False)

    def _handle(self, head_only):
        self._record()
        hub = self.hub
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        prefix = "/datasets/" if hub.repo_type == "datasets" else "/"
        api = f"/api/{hub.repo_type}/"
        if path.startswith("/lfs-storage/"):
            return self._serve_storage(path[len("/lfs-storage/"):], head_only)
        if path.startswith(api):
            rest = path[len(api):]
            repo, _, revision = rest.partition("/revision/")
            if repo != hub.repo_id:
                return self._error(404, "RepositoryNotFound", "Repository not found", head_only)
            if not self._authorized(head_only):
                return
            if hub.api_status is not None:
                return self._error(hub.api_status, "", "Service unavailable", head_only)
            served = hub.revision_files(revision)
            if served is None:
                return self._error(404, "RevisionNotFound", "Invalid rev id", head_only)
            commit, files = served
            body = json.dumps({"id": hub.repo_id, "sha": commit,
                               "siblings": [{"rfilename": name} for name in sorted(files)]}).encode()
            return self._send(200, body, {"Content-Type": "application/json"}, head_only)
        if path.startswith(prefix):
            rest = path[len(prefix):]
            repo, _, tail = rest.partition("/resolve/")
            if repo != hub.repo_id or not tail:
                return self._error(404, "RepositoryNotFound", "Repository not found", head_only)
            if not self._authorized(head_only):
                return
            revision, _, name = tail.partition("/")
            served = hub.revision_files(revision)
            if served is None:
                return self._error(404, "RevisionNotFound", "Invalid rev id", head_only)
            commit, files = served
            if name not in files:
                return self._error(404, "EntryNotFound", "Entry not found", head_only)
            common = {"X-Repo-Commit": commit}
            if hub.is_lfs(name):
                common.update({"X-Linked-Etag": f'"{hub.sha256(name)}"', "X-Linked-Size": str(len(files[name])),
                               "ETag": f'"{hub.git_etag(name)}"', "Location": f"/lfs-storage/{hub.sha256(name)}"})
                return self._send(302, b"", common, head_only)
            common["ETag"] = f'"{hub.git_etag(name)}"'
            return self._serve_bytes(name, common, head_only)
        self._error(404, "", "Not found", head_only)

    def _serve_storage(self, sha, head_only):
        for name in self.hub.all_files():
            if self.hub.is_lfs(name) and self.hub.sha256(name) == sha:
                return self._serve_bytes(name, {"ETag": f'"{sha}"'}, head_only)
        self._error(404, "", "Not found", head_only)

    def _serve_bytes(self, name, headers, head_only):
        hub = self.hub
        data = hub.all_files()[name]
        if name in hub.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        status = 200
        requested = self.headers.get("Range")
        if requested and requested.startswith("bytes=") and requested.endswith("-"):
            start = int(requested[len("bytes="):-1])
            if start >= len(data):
                return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head_only)
            status = 206
            headers = dict(headers, **{"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
        body = data[start:]
        cut = False
        with hub.lock:
            if not head_only and hub.cut_short.get(name, 0) > 0:
                hub.cut_short[name] -= 1
                cut = True
        if not cut:
            return self._send(status, body, headers, head_only)
        # Announce the full length, send half, then drop the connection.
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: max(1, len(body) // 2)])
        self.wfile.flush()
        self.close_connection = True


def main():
    folder = pathlib.Path(sys.argv[1])
    files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with FakeHub(files, repo_id=sys.argv[2], lifetime_seconds=3600) as hub:
        print(f"serving {sys.argv[2]} at {hub.url} (HF_ENDPOINT={hub.url}); Ctrl-C stops", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
