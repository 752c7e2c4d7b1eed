"""Issue 18 item 1: a snapshot records an allowlist of variables and never a secret."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.cli import Output, main
from envlock.probe.host import relevant_env
from tests.security.props import examples

# the names and values the issue found written into snapshot.json
ISSUE_ENV = {
    "NV_LICENSE_KEY": "LIC-4f9a8b7c6d5e",
    "NVIDIA_NGC_KEY": "nvapi-abc",
    "NVIDIA_PASSPHRASE": "correct horse",
    "TORCH_HUB_PASS": "hunter2",
    "TORCH_SESSION_COOKIE": "sid=abc",
    "NCCL_COLLNET_CREDS": "alice:wonderland",
    "PYTORCH_S3_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "TORCH_MODEL_URL": "https://bob:S3CRETpw@models.example/x.pt",
    "CUDA_CACHE_URL": "http://token123@cache.example/",
}
SECRETS = ["LIC-4f9a8b7c6d5e", "nvapi-abc", "correct horse", "hunter2", "sid=abc",
           "wonderland", "AKIAIOSFODNN7EXAMPLE", "S3CRETpw", "token123"]


def test_the_issues_variables_never_reach_the_snapshot_env() -> None:
    env = dict(ISSUE_ENV, NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="0,1", HOME="/root",
               AWS_SECRET_ACCESS_KEY="zzz")
    got = relevant_env(env)
    text = json.dumps(got)
    for s in SECRETS:
        assert s not in text
    assert got["NCCL_DEBUG"] == "INFO" and got["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert got["TORCH_MODEL_URL"] == "https://<redacted>@models.example/x.pt"
    assert got["CUDA_CACHE_URL"] == "http://<redacted>@cache.example/"
    assert "HOME" not in got and "AWS_SECRET_ACCESS_KEY" not in got


def test_only_allowlisted_variables_are_recorded() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8d3f0a2b-1c4e-4f5a-9b6c-7d8e9f0a1b2c",
           "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "NVIDIA_VISIBLE_DEVICES": "all",
           "PATH": "/usr/bin", "NV_GPU": "0", "MY_APP": "1", "TORCH_CUDA_ARCH_LIST": "8.0 9.0"}
    assert relevant_env(env) == {
        "CUDA_VISIBLE_DEVICES": "GPU-8d3f0a2b-1c4e-4f5a-9b6c-7d8e9f0a1b2c",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "NVIDIA_VISIBLE_DEVICES": "all",
        "TORCH_CUDA_ARCH_LIST": "8.0 9.0"}


_WORDS = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "CREDS",
          "CREDENTIALS", "AUTH", "COOKIE", "SESSION", "PRIVATE", "LICENSE", "APIKEY",
          "ACCESS_KEY_ID", "SIGNATURE", "PWD", "BEARER", "JWT"]
_PREFIX = st.sampled_from(["CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "CUDNN_", "TRITON_",
                           "CUBLAS_", "NVIDIA_", "NV_"])
_PART = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=0, max_size=6)


@settings(max_examples=examples(), deadline=None)
@given(prefix=_PREFIX, before=_PART, word=st.sampled_from(_WORDS), after=_PART,
       lower=st.booleans(), secret=st.text(min_size=1, max_size=30))
def test_generated_secret_names_are_never_recorded(prefix: str, before: str, word: str,
                                                   after: str, lower: bool,
                                                   secret: str) -> None:
    name = "_".join(x for x in (prefix.rstrip("_"), before, word, after) if x)
    if lower:
        name = name.lower()
    assert name not in relevant_env({name: secret})


@settings(max_examples=examples(), deadline=None)
@given(name=st.sampled_from(["TORCH_MODEL_URL", "CUDA_CACHE_URL", "NCCL_X", "LD_PRELOAD"]),
       user=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1,
                    max_size=12),
       pw=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl0123456789!$&'()*+,;=",
                  min_size=4, max_size=20))
def test_url_credentials_are_redacted_whatever_the_name(name: str, user: str,
                                                        pw: str) -> None:
    got = relevant_env({name: f"https://{user}:{pw}@host.example/path"})
    assert pw not in got.get(name, "")


def test_token_shaped_values_are_redacted() -> None:
    for v in ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "hf_abcdefghijABCDEFGHIJ123",
              "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
              "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LmNbVc"):
        assert relevant_env({"TORCH_EXTRA": v}) == {"TORCH_EXTRA": "<redacted>"}


def test_snapshot_command_writes_no_secret(tmp_path: Path) -> None:
    out_file = tmp_path / "snap.json"
    import io

    saved = dict(os.environ)
    try:
        os.environ.update(ISSUE_ENV)
        o = Output(io.StringIO(), io.StringIO())
        code = main(["snapshot", "-o", str(out_file)], o)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0, o.stderr.getvalue()
    text = out_file.read_text()
    for s in SECRETS:
        assert s not in text


def test_userinfo_is_stripped_whole() -> None:
    from envlock._redact import strip_userinfo

    assert strip_userinfo("--index-url http://user:p@ss@host/simple -r x") == \
        "--index-url http://host/simple -r x"
    assert strip_userinfo("https://host/a@b and git+ssh://tok@h:22/r") == \
        "https://host/a@b and git+ssh://h:22/r"
