"""The lock file is written by envlock's small emitter (tomlkit only for shapes it does not
know); the file must be byte-for-byte what tomlkit writes for the same lock (the reference
renderer), for real locks and for any strings and inputs: quotes, backslashes, control
characters, unicode, line breaks, keys that need quoting, nested tables."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock._text import clean_for_output
from envlock.lock.io import _render_tomlkit, load_lock, render_lock
from envlock.lock.model import (
    AppliedAdvisory,
    Lock,
    LockedFile,
    LockedPackage,
    LockTarget,
    TorchChoice,
)

HOSTILE = ["", "plain", 'a"b', "a\\b", "line\nbreak", "tab\there", "cr\rlf", "\x00\x01\x7f",
           "é ü 中文 🚀", '"""', 'x"""y', "''' '", "\u2028\u00a0", "\\u0041", "[[target]]",
           "# not a comment", "a = b", "https://u:secret@h.example/simple"]
text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))
texts = st.lists(text, max_size=3).map(tuple)
keys = st.one_of(st.sampled_from(["cublas", "with space", "dotted.key", "", "ключ", 'q"']),
                 st.text(max_size=6))

files = st.builds(LockedFile, text, text, st.one_of(st.none(), text))
packages = st.builds(LockedPackage, text, text, st.one_of(st.none(), text),
                     st.lists(files, max_size=3).map(tuple), st.booleans(),
                     st.one_of(st.none(), text))
advisories = st.builds(AppliedAdvisory, text, text, text, texts, texts)
torches = st.builds(TorchChoice, text, text, st.one_of(st.none(), text), text, text,
                    st.one_of(st.none(), texts), st.one_of(st.none(), texts), st.booleans())
targets = st.builds(
    LockTarget, name=text, gpus=texts, gpu_models=texts, compute_capabilities=texts,
    python=text, platform=text, glibc=text, driver=st.one_of(st.none(), text),
    driver_min=st.one_of(st.none(), text), driver_min_reasons=texts,
    torch=st.one_of(st.none(), torches), libraries=st.dictionaries(keys, text, max_size=3),
    advisories=st.lists(advisories, max_size=2).map(tuple),
    packages=st.lists(packages, max_size=3).map(tuple), closure=text, decision=texts,
    env=st.dictionaries(keys, text, max_size=2), machines=st.sampled_from(["one", "many"]),
    family=st.one_of(st.none(), text))
scalars = st.one_of(text, st.booleans(), st.integers(-5, 10**12), st.none())
input_keys = st.one_of(st.sampled_from(["cuda", "torch", "requirements", "env", "targets",
                                        "requirement-files", "a b", ""]), keys)
flat = st.dictionaries(input_keys, st.one_of(scalars, st.lists(scalars, max_size=3)),
                       max_size=4)
input_values = st.one_of(scalars, st.lists(st.one_of(text, st.booleans()), max_size=3),
                         flat, st.lists(flat, max_size=2),
                         st.dictionaries(input_keys, flat, max_size=2),
                         st.lists(st.one_of(text, flat), max_size=2))
locks = st.builds(Lock, text, text, text,
                  st.dictionaries(input_keys, input_values, max_size=5),
                  text, st.lists(targets, max_size=2).map(tuple))


def _reference(lock: Lock) -> str:
    return _render_tomlkit(clean_for_output(lock), with_targets=True)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(locks)
def test_any_lock_renders_as_tomlkit_renders_it(lock: Lock) -> None:
    assert render_lock(lock) == _reference(lock)


def test_real_locks_render_as_tomlkit_renders_them() -> None:
    found = sorted(Path(__file__).resolve().parents[1].rglob("*.lock"))
    checked = 0
    for path in found:
        try:
            lock = load_lock(path)
        except Exception:  # noqa: BLE001 - fixtures of broken locks
            continue
        assert render_lock(lock) == _reference(lock), path
        checked += 1
    assert checked > 0


def test_a_target_without_packages_falls_back_to_tomlkit() -> None:
    t = LockTarget(name="t", gpus=(), gpu_models=(), compute_capabilities=(), python="3.11",
                   platform="linux_x86_64", glibc="2.28", driver=None, driver_min=None,
                   driver_min_reasons=(), torch=None, libraries={}, advisories=(),
                   packages=(), closure="full")
    lock = Lock("0", "m", "h", {}, "envlock resolve", (t,))
    assert render_lock(lock) == _reference(lock)
    assert "package = []" in render_lock(lock)
