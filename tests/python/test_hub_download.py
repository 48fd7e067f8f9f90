"""`surogate download` against a fake hub on 127.0.0.1 (tests/python/fake_hub_server.py):
the Hugging Face cache layout, reuse without network, resume after an interrupted transfer,
hash mismatch, offline mode, tokens, and the error for a missing repo."""
import json
import os
import pathlib

import pytest

from conftest import run_surogate, self_signed_certificate
from fake_hub_server import FakeHub
from tiny_model import char_tokenizer

TIMEOUT_SECONDS = 60


def model_files():
    weights = bytes(range(256)) * 64  # 16 KiB, large enough to cut in half
    return {
        "config.json": json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 8}).encode(),
        "tokenizer.json": b'{"version": "1.0"}',
        "tokenizer_config.json": b"{}",
        "generation_config.json": b'{"do_sample": false}',
        "model.safetensors": weights,
        "README.md": b"# tiny",
        "original/consolidated.pth": b"not wanted",
    }


@pytest.fixture
def hub():
    with FakeHub(model_files(), repo_id="org/tiny") as server:
        yield server


def hub_env(tmp_path, hub_url, **extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGING"))}
    env.update(HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(tmp_path / "cache"), HF_ENDPOINT=hub_url,
               HF_HUB_DOWNLOAD_TIMEOUT="10")
    env.update(extra)
    return env


def download(binary, env, *args):
    import subprocess
    return subprocess.run([str(binary), "download", *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT_SECONDS)


def test_fresh_download_uses_the_hugging_face_layout(surogate_bin, hub, tmp_path):
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny")
    assert result.returncode == 0, result.stderr
    repo = tmp_path / "cache" / "models--org--tiny"
    snapshot = pathlib.Path(result.stdout.strip())
    assert snapshot == repo / "snapshots" / hub.commit
    assert (repo / "refs" / "main").read_text() == hub.commit
    wanted = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"}
    assert {p.name for p in snapshot.iterdir()} == wanted  # README.md and original/ are skipped
    for name in wanted:
        link = snapshot / name
        assert link.is_symlink()
        assert os.readlink(link) == f"../../blobs/{hub.etag(name)}"
        assert link.read_bytes() == hub.files[name]
    assert (repo / "blobs" / hub.sha256("model.safetensors")).exists()  # LFS blob named by sha256
    assert not list((repo / "blobs").glob("*.incomplete"))
    assert "model.safetensors" in result.stderr  # progress goes to stderr


def test_second_call_needs_no_network(surogate_bin, hub, tmp_path):
    env = hub_env(tmp_path, hub.url)
    first = download(surogate_bin, env, "org/tiny")
    assert first.returncode == 0, first.stderr
    with hub.lock:
        hub.requests.clear()
    again = download(surogate_bin, env, "org/tiny")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert not [r for r in hub.requests if "resolve" in r[1] or "lfs-storage" in r[1]]  # no file traffic
    hub.stop()
    offline_server = download(surogate_bin, env, "org/tiny")
    assert offline_server.returncode == 0, offline_server.stderr
    assert offline_server.stdout == first.stdout
    assert "cached copy" in offline_server.stderr


def test_interrupted_transfer_is_retried_with_a_range_request(surogate_bin, hub, tmp_path):
    hub.cut_short["model.safetensors"] = 1
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny")
    assert result.returncode == 0, result.stderr
    gets = hub.gets_of("model.safetensors")
    half = len(hub.files["model.safetensors"]) // 2
    assert gets[-1][1].get("range") == f"bytes={half}-"
    assert (pathlib.Path(result.stdout.strip()) / "model.safetensors").read_bytes() == hub.files["model.safetensors"]


def test_resume_in_a_later_run_after_repeated_interruptions(surogate_bin, hub, tmp_path):
    hub.cut_short["model.safetensors"] = 10
    env = hub_env(tmp_path, hub.url)
    failed = download(surogate_bin, env, "org/tiny")
    assert failed.returncode == 2
    assert "run the same command again to resume" in failed.stderr
    partial = tmp_path / "cache/models--org--tiny/blobs" / (hub.sha256("model.safetensors") + ".incomplete")
    kept = partial.stat().st_size
    assert 0 < kept < len(hub.files["model.safetensors"])
    assert not (tmp_path / "cache/models--org--tiny/refs/main").exists()  # no ref to an incomplete snapshot
    hub.cut_short.clear()
    resumed = download(surogate_bin, env, "org/tiny")
    assert resumed.returncode == 0, resumed.stderr
    assert hub.gets_of("model.safetensors")[-1][1].get("range") == f"bytes={kept}-"
    assert (pathlib.Path(resumed.stdout.strip()) / "model.safetensors").read_bytes() == hub.files["model.safetensors"]
    assert not partial.exists()


def test_hash_mismatch_deletes_the_blob_and_fails(surogate_bin, hub, tmp_path):
    hub.corrupt.add("model.safetensors")
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny")
    assert result.returncode == 2
    assert "sha256" in result.stderr and "model.safetensors" in result.stderr
    blobs = tmp_path / "cache/models--org--tiny/blobs"
    assert not (blobs / hub.sha256("model.safetensors")).exists()
    assert not list(blobs.glob("*.incomplete"))


def test_offline_mode_with_and_without_cache(surogate_bin, hub, tmp_path):
    env = hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
    missing = download(surogate_bin, env, "org/tiny")
    assert missing.returncode == 2
    assert "HF_HUB_OFFLINE" in missing.stderr and "local folder" in missing.stderr
    assert not hub.requests  # offline means no traffic at all
    online = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny")
    assert online.returncode == 0, online.stderr
    with hub.lock:
        hub.requests.clear()
    cached = download(surogate_bin, env, "org/tiny")
    assert cached.returncode == 0, cached.stderr
    assert cached.stdout == online.stdout
    assert not hub.requests


def test_token_is_sent_as_bearer(surogate_bin, hub, tmp_path):
    hub.required_token = "hf_secret"
    refused = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny")
    assert refused.returncode == 2
    assert "HF_TOKEN" in refused.stderr
    accepted = download(surogate_bin, hub_env(tmp_path, hub.url, HF_TOKEN="hf_secret"), "org/tiny")
    assert accepted.returncode == 0, accepted.stderr
    assert all(r[2].get("authorization") == "Bearer hf_secret" for r in hub.requests if r[2].get("authorization"))
    assert any(r[2].get("authorization") == "Bearer hf_secret" for r in hub.requests)


def test_token_file_from_huggingface_cli_login(surogate_bin, hub, tmp_path):
    hub.required_token = "hf_from_file"
    env = hub_env(tmp_path, hub.url, HF_HOME=str(tmp_path / "hf_home"))
    (tmp_path / "hf_home").mkdir()
    (tmp_path / "hf_home" / "token").write_text("hf_from_file\n")
    result = download(surogate_bin, env, "org/tiny")
    assert result.returncode == 0, result.stderr


def test_unknown_repo_is_a_clear_404(surogate_bin, hub, tmp_path):
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/absent")
    assert result.returncode == 2
    assert "org/absent" in result.stderr and "not found" in result.stderr and "check the id" in result.stderr


def test_unknown_revision(surogate_bin, hub, tmp_path):
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny@nope")
    assert result.returncode == 2
    assert "revision 'nope'" in result.stderr


def test_failing_hub_falls_back_to_the_cache(surogate_bin, hub, tmp_path):
    hub.api_status = 503
    env = hub_env(tmp_path, hub.url)
    uncached = download(surogate_bin, env, "org/tiny")
    assert uncached.returncode == 2
    assert "HTTP 503" in uncached.stderr and "try again later" in uncached.stderr
    hub.api_status = None
    first = download(surogate_bin, env, "org/tiny")
    assert first.returncode == 0, first.stderr
    hub.api_status = 503
    cached = download(surogate_bin, env, "org/tiny")
    assert cached.returncode == 0, cached.stderr
    assert cached.stdout == first.stdout
    assert "HTTP 503" in cached.stderr and "cached copy" in cached.stderr
    hub.api_status = 404  # a 4xx is an answer about the repo, not an outage: no fallback
    gone = download(surogate_bin, env, "org/tiny")
    assert gone.returncode == 2 and "not found" in gone.stderr


def test_unreachable_hub_without_cache(surogate_bin, hub, tmp_path):
    url = hub.url
    hub.stop()
    result = download(surogate_bin, hub_env(tmp_path, url), "org/tiny")
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "local folder" in result.stderr


def test_local_folder_is_used_as_is(surogate_bin, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    result = download(surogate_bin, hub_env(tmp_path, "http://127.0.0.1:9"), str(folder))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(folder)


def test_dataset_download_with_patterns(surogate_bin, tmp_path):
    files = {"data/train-00000.parquet": b"PAR1" * 100, "data/test-00000.parquet": b"PAR1" * 10,
             "README.md": b"# data"}
    with FakeHub(files, repo_id="org/data", repo_type="datasets") as hub:
        result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/data", "--dataset",
                          "--include", "data/train-*")
        assert result.returncode == 0, result.stderr
        snapshot = pathlib.Path(result.stdout.strip())
        assert snapshot == tmp_path / "cache" / "datasets--org--data" / "snapshots" / hub.commit
        assert (snapshot / "data/train-00000.parquet").read_bytes() == files["data/train-00000.parquet"]
        assert os.readlink(snapshot / "data/train-00000.parquet").startswith("../../../blobs/")
        assert not (snapshot / "data/test-00000.parquet").exists()
        assert not (snapshot / "README.md").exists()


def test_model_include_patterns_fetch_only_matching_files(surogate_bin, hub, tmp_path):
    result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny", "--include", "*.json")
    assert result.returncode == 0, result.stderr
    snapshot = pathlib.Path(result.stdout.strip())
    assert {p.name for p in snapshot.iterdir()} == {"config.json", "tokenizer.json", "tokenizer_config.json",
                                                    "generation_config.json"}
    none = download(surogate_bin, hub_env(tmp_path, hub.url), "org/tiny", "--include", "*.parquet")
    assert none.returncode == 2
    assert "matching" in none.stderr


def test_dataset_at_a_commit_through_the_revision_option(surogate_bin, tmp_path):
    """resolve_hub_snapshot(id, Dataset, revision, patterns), the API the data pipeline uses."""
    files = {"data/train-00000.parquet": b"PAR1" * 100, "README.md": b"# data"}
    with FakeHub(files, repo_id="org/data", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        result = download(surogate_bin, env, "org/data", "--dataset", "--revision", hub.commit)
        assert result.returncode == 0, result.stderr
        snapshot = pathlib.Path(result.stdout.strip())
        assert snapshot == tmp_path / "cache" / "datasets--org--data" / "snapshots" / hub.commit
        assert (snapshot / "README.md").read_bytes() == files["README.md"]
        assert not (tmp_path / "cache" / "datasets--org--data" / "refs" / "main").exists()  # a commit needs no ref
        assert any(f"/api/datasets/org/data/revision/{hub.commit}" in r[1] for r in hub.requests)
        assert any(r[1].startswith("/datasets/org/data/resolve/") for r in hub.requests)
        with hub.lock:
            hub.requests.clear()
        offline = download(surogate_bin, dict(env, HF_HUB_OFFLINE="1"), "org/data", "--dataset",
                           "--revision", hub.commit)
        assert offline.returncode == 0, offline.stderr
        assert offline.stdout == result.stdout and not hub.requests
        missing_ref = download(surogate_bin, dict(env, HF_HUB_OFFLINE="1"), "org/data", "--dataset")
        assert missing_ref.returncode == 2  # main was never resolved, so it is not in the cache
        assert "dataset 'org/data' (revision main) is not in the Hugging Face cache" in missing_ref.stderr
        twice = download(surogate_bin, env, "org/data@main", "--dataset", "--revision", "dev")
        assert twice.returncode == 2 and "give it once" in twice.stderr
        bad = download(surogate_bin, env, "org/data", "--dataset", "--revision", "nope")
        assert bad.returncode == 2 and "revision 'nope'" in bad.stderr


def test_local_path_rejects_hub_only_options(surogate_bin, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    result = download(surogate_bin, hub_env(tmp_path, "http://127.0.0.1:9"), str(folder), "--revision", "v1")
    assert result.returncode == 2
    assert "hub ids only" in result.stderr


TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def test_training_config_with_a_hub_model_id(surogate_bin, tmp_path):
    """`model: org/name` in a run config: downloaded into the cache (dry run), then usable offline;
    offline without a cached copy is a clear error asking for a local path."""
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    config = tmp_path / "run.yaml"
    config.write_text(f"model: org/tiny\ndatasets:\n  - path: {tmp_path / 'data.jsonl'}\n    type: text\n")
    # --dry-run loads the tokenizer as training does: a real (tiny) tokenizer.json.
    files = {"config.json": json.dumps(TINY_LLAMA).encode(), "tokenizer.json": json.dumps(char_tokenizer()).encode()}
    with FakeHub(files, repo_id="org/tiny") as hub:
        env = hub_env(tmp_path, hub.url)
        offline = run_surogate(surogate_bin, "sft", config, "--dry-run", env=dict(env, HF_HUB_OFFLINE="1"))
        assert offline.returncode == 2
        assert f"{config}" in offline.stderr and "HF_HUB_OFFLINE" in offline.stderr
        assert "pass a local folder" in offline.stderr
        assert not hub.requests
        online = run_surogate(surogate_bin, "sft", config, "--dry-run", env=env)
        assert online.returncode == 0, online.stderr
        snapshot = tmp_path / "cache" / "models--org--tiny" / "snapshots" / hub.commit
        assert (snapshot / "config.json").is_symlink()
        assert f"model: {snapshot}" in online.stdout
    cached = run_surogate(surogate_bin, "sft", config, "--dry-run", env=dict(env, HF_HUB_OFFLINE="1"))
    assert cached.returncode == 0, cached.stderr
    broken = tmp_path / "run-bad.yaml"
    broken.write_text(config.read_text().replace("org/tiny", "org/na me"))
    bad = run_surogate(surogate_bin, "sft", broken, "--dry-run", env=env)
    assert bad.returncode == 2 and "not a local folder" in bad.stderr


def test_concurrent_downloads_share_one_blob(surogate_bin, hub, tmp_path):
    """Two processes (e.g. two ranks) fetching the same repo into one cache: the blob lock makes
    one download it and the other reuse it; both print the same complete snapshot."""
    import subprocess
    env = hub_env(tmp_path, hub.url)
    processes = [subprocess.Popen([str(surogate_bin), "download", "org/tiny"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [process.communicate(timeout=TIMEOUT_SECONDS) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
    assert outputs[0][0] == outputs[1][0]
    snapshot = pathlib.Path(outputs[0][0].strip())
    assert (snapshot / "model.safetensors").read_bytes() == hub.files["model.safetensors"]
    lock = tmp_path / "cache" / ".locks" / "models--org--tiny" / (hub.sha256("model.safetensors") + ".lock")
    assert lock.exists()
    assert not list((tmp_path / "cache/models--org--tiny/blobs").glob("*.incomplete"))


def test_only_the_weights_transformers_would_load_are_fetched(surogate_bin, tmp_path):
    """Repos often hold a second copy of the weights (Mistral's consolidated.safetensors): with an
    index only its shards are fetched, with model.safetensors only that file."""
    shard = bytes(range(64))
    files = {
        "config.json": b"{}",
        "model.safetensors.index.json": json.dumps({"metadata": {"total_size": 128}, "weight_map": {
            "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode(),
        "model-00001-of-00002.safetensors": shard,
        "model-00002-of-00002.safetensors": shard[::-1],
        "consolidated.safetensors": b"x" * 4096,
        "consolidated.safetensors.index.json": b"{}",
    }
    with FakeHub(files, repo_id="org/sharded") as hub:
        result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/sharded")
        assert result.returncode == 0, result.stderr
        snapshot = pathlib.Path(result.stdout.strip())
        assert {p.name for p in snapshot.iterdir()} == {"config.json", "model.safetensors.index.json",
                                                        "model-00001-of-00002.safetensors",
                                                        "model-00002-of-00002.safetensors"}
        assert not hub.gets_of("consolidated.safetensors")
    single = {"config.json": b"{}", "model.safetensors": shard, "consolidated.safetensors": b"x" * 4096}
    with FakeHub(single, repo_id="org/single") as hub:
        result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/single")
        assert result.returncode == 0, result.stderr
        assert {p.name for p in pathlib.Path(result.stdout.strip()).iterdir()} == {"config.json", "model.safetensors"}
    broken = dict(files)
    broken["model.safetensors.index.json"] = json.dumps({"weight_map": {"a": "model-00009-of-00009.safetensors"}}).encode()
    with FakeHub(broken, repo_id="org/broken") as hub:
        result = download(surogate_bin, hub_env(tmp_path, hub.url), "org/broken")
        assert result.returncode == 2
        assert "model-00009-of-00009.safetensors" in result.stderr and "does not have" in result.stderr


def test_training_config_with_a_hub_dataset_id(surogate_bin, tmp_path, tokenizers_dir):
    """`datasets: - path: org/name`: `surogate tokenize` downloads the dataset's split files into
    the cache and tokenizes them; offline with nothing cached is a clear error."""
    rows = [{"text": f"document number {i}"} for i in range(5)]
    files = {"data/train.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(), "README.md": b"# data"}
    config = tmp_path / "run.yaml"
    config.write_text(f"model: {tokenizers_dir / 'qwen3'}\noutput_dir: {tmp_path / 'out'}\n"
                      "sequence_len: 32\nvalidation_split_ratio: 0\ndatasets:\n  - path: org/data\n    type: text\n")
    with FakeHub(files, repo_id="org/data", repo_type="datasets") as hub:
        env = hub_env(tmp_path, hub.url)
        offline = run_surogate(surogate_bin, "tokenize", config, env=dict(env, HF_HUB_OFFLINE="1"))
        assert offline.returncode == 2
        assert "org/data" in offline.stderr and "cache" in offline.stderr
        online = run_surogate(surogate_bin, "tokenize", config, env=env)
        assert online.returncode == 0, online.stderr
        snapshot = tmp_path / "cache" / "datasets--org--data" / "snapshots" / hub.commit
        assert (snapshot / "data" / "train.jsonl").read_bytes() == files["data/train.jsonl"]
        assert "5" in online.stdout


def test_https_hub_trusts_the_ca_that_ssl_cert_file_names(surogate_bin, tmp_path):
    """A hub behind a private CA (a self-signed certificate for 127.0.0.1): refused against the
    system's CAs, downloaded once SSL_CERT_FILE names the certificate (io/curl_session.h)."""
    cert, key = self_signed_certificate(tmp_path)
    with FakeHub(model_files(), repo_id="org/tiny", tls=(str(cert), str(key))) as server:
        assert server.url.startswith("https://")
        env = hub_env(tmp_path, server.url)
        env.pop("SSL_CERT_FILE", None)
        env.pop("SSL_CERT_DIR", None)
        refused = download(surogate_bin, env, "org/tiny")
        assert refused.returncode != 0
        assert "certificate" in refused.stderr, refused.stderr
        trusted = download(surogate_bin, dict(env, SSL_CERT_FILE=str(cert)), "org/tiny")
        assert trusted.returncode == 0, trusted.stderr
        assert (pathlib.Path(trusted.stdout.strip()) / "model.safetensors").read_bytes() == server.files["model.safetensors"]
