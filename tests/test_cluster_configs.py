"""The cluster configs in experiments/clusters/ are valid and agree with each other, without a cloud or kubectl.

- aws-vm.yaml: Ray's own `prepare_config` + `validate_config`, what `ray up` runs before it talks to AWS.
- kuberay/*.yaml: tests/cluster_schemas/kuberay-v1-subset.schema.yaml (a hand-written subset of the KubeRay v1 CRDs
  and of the PVC), and the RayCluster through Ray's own KubeRay conversion into an autoscaler config, which Ray
  validates against its schema (what the in-tree autoscaler does on the head).
- across files: the same three groups and custom resources, GPUs where they belong, min <= max, the RayJob runs a
  real `mkb run` (parsed by mkb's parser) on a config in experiments/, with --run-dir on the PVC's mount.
Each check also runs on a mutated copy, which must fail, so the checks can fail.
"""
from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CLUSTERS = REPO / "experiments" / "clusters"
SCHEMA = yaml.safe_load((Path(__file__).parent / "cluster_schemas" / "kuberay-v1-subset.schema.yaml").read_text())
# Where the image of docs/cluster.md puts the mkb-ray checkout (the RayJob names its experiment file there).
CHECKOUT_IN_IMAGE = Path("/home/ray/mkb-ray")
# One custom resource per role; a node group declares exactly one of them.
ROLE_RESOURCES = {"model": "mkb_model_gpu", "eval": "mkb_eval_gpu", "agent": "mkb_agent_cpu"}
GPU_ROLES = {"model", "eval"}


def _load(relative: str) -> dict[str, Any]:
    return yaml.safe_load((CLUSTERS / relative).read_text())


VM = _load("aws-vm.yaml")
RAYCLUSTER = _load("kuberay/raycluster.yaml")
RAYJOB = _load("kuberay/rayjob.yaml")
PVC = _load("kuberay/pvc.yaml")
MANIFESTS = {"kuberay/raycluster.yaml": RAYCLUSTER, "kuberay/rayjob.yaml": RAYJOB, "kuberay/pvc.yaml": PVC}


class Group(NamedTuple):
    """One worker group, read from either config: its role, Ray resources, GPUs and scaling bounds."""
    name: str
    role: str
    resources: dict[str, int]
    gpus: int
    min_workers: int
    max_workers: int


