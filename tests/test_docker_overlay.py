"""The docker/ compose overlay and Dockerfile, checked without a container engine.

Compose and Docker cannot run here; these tests check what would make `docker compose -f
<quickstart> -f docker/docker-compose.reflex.yml up` fail or misbehave: paths that do not exist,
a config the command does not find, variables the pipeline config needs but nobody sets, and a
base image that does not fit the package's pins.
"""

from __future__ import annotations

import re
import shlex
from importlib.metadata import requires
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from datahub_actions.plugin.source.kafka.kafka_event_source import KafkaEventSourceConfig
from packaging.requirements import Requirement
from packaging.version import Version

from reflex_actions.action.config import ReflexConfig
from tests.loop.configs import (
    PRODUCTION,
    VARIABLE,
    load_pipeline,
    referenced_variables,
)

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
OVERLAY = DOCKER / "docker-compose.reflex.yml"
DOCKERFILE = DOCKER / "Dockerfile"
SERVICE = "datahub-reflex"
CONFIG_MOUNT = "/etc/datahub/actions/conf"
QUICKSTART = {
    "DATAHUB_GMS_URL": "http://datahub-gms:8080",
    "KAFKA_BOOTSTRAP_SERVER": "broker:29092",
    "SCHEMA_REGISTRY_URL": "http://datahub-gms:8080/schema-registry/api/",
}


def unset(value: str) -> str:
    """A compose value with every ``${VAR:-default}`` as compose fills it when VAR is unset."""

    def default(match: re.Match[str]) -> str:
        return (match.group("default") or "").removeprefix(":").removeprefix("-")

    return VARIABLE.sub(default, value)


def host_path(source: str) -> Path:
    """A relative path in the overlay, resolved against the overlay's folder."""
    return (DOCKER / unset(source)).resolve()


