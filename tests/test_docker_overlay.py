"""The docker/ compose overlays and Dockerfile, checked without a container engine.

Compose and Docker cannot run here; these tests check what would make `docker compose -f
<quickstart> -f docker/docker-compose.reflex.yml up` fail or misbehave: dependencies, profiles,
networks and addresses that the real quickstart file does not have, paths that do not exist, a
config the command does not find, variables the pipeline config needs but nobody sets, and a
base image that does not fit the package's pins. The quickstart side is the compose file that
the DataHub 1.7 CLI starts (tests/fixtures/quickstart/), not a description of it written here.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Iterable
from importlib.metadata import requires
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from datahub.cli.docker_check import get_compose_project_name
from datahub.cli.docker_cli import QUICKSTART_COMPOSE_FILE
from datahub_actions.plugin.source.kafka.kafka_event_source import KafkaEventSourceConfig
from packaging.requirements import Requirement
from packaging.version import Version

from reflex_actions.config import ReflexConfig
from tests.loop.configs import (
    PRODUCTION,
    VARIABLE,
    load_pipeline,
    referenced_variables,
)

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
OVERLAY = DOCKER / "docker-compose.reflex.yml"
AUTH_OVERLAY = DOCKER / "docker-compose.auth.yml"
DOCKERFILE = DOCKER / "Dockerfile"
QUICKSTART_FILE = (
    ROOT / "tests" / "fixtures" / "quickstart" / QUICKSTART_COMPOSE_FILE.split("/")[-1]
)
SERVICE = "datahub-reflex"
CONFIG_MOUNT = "/etc/datahub/actions/conf"
#: the variables through which reflex.yaml reaches the quickstart's GMS, broker and registry
ADDRESSES = ("DATAHUB_GMS_URL", "KAFKA_BOOTSTRAP_SERVER", "SCHEMA_REGISTRY_URL")


def unset(value: str) -> str:
    """A compose value with every ``${VAR:-default}`` as compose fills it when VAR is unset."""

    def default(match: re.Match[str]) -> str:
        return (match.group("default") or "").removeprefix(":").removeprefix("-")

    return VARIABLE.sub(default, value)


def host_path(source: str) -> Path:
    """A relative path in the overlay, resolved against the overlay's folder."""
    return (DOCKER / unset(source)).resolve()


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), f"{path.name}: not a compose mapping"
    return loaded


# --- the quickstart of the DataHub 1.7 CLI -------------------------------------------------------


def cli_profiles() -> set[str]:
    """The profiles `datahub docker quickstart` passes to compose, read from the installed CLI."""
    spec = importlib.util.find_spec("datahub.cli.docker_cli")
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    profiles = set(re.findall(r'"--profile",\s*"([^"]+)"', source))
    assert profiles, "the CLI passes no --profile"
    return profiles


def merge(base: Any, override: Any) -> Any:
    """``override`` laid over ``base`` the way ``docker compose -f base -f override`` merges the
    mappings these files use: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: merge(base[k], v) if k in base else v for k, v in {**base, **override}.items()}
    return override


def enabled(model: dict[str, Any], active: Iterable[str]) -> set[str]:
    """The services compose runs with these profiles active (no profiles = always)."""
    active = set(active)
    return {
        name
        for name, service in model["services"].items()
        if not service.get("profiles") or active & set(service["profiles"])
    }


def networks(service: dict[str, Any]) -> set[str]:
    """The networks a service joins; a service naming none joins the project's ``default``."""
    return set(service.get("networks") or ["default"])


def container_ports(service: dict[str, Any]) -> set[int]:
    return {int(port["target"]) for port in service.get("ports", [])} | {
        int(port) for port in service.get("expose", [])
    }


@pytest.fixture(scope="module")
def quickstart() -> dict[str, Any]:
    return _load(QUICKSTART_FILE)


@pytest.fixture(scope="module")
def overlay() -> dict[str, Any]:
    return _load(OVERLAY)