def validate_vm(config: dict[str, Any]) -> None:
    """Ray's offline part of `ray up`: merge the provider's defaults, then validate against ray-schema.json."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(config)))


def validate_manifest(manifest: dict[str, Any]) -> None:
    """The hand-written KubeRay/Kubernetes schema subset, by the manifest's kind."""
    kind = manifest.get("kind")
    if kind not in SCHEMA["$defs"]:
        raise jsonschema.ValidationError(f"unknown kind {kind!r}")
    schema = {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{kind}"}
    jsonschema.Draft202012Validator(schema).validate(manifest)


def autoscaler_config_from_raycluster(raycluster: dict[str, Any]) -> dict[str, Any]:
    """Ray's own RayCluster -> autoscaler config conversion (it validates the result against Ray's schema)."""
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    return _derive_autoscaling_config_from_ray_cr(copy.deepcopy(raycluster))


def _role(name: str, resources: dict[str, Any]) -> str:
    roles = [role for role, resource in ROLE_RESOURCES.items() if resource in resources]
    if len(roles) != 1:
        raise ValueError(f"group {name} declares {len(roles)} of the role resources {sorted(ROLE_RESOURCES.values())}"
                         f" (resources {sorted(resources)})")
    return roles[0]


def vm_groups(config: dict[str, Any]) -> list[Group]:
    groups = []
    for name, node in config["available_node_types"].items():
        if name == config["head_node_type"]:
            continue
        missing = [key for key in ("min_workers", "max_workers") if key not in node]
        if missing:
            raise ValueError(f"node type {name} lacks {missing}: every group states its own bounds")
        resources = node["resources"]
        groups.append(Group(name, _role(name, resources), resources, resources.get("GPU", 0),
                            node["min_workers"], node["max_workers"]))
    return groups


def kuberay_groups(raycluster: dict[str, Any]) -> list[Group]:
    groups = []
    for spec in raycluster["spec"]["workerGroupSpecs"]:
        raw = spec["rayStartParams"]["resources"]
        resources = json.loads(raw[1:-1].replace("\\", ""))   # the quoting Ray's KubeRay autoscaler parses
        limits = spec["template"]["spec"]["containers"][0]["resources"].get("limits", {})
        groups.append(Group(spec["groupName"], _role(spec["groupName"], resources), resources,
                            int(limits.get("nvidia.com/gpu", 0)), spec["minReplicas"], spec["maxReplicas"]))
    return groups


def check_groups(groups: list[Group]) -> None:
    """One group per role; GPU roles hold GPUs and one role resource per GPU, the agent group none; min <= max."""
    roles = sorted(g.role for g in groups)
    if roles != sorted(ROLE_RESOURCES):
        raise ValueError(f"roles {roles}, expected one group each of {sorted(ROLE_RESOURCES)}")
    for g in groups:
        if g.role in GPU_ROLES and not (g.gpus > 0 and g.resources[ROLE_RESOURCES[g.role]] == g.gpus):
            raise ValueError(f"{g.name}: a {g.role} group needs GPUs and one {ROLE_RESOURCES[g.role]} per GPU")
        if g.role not in GPU_ROLES and g.gpus:
            raise ValueError(f"{g.name}: the agent group must not hold GPUs")
        if not 0 <= g.min_workers <= g.max_workers or g.max_workers == 0:
            raise ValueError(f"{g.name}: bounds min {g.min_workers} max {g.max_workers}")


def check_rayjob(rayjob: dict[str, Any], raycluster: dict[str, Any], pvc: dict[str, Any]) -> Path:
    """The entrypoint is `mkb run <experiments/*.yaml> --run-dir <on the PVC>` on our cluster; returns the config."""
    from mkb_ray.cli import build_parser

    argv = shlex.split(rayjob["spec"]["entrypoint"])
    if argv[:2] != ["mkb", "run"]:
        raise ValueError(f"entrypoint {argv[:2]} is not `mkb run`")
    args = build_parser().parse_args(argv[1:])   # SystemExit on an unknown flag
    config = REPO / args.config.relative_to(CHECKOUT_IN_IMAGE)
    if not (config.is_file() and config.parent == REPO / "experiments"):
        raise ValueError(f"{args.config}: no such experiment in experiments/")
    if rayjob["spec"]["clusterSelector"].get("ray.io/cluster") != raycluster["metadata"]["name"]:
        raise ValueError("the RayJob does not select the RayCluster")
    head = raycluster["spec"]["headGroupSpec"]["template"]["spec"]
    claims = {v["name"] for v in head.get("volumes", [])
              if v.get("persistentVolumeClaim", {}).get("claimName") == pvc["metadata"]["name"]}
    mounts = [Path(m["mountPath"]) for c in head["containers"] for m in c.get("volumeMounts", [])
              if m["name"] in claims]
    if args.run_dir is None or not any(args.run_dir.is_relative_to(m) and args.run_dir != m for m in mounts):
        raise ValueError(f"--run-dir {args.run_dir} is not below the PVC's mount on the head {mounts}")
    if any(m["metadata"]["namespace"] != pvc["metadata"]["namespace"] for m in (rayjob, raycluster)):
        raise ValueError("the manifests are in different namespaces")
    return config


def test_every_file_under_clusters_is_checked() -> None:
    files = {str(p.relative_to(CLUSTERS)) for p in CLUSTERS.rglob("*") if p.is_file()}
    assert files == {"aws-vm.yaml", *MANIFESTS}


def test_vm_config_passes_rays_validation() -> None:
    validate_vm(VM)


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_manifest_matches_the_kuberay_schema_subset(name: str) -> None:
    validate_manifest(MANIFESTS[name])


def test_raycluster_converts_to_a_valid_autoscaler_config() -> None:
    derived = autoscaler_config_from_raycluster(RAYCLUSTER)
    nodes = {n: t for n, t in derived["available_node_types"].items() if n != "headgroup"}
    assert ({n: _role(n, t["resources"]) for n, t in nodes.items()}
            == {g.name: g.role for g in kuberay_groups(RAYCLUSTER)})
    assert derived["available_node_types"]["headgroup"]["resources"]["CPU"] == 0   # the driver's node runs no tasks
    assert derived["idle_timeout_minutes"] == VM["idle_timeout_minutes"]


@pytest.mark.parametrize("source", ["vm", "kuberay"])
def test_groups_have_their_role_resource_and_gpus(source: str) -> None:
    check_groups(vm_groups(VM) if source == "vm" else kuberay_groups(RAYCLUSTER))


def test_vm_and_kuberay_declare_the_same_resources_per_role() -> None:
    def per_role(groups: list[Group]) -> dict[str, set[str]]:
        return {g.role: {r for r in g.resources if r.startswith("mkb_")} for g in groups}

    assert (per_role(vm_groups(VM)) == per_role(kuberay_groups(RAYCLUSTER))
            == {r: {n} for r, n in ROLE_RESOURCES.items()})
    assert VM["available_node_types"][VM["head_node_type"]]["resources"] == {"CPU": 0}


def test_the_scheduler_asks_for_the_resources_the_configs_offer() -> None:
    """The names the configs give their groups are the ones `roles` placement requests: a typo on either side
    would leave every trial pending on a cluster that never grows the right group."""
    from mkb_ray.campaign.placement import AGENT_RESOURCE, EVAL_RESOURCE, MODEL_RESOURCE, Placement

    assert (MODEL_RESOURCE, EVAL_RESOURCE, AGENT_RESOURCE) == (ROLE_RESOURCES["model"], ROLE_RESOURCES["eval"],
                                                               ROLE_RESOURCES["agent"])
    roles = Placement.of("roles")
    assert set(roles.trial) == {AGENT_RESOURCE} and set(roles.evaluator) == {EVAL_RESOURCE}
    assert Placement.of("local").trial == {} and Placement.of("local").evaluator == {}


def test_rayjob_runs_a_real_campaign_on_the_pvc() -> None:
    assert check_rayjob(RAYJOB, RAYCLUSTER, PVC).name == "benchmark-6model.yaml"


def test_setup_installs_the_gpu_extra_in_one_line() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any("ray[llm]==" in pin for pin in extras["gpu"])
    assert [c for c in VM["setup_commands"] if 'pip install -e ".[gpu]"' in c] and len(VM["setup_commands"]) == 1


# Mutations: each must be caught, naming what is wrong.
def _mutated(config: dict[str, Any], edit: Any) -> dict[str, Any]:
    config = copy.deepcopy(config)
    edit(config)
    return config


def test_vm_with_a_misspelt_field_fails_rays_schema() -> None:
    def typo(c: dict[str, Any]) -> None:
        c["available_node_types"]["mkb.eval"]["max_worker"] = c["available_node_types"]["mkb.eval"].pop("max_workers")

    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        validate_vm(_mutated(VM, typo))


def test_vm_group_without_max_workers_fails() -> None:
    config = _mutated(VM, lambda c: c["available_node_types"]["mkb.agent"].pop("max_workers"))
    validate_vm(config)   # Ray accepts it (the global max applies) ...
    with pytest.raises(ValueError, match="lacks"):
        vm_groups(config)   # ... our check wants each group's own bound


def test_resource_name_typo_fails() -> None:
    def typo(c: dict[str, Any]) -> None:
        c["spec"]["workerGroupSpecs"][1]["rayStartParams"]["resources"] = '"{\\"mkb_evals_gpu\\": 1}"'

    with pytest.raises(ValueError, match="declares 0"):
        check_groups(kuberay_groups(_mutated(RAYCLUSTER, typo)))


def test_evaluator_group_without_gpus_fails() -> None:
    def no_gpu(c: dict[str, Any]) -> None:
        c["available_node_types"]["mkb.eval"]["resources"].pop("GPU")

    with pytest.raises(ValueError, match="needs GPUs"):
        check_groups(vm_groups(_mutated(VM, no_gpu)))


@pytest.mark.parametrize("edit,match", [
    (lambda c: c["spec"]["workerGroupSpecs"][0].pop("maxReplicas"), "maxReplicas"),
    (lambda c: c["spec"]["autoscalerOptions"].update(upscalingMode="Fast"), "Fast"),
    (lambda c: c["spec"]["headGroupSpec"]["template"]["spec"].update(containers=[]), "non-empty|short"),
    (lambda c: c["spec"].update(enableInTreeAutoscale=True), "enableInTreeAutoscale"),
])
def test_broken_raycluster_fails_the_schema(edit: Any, match: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=match):
        validate_manifest(_mutated(RAYCLUSTER, edit))


def test_raycluster_with_min_above_max_fails() -> None:
    config = _mutated(RAYCLUSTER, lambda c: c["spec"]["workerGroupSpecs"][2].update(minReplicas=20))
    with pytest.raises(ValueError, match="bounds"):
        check_groups(kuberay_groups(config))


def test_rayjob_without_a_cluster_fails_the_schema() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_manifest(_mutated(RAYJOB, lambda c: c["spec"].pop("clusterSelector")))


@pytest.mark.parametrize("entrypoint,error", [
    ("mkb run /home/ray/mkb-ray/experiments/benchmark-6model.yaml --run-dir /tmp/x", "not below the PVC"),
    ("mkb run /home/ray/mkb-ray/experiments/no-such.yaml --run-dir /runs/x", "no such experiment"),
    ("mkb plan /home/ray/mkb-ray/experiments/benchmark-6model.yaml", "not `mkb run`"),
])
def test_rayjob_with_a_bad_entrypoint_fails(entrypoint: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        check_rayjob(_mutated(RAYJOB, lambda c: c["spec"].update(entrypoint=entrypoint)), RAYCLUSTER, PVC)


def test_rayjob_with_an_unknown_flag_fails() -> None:
    job = _mutated(RAYJOB, lambda c: c["spec"].update(entrypoint=c["spec"]["entrypoint"] + " --rundir /runs/y"))
    with pytest.raises(SystemExit):
        check_rayjob(job, RAYCLUSTER, PVC)


def test_pvc_with_an_unknown_access_mode_fails() -> None:
    with pytest.raises(jsonschema.ValidationError, match="ReadWriteOnly"):
        validate_manifest(_mutated(PVC, lambda c: c["spec"].update(accessModes=["ReadWriteOnly"])))