@pytest.fixture(scope="module")
def overlay() -> dict[str, Any]:
    loaded = yaml.safe_load(OVERLAY.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def service(overlay: dict[str, Any]) -> dict[str, Any]:
    # an overlay adds its service; it redefines none of the quickstart's
    assert set(overlay["services"]) == {SERVICE}
    return overlay["services"][SERVICE]


@pytest.fixture(scope="module")
def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service["environment"]
    assert isinstance(env, dict)
    return {name: unset(str(value)) for name, value in env.items()}


def _volumes(service: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Container path -> (source, mode) of each short-syntax volume."""
    mounts = {}
    for volume in service["volumes"]:
        source, target, *mode = unset(str(volume)).split(":")
        mounts[target] = (source, mode[0] if mode else "rw")
    return mounts


def test_the_service_is_built_from_the_repository(service: dict[str, Any]) -> None:
    build = service["build"]
    context = host_path(build["context"])
    assert context == ROOT
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE
    assert DOCKERFILE.is_file()


def test_it_starts_after_the_quickstart_gms_and_broker(service: dict[str, Any]) -> None:
    assert service["depends_on"] == {
        "datahub-gms": {"condition": "service_healthy"},
        "broker": {"condition": "service_healthy"},
    }


def test_it_talks_to_the_quickstart_services(environment: dict[str, str]) -> None:
    for name, value in QUICKSTART.items():
        assert environment[name] == value


def test_the_command_runs_the_mounted_reflex_yaml(service: dict[str, Any]) -> None:
    source, mode = _volumes(service)[CONFIG_MOUNT]
    assert mode == "ro"
    assert host_path(source) == ROOT / "action_configs"
    command = service["command"]
    words = command if isinstance(command, list) else shlex.split(command)
    assert words[:2] == ["datahub", "actions"]
    config = PurePosixPath(words[words.index("-c") + 1])
    assert config.is_relative_to(CONFIG_MOUNT)
    mapped = host_path(source) / config.relative_to(CONFIG_MOUNT)
    assert mapped == PRODUCTION and mapped.is_file()


def test_histories_and_landing_live_on_a_declared_volume(
    overlay: dict[str, Any], service: dict[str, Any], environment: dict[str, str]
) -> None:
    named = {
        target: source
        for target, (source, _) in _volumes(service).items()
        if source in (overlay.get("volumes") or {})
    }
    assert named, "no named volume for histories and landing"
    for variable in ("REFLEX_HISTORIES", "REFLEX_LANDING"):
        path = PurePosixPath(environment[variable])
        assert any(path.is_relative_to(target) for target in named), variable


def test_every_variable_is_one_reflex_yaml_reads(environment: dict[str, str]) -> None:
    read = referenced_variables(PRODUCTION)
    assert not [
        name for name, has_default in read.items() if not has_default and name not in environment
    ]
    assert set(environment) <= set(read), "the overlay sets variables reflex.yaml never reads"
    assert set(QUICKSTART) <= set(read)


def test_reflex_yaml_in_the_container_points_at_the_quickstart(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in referenced_variables(PRODUCTION):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        if value:  # compose passes an empty value; the loader treats it like the default
            monkeypatch.setenv(name, value)

    config = load_pipeline(PRODUCTION)

    assert config.datahub is not None
    assert config.datahub.server == QUICKSTART["DATAHUB_GMS_URL"]
    kafka = KafkaEventSourceConfig.model_validate(config.source.config).connection
    assert kafka.bootstrap == QUICKSTART["KAFKA_BOOTSTRAP_SERVER"]
    assert kafka.schema_registry_url == QUICKSTART["SCHEMA_REGISTRY_URL"]
    reflex = ReflexConfig.model_validate(config.action.config)
    assert str(reflex.histories.root) == environment["REFLEX_HISTORIES"]
    assert [str(root) for root in reflex.landing.allowed_roots] == [environment["REFLEX_LANDING"]]


# --- Dockerfile ----------------------------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined, current = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        joined.append(current + line.strip())
        current = ""
    return [(i.split(None, 1)[0].upper(), i.split(None, 1)[1]) for i in joined]


def base_image() -> str:
    """The FROM image with ARG defaults substituted."""
    defaults: dict[str, str] = {}
    for keyword, arguments in instructions(DOCKERFILE):
        if keyword == "ARG" and "=" in arguments:
            name, value = arguments.split("=", 1)
            defaults[name.strip()] = value.strip().strip('"')
        if keyword == "FROM":
            image = arguments.split()[0]
            return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults[m[1] or m[2]], image)
    raise AssertionError("no FROM")


def test_the_image_extends_a_datahub_actions_1x_release() -> None:
    repository, tag = base_image().split(":")
    assert repository == "acryldata/datahub-actions"
    match = re.fullmatch(r"v(\d+\.\d+\.\d+(?:\.\d+)?)(?:-slim)?", tag)
    assert match, f"not a release tag: {tag}"
    version = Version(match[1])
    assert version.major == 1
    # the image's datahub packages are the ones the package pins, so the install adds Reflex
    # instead of replacing the image's DataHub
    pins = {Requirement(r).name: Requirement(r).specifier for r in requires("datahub-reflex") or []}
    assert pins["acryl-datahub-actions"].contains(version)
    assert pins["acryl-datahub"].contains(version)


def test_the_image_installs_this_package_from_the_build_context() -> None:
    steps = instructions(DOCKERFILE)
    copies = [a.split() for k, a in steps if k == "COPY"]
    destinations = {}
    for words in copies:
        paths = [w for w in words if not w.startswith("--")]
        *sources, destination = paths
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            destinations[source] = destination
    assert {"pyproject.toml", "reflex_actions"} <= set(destinations)
    installs = [a for k, a in steps if k == "RUN" and re.search(r"\bpip install\b", a)]
    assert installs, "no pip install"
    package = destinations["pyproject.toml"].rstrip("/")
    assert any(
        re.search(rf"pip install [^&;]*{re.escape(package)}(?:\s|$|/?\[)", a) for a in installs
    )


def test_the_build_context_keeps_what_the_image_copies() -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    rules = [line.strip() for line in ignore if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"  # everything else (.venv, snapshots, bench) stays out of the context
    for keyword, arguments in instructions(DOCKERFILE):
        if keyword == "COPY":
            for source in [w for w in arguments.split() if not w.startswith("--")][:-1]:
                assert f"!{source}" in rules, f"{source} is excluded from the build context"


def test_the_readme_shows_the_overlay_command() -> None:
    readme = (DOCKER / "README.md").read_text(encoding="utf-8")
    command = " ".join(readme.replace("\\\n", " ").split())
    overlay = r"docker compose -f <quickstart compose file> -f docker/docker-compose\.reflex\.yml"
    assert re.search(overlay + r" up", command)