@pytest.fixture(scope="module")
def model(quickstart: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """The quickstart with the Reflex overlay, as compose builds the project."""
    return merge(quickstart, overlay)


def _the_one(quickstart: dict[str, Any], what: str, test: Any) -> str:
    (name,) = [n for n, s in quickstart["services"].items() if test(s)] or [None]
    assert name is not None, f"the quickstart file has no {what}"
    return name


@pytest.fixture(scope="module")
def gms(quickstart: dict[str, Any]) -> str:
    """GMS: the service the CLI's own health check finds by this label."""
    return _the_one(
        quickstart,
        "GMS",
        lambda s: s.get("labels", {}).get("io.datahubproject.datahub.component") == "gms",
    )


@pytest.fixture(scope="module")
def broker(quickstart: dict[str, Any]) -> str:
    return _the_one(
        quickstart,
        "Kafka broker",
        lambda s: "KAFKA_ADVERTISED_LISTENERS" in s.get("environment", {}),
    )


@pytest.fixture(scope="module")
def quickstart_addresses(quickstart: dict[str, Any]) -> dict[str, str]:
    """GMS, broker and schema registry as the quickstart's own actions container reaches them."""
    consumers = [
        s["environment"]
        for s in quickstart["services"].values()
        if "SCHEMA_REGISTRY_URL" in s.get("environment", {})
    ]
    assert len(consumers) == 1, "expected one actions container in the quickstart file"
    env = consumers[0]
    gms_url = f"{env['DATAHUB_GMS_PROTOCOL']}://{env['DATAHUB_GMS_HOST']}:{env['DATAHUB_GMS_PORT']}"
    return {
        "DATAHUB_GMS_URL": gms_url,
        "KAFKA_BOOTSTRAP_SERVER": env["KAFKA_BOOTSTRAP_SERVER"],
        "SCHEMA_REGISTRY_URL": env["SCHEMA_REGISTRY_URL"],
    }


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


def test_the_fixture_is_the_file_the_1_7_cli_starts(
    quickstart: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    header = QUICKSTART_FILE.read_text(encoding="utf-8").splitlines()[0]
    match = re.fullmatch(r"# source: datahub-project/datahub@([0-9a-f]{40}):(\S+)", header)
    assert match, "the fixture does not name its source"
    assert match[2] == QUICKSTART_COMPOSE_FILE
    monkeypatch.delenv("DATAHUB_COMPOSE_PROJECT_NAME", raising=False)
    assert quickstart["name"] == get_compose_project_name()  # the CLI's `-p`


def test_the_service_is_built_from_the_repository(service: dict[str, Any]) -> None:
    build = service["build"]
    context = host_path(build["context"])
    assert context == ROOT
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE
    assert DOCKERFILE.is_file()


def test_it_starts_after_the_quickstart_gms_and_broker_are_healthy(
    service: dict[str, Any], quickstart: dict[str, Any], gms: str, broker: str
) -> None:
    assert set(service["depends_on"]) == {gms, broker}
    for name, dependency in service["depends_on"].items():
        assert dependency["condition"] == "service_healthy", name
        assert quickstart["services"][name].get("healthcheck"), f"{name} has no healthcheck"


def test_the_cli_profile_starts_it_with_its_dependencies(
    model: dict[str, Any], service: dict[str, Any]
) -> None:
    running = enabled(model, cli_profiles())
    assert SERVICE in running
    assert set(service["depends_on"]) <= running


def test_no_profile_leaves_a_service_depending_on_a_disabled_one(
    model: dict[str, Any],
) -> None:
    """Compose refuses a project in which an enabled service depends on a disabled one, so the
    overlay must be valid under every profile of the quickstart file, and under none."""
    profiles = {p for s in model["services"].values() for p in s.get("profiles", [])}
    problems = []
    for active in [set(), *({p} for p in sorted(profiles))]:
        running = enabled(model, active)
        for name in sorted(running):
            missing = set(model["services"][name].get("depends_on", {})) - running
            if missing:
                problems.append(f"profile {sorted(active)}: {name} depends on {sorted(missing)}")
    assert not problems, problems


def test_it_joins_the_network_of_gms_and_broker(
    model: dict[str, Any], quickstart: dict[str, Any], gms: str, broker: str
) -> None:
    assert model["networks"] == quickstart["networks"]  # datahub_network, not renamed
    ours = networks(model["services"][SERVICE])
    assert ours <= set(model["networks"])
    for name in (gms, broker):
        assert ours & networks(model["services"][name]), f"no network shared with {name}"


def test_it_talks_to_the_quickstart_services_where_they_do(
    environment: dict[str, str], quickstart_addresses: dict[str, str]
) -> None:
    for name in ADDRESSES:
        assert environment[name] == quickstart_addresses[name], name


def test_it_reaches_gms_at_its_hostname_and_port(
    environment: dict[str, str], quickstart: dict[str, Any], gms: str
) -> None:
    url = urlsplit(environment["DATAHUB_GMS_URL"])
    assert url.hostname == quickstart["services"][gms]["hostname"]
    assert url.port in container_ports(quickstart["services"][gms])


def test_it_reaches_the_broker_at_its_in_network_advertised_listener(
    environment: dict[str, str], quickstart: dict[str, Any], broker: str
) -> None:
    """After bootstrap a client connects to the advertised address: the one for containers."""
    definition = quickstart["services"][broker]
    listeners = definition["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(",")
    advertised = {urlsplit(listener).netloc for listener in listeners}
    bootstrap = environment["KAFKA_BOOTSTRAP_SERVER"]
    assert bootstrap in advertised
    assert bootstrap.rsplit(":", 1)[0] == definition["hostname"]  # not EXTERNAL://localhost


def test_it_reads_schemas_from_the_registry_gms_serves(
    environment: dict[str, str], quickstart: dict[str, Any], gms: str
) -> None:
    gms_env = quickstart["services"][gms]["environment"]
    assert gms_env["SCHEMA_REGISTRY_TYPE"] == "INTERNAL"
    assert environment["SCHEMA_REGISTRY_URL"] == gms_env["KAFKA_SCHEMAREGISTRY_URL"]
    assert (
        urlsplit(environment["SCHEMA_REGISTRY_URL"]).hostname
        == (quickstart["services"][gms]["hostname"])
    )


def test_the_auth_overlay_turns_metadata_service_auth_on(
    model: dict[str, Any], quickstart: dict[str, Any], gms: str
) -> None:
    """GMS and the frontend both need METADATA_SERVICE_AUTH_ENABLED, as a literal: the CLI
    exports it as false, so a ``${...}`` reference would turn it off again. Reflex trusts the
    actors an unauthenticated GMS records only without this overlay."""
    auth = _load(AUTH_OVERLAY)
    assert set(auth) == {"services"}
    assert set(auth["services"]) <= set(model["services"]), "overrides an unknown service"
    frontend = _the_one(quickstart, "frontend", lambda s: "datahub-frontend" in s.get("image", ""))
    assert set(auth["services"]) == {gms, frontend, SERVICE}
    assert quickstart["services"][gms]["environment"]["METADATA_SERVICE_AUTH_ENABLED"] == "false"
    merged = merge(model, auth)
    for name in (gms, frontend):
        assert auth["services"][name] == {"environment": {"METADATA_SERVICE_AUTH_ENABLED": "true"}}
        assert merged["services"][name]["environment"]["METADATA_SERVICE_AUTH_ENABLED"] == "true"
        assert merged["services"][name]["profiles"] == quickstart["services"][name]["profiles"]
    trust = "REFLEX_TRUST_UNAUTHENTICATED_ACTORS"
    assert model["services"][SERVICE]["environment"][trust] == "true"
    assert merged["services"][SERVICE]["environment"][trust] == "false"


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
    assert set(ADDRESSES) <= set(read)


def test_reflex_yaml_in_the_container_points_at_the_quickstart(
    environment: dict[str, str],
    quickstart_addresses: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in referenced_variables(PRODUCTION):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        if value:  # compose passes an empty value; the loader treats it like the default
            monkeypatch.setenv(name, value)

    config = load_pipeline(PRODUCTION)

    assert config.datahub is not None
    assert config.datahub.server == quickstart_addresses["DATAHUB_GMS_URL"]
    kafka = KafkaEventSourceConfig.model_validate(config.source.config).connection
    assert kafka.bootstrap == quickstart_addresses["KAFKA_BOOTSTRAP_SERVER"]
    assert kafka.schema_registry_url == quickstart_addresses["SCHEMA_REGISTRY_URL"]
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


def test_the_readme_starts_the_overlay_the_way_the_cli_starts_the_quickstart(
    quickstart: dict[str, Any],
) -> None:
    """Same project, profile and quickstart file as `datahub docker quickstart`, or compose
    builds a second project, or leaves the quickstart's services (all in profiles) out."""
    readme = (DOCKER / "README.md").read_text(encoding="utf-8")
    command = " ".join(readme.replace("\\\n", " ").split())
    (profile,) = cli_profiles()
    expected = (
        rf"docker compose -p {quickstart['name']} --profile {profile} "
        r"-f ~/\.datahub/quickstart/docker-compose\.yml -f docker/docker-compose\.reflex\.yml up"
    )
    assert re.search(expected, command), expected
