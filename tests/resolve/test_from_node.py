"""``resolve --from-node``: targets from GPU Feature Discovery labels, and the Kubernetes
export that schedules each target back onto its own nodes (issue 34)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping

import pytest
import yaml

from envlock.lock.io import load_lock
from tests.support.cli import run_cli

NODES = Path(__file__).resolve().parents[1] / "data" / "nodes" / "three-pools.json"


def _labels(node: Mapping[str, Any]) -> Dict[str, str]:
    return dict(node["metadata"].get("labels") or {})


def _expr_true(e: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement, as the Kubernetes scheduler evaluates it."""
    key, op = e["key"], e["operator"]
    values = e.get("values") or []
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return False
    if op == "In":
        return labels[key] in values
    if op == "NotIn":
        return labels[key] not in values
    try:  # Gt/Lt: both sides parsed as integers; unparsable -> no match
        have, want = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return have > want if op == "Gt" else have < want


def selects(affinity: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    return any(all(_expr_true(e, labels) for e in t["matchExpressions"]) for t in terms)


@pytest.fixture
def pools_lock(tmp_path: Path, cache: Path) -> Path:
    lock = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--from-node", str(NODES), "--offline", "--python", "3.11",
                "-o", str(lock))
    assert r.code == 0, r.out + r.err
    return lock


def test_three_pools_give_three_targets(pools_lock: Path) -> None:
    lock = load_lock(str(pools_lock))
    by_name = {t.name: t for t in lock.targets}
    assert sorted(by_name) == ["a100-pool", "h100-pool", "rtx4090-pool"]
    assert by_name["h100-pool"].gpu_models == ("h100-sxm",)
    assert by_name["h100-pool"].driver == "535.104.05"
    assert by_name["a100-pool"].gpu_models == ("a100-sxm4-80gb",)
    assert by_name["a100-pool"].driver == "550.127.05"
    assert by_name["rtx4090-pool"].gpu_models == ("rtx-4090",)
    assert by_name["rtx4090-pool"].driver == "570.133.20"
    # the node without GFD labels is named, not silently dropped
    assert any("gke-system-d1" in d for t in lock.targets for d in t.decision)


def test_kubernetes_export_selects_each_pool_and_only_it(pools_lock: Path) -> None:
    nodes = json.loads(NODES.read_text())["items"]
    pool_of = {n["metadata"]["name"]: _labels(n).get("cloud.google.com/gke-nodepool")
               for n in nodes}
    for target in ("h100-pool", "a100-pool", "rtx4090-pool"):
        r = run_cli("export", "--format", "kubernetes", "--lock", str(pools_lock),
                    "--target", target)
        assert r.code == 0, r.err
        docs = list(yaml.safe_load_all(r.out))
        assert docs[1]["kind"] == "NodeFeatureRule"
        chosen = {n["metadata"]["name"] for n in nodes
                  if selects(docs[0]["affinity"], _labels(n))}
        assert chosen == {n for n, p in pool_of.items() if p == target}, target
    # the A100 pool includes a node that carries only the deprecated driver labels
    assert "gke-train-a100-b2" in {n for n, p in pool_of.items() if p == "a100-pool"}


def test_driver_floor_is_enforced_by_the_affinity(pools_lock: Path) -> None:
    """An H100 node on a driver below the lock's floor is not selected."""
    lock = load_lock(str(pools_lock))
    floor = lock.target("h100-pool").driver_min
    assert floor
    node = copy.deepcopy(json.loads(NODES.read_text())["items"][0])
    labels = node["metadata"]["labels"]
    major = int(floor.split(".")[0])
    for k in ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver.major"):
        labels[k] = str(major - 1)
    r = run_cli("export", "--format", "kubernetes", "--lock", str(pools_lock),
                "--target", "h100-pool")
    affinity = next(yaml.safe_load_all(r.out))["affinity"]
    assert not selects(affinity, labels)
    labels["nvidia.com/cuda.driver-version.major"] = str(major + 1)
    assert selects(affinity, labels)


def _write(tmp_path: Path, doc: Any) -> Path:
    p = tmp_path / "nodes.json"
    p.write_text(json.dumps(doc))
    return p


def test_single_node_and_unknown_product(tmp_path: Path, cache: Path) -> None:
    node = copy.deepcopy(json.loads(NODES.read_text())["items"][4])  # the RTX 4090 node
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-Future-GPU-9000"
    for k in [k for k in node["metadata"]["labels"] if "driver" in k]:
        del node["metadata"]["labels"][k]
    path = _write(tmp_path, node)
    r = run_cli("resolve", "--from-node", str(path), "--offline", "--python", "3.11",
                "--dry-run", "-v")
    assert r.code == 0, r.out + r.err
    assert "nvidia.com/gpu.product=NVIDIA-Future-GPU-9000 is not in the matrix" in r.out
    assert "compute capability 8.9" in r.out
    assert "driver unknown: no nvidia.com/cuda.driver-version.full" in r.out


def test_bad_node_files_are_one_line_errors(tmp_path: Path, cache: Path) -> None:
    cases = [("not json", "not JSON"),
             (json.dumps({"kind": "Pod"}), "is neither Node nor List"),
             (json.dumps({"kind": "List", "items": []}), "holds no nodes"),
             (json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {
                 "name": "cpu-1", "labels": {"kubernetes.io/arch": "amd64"}}}]}),
              "no node carries GPU Feature Discovery labels"),
             (json.dumps({"kind": "Node", "metadata": {"name": "x", "labels": {
                 "nvidia.com/gpu.present": "true"}}}), "the GPU is unknown")]
    for text, message in cases:
        p = tmp_path / "n.json"
        p.write_text(text)
        r = run_cli("resolve", "--from-node", str(p), "--offline", "--python", "3.11",
                    "--dry-run")
        assert r.code == 2, (text, r.out, r.err)
        assert message in r.err and "Traceback" not in r.err
        assert len(r.err.strip().splitlines()) <= 2, r.err


def test_cpu_target_requires_no_node(tmp_path: Path, cache: Path) -> None:
    lock = tmp_path / "cpu.lock"
    assert run_cli("resolve", "--cpu", "--offline", "--python", "3.11", "-o",
                   str(lock)).code == 0
    r = run_cli("export", "--format", "kubernetes", "--lock", str(lock))
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out) == {"affinity": {}}
    assert "a CPU target runs on any node" in r.err
