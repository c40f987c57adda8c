"""The task specification: Harbor task.toml (schema 1.0-1.4) and Terminal-Bench task.yaml loaded into
the Task model, every key carried or refused with a one-line error, and task discovery."""

import os
import textwrap
from pathlib import Path

import pytest

from tbscale.errors import TbscaleError
from tbscale.tasks import discover, discover_task_dirs, load_task, load_tasks
from tbscale.tasks.envvars import EnvTable
from tbscale.tasks.model import DEFAULT_AGENT_TIMEOUT_SEC, NetworkPolicy

HERE = Path(__file__).parent
CONFORMANCE = HERE / "conformance"
# A checkout of Harbor's repository (its examples/ and cookbook/ task folders), when given:
# TBSCALE_HARBOR_CHECKOUT=/path/to/harbor pytest tests/test_task_spec.py
HARBOR = Path(os.environ.get("TBSCALE_HARBOR_CHECKOUT", "/nonexistent"))


def harbor(root: Path, toml: str, *, name: str = "t", instruction: str | None = "Do it.\n",
           dockerfile: str | None = "FROM debian:bookworm-slim\n", test_sh: str | None = "echo 1 > /logs/verifier/reward.txt\n",
           files: dict[str, str | bytes] | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "task.toml").write_text(textwrap.dedent(toml))
    if instruction is not None:
        (d / "instruction.md").write_text(instruction)
    (d / "environment").mkdir()
    if dockerfile is not None:
        (d / "environment" / "Dockerfile").write_text(dockerfile)
    if test_sh is not None:
        (d / "tests").mkdir()
        (d / "tests" / "test.sh").write_text(test_sh)
    for rel, content in (files or {}).items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
    return d


def refused(path: Path) -> str:
    with pytest.raises(TbscaleError) as err:
        load_task(path)
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


# ---- every key of schema 1.4 ---------------------------------------------------------------------

FULL = """\
schema_version = "1.4"
source = "tbscale-tests"
multi_step_reward_strategy = "final"
artifacts = ["/app/a.txt", { source = "/app/out", destination = "out", exclude = ["*.tmp"] },
             { source = "/data/db.json", service = "db" }]

[task]
name = "tbscale/full"
version = "2.1.0"
description = "every key"
authors = [{ name = "A. Author", email = "a@example.invalid" }, { name = "B" }]
keywords = ["k1", "k2"]

[metadata]
difficulty = "hard"
nested = { anything = [1, 2] }

[environment]
build_timeout_sec = 900
docker_image = "python:3.11-slim-bookworm"
os = "Linux"
cpus = 2
memory_mb = 1536
storage_mb = 4096
gpus = 1
gpu_types = ["H100"]
workdir = "/srv"
network_mode = "allowlist"
allowed_hosts = ["DB.", "*.Example.com", "10.0.0.0/8", "::1"]
skills_dir = "/opt/skills"

[environment.env]
PLAIN = "v"
FROM_HOST = "${TBSCALE_TEST_HOST_VAR:-fallback}"

[environment.healthcheck]
command = "true"
interval_sec = 2
timeout_sec = 3
start_period_sec = 4
start_interval_sec = 0.5
retries = 7

[[environment.mcp_servers]]
name = "local"
transport = "stdio"
command = "python3"
args = ["/opt/mcp.py", "--quiet"]

[[environment.mcp_servers]]
name = "remote"
transport = "http"
url = "http://db:8000/mcp"

[agent]
timeout_sec = 321
user = "agent"
network_mode = "no-network"

[verifier]
timeout_sec = 45
user = 1001
environment_mode = "separate"
network_mode = "public"

[verifier.env]
V = "1"

[verifier.environment]
docker_image = "debian:bookworm-slim"
network_mode = "no-network"
memory_mb = 256

[[verifier.collect]]
command = "dump"
service = "db"
timeout_sec = 12
user = "root"

[[verifier.collect]]
command = "sync"

[solution.env]
S = "s"
"""

COMPOSE_DB = "services:\n  main:\n    depends_on: [db]\n  db:\n    image: python:3.11-slim-bookworm\n"


def test_every_key_of_schema_1_4_is_carried(tmp_path, monkeypatch):
    monkeypatch.delenv("TBSCALE_TEST_HOST_VAR", raising=False)
    d = harbor(tmp_path, FULL, files={"environment/docker-compose.yaml": COMPOSE_DB, "tests/Dockerfile": "FROM x\n",
                                      "solution/solve.sh": "true\n", "trajectory.json": "{}"})
    t = load_task(d)
    assert (t.schema_version, t.source, t.multi_step_reward_strategy, t.name) == ("1.4", "tbscale-tests", "final",
                                                                                "tbscale/full")
    assert t.package.version == "2.1.0" and [a.name for a in t.package.authors] == ["A. Author", "B"]
    assert t.package.keywords == ["k1", "k2"] and t.metadata["nested"] == {"anything": [1, 2]}
    assert [(a.source, a.destination, a.exclude, a.effective_service) for a in t.artifacts] == [
        ("/app/a.txt", None, [], "main"), ("/app/out", "out", ["*.tmp"], "main"), ("/data/db.json", None, [], "db")]
    e = t.environment
    assert (e.build_timeout_sec, e.image, e.os, e.cpus, e.memory_mb, e.storage_mb, e.gpus, e.gpu_types, e.workdir) == (
        900, "python:3.11-slim-bookworm", "linux", 2, 1536, 4096, 1, ["H100"], "/srv")
    assert e.network == NetworkPolicy("allowlist", ("db", "*.example.com", "10.0.0.0/8", "::1"))
    assert e.compose_file.name == "docker-compose.yaml" and e.services == ["main", "db"] and e.sidecars == ["db"]
    assert e.skills_dir == "/opt/skills"
    assert e.env.raw == {"PLAIN": "v", "FROM_HOST": "${TBSCALE_TEST_HOST_VAR:-fallback}"}
    assert e.env.resolve() == {"PLAIN": "v", "FROM_HOST": "fallback"}
    hc = e.healthcheck
    assert (hc.command, hc.interval_sec, hc.timeout_sec, hc.start_period_sec, hc.start_interval_sec, hc.retries) == (
        "true", 2, 3, 4, 0.5, 7)
    assert [(m.name, m.transport, m.command, m.args, m.url) for m in e.mcp_servers] == [
        ("local", "stdio", "python3", ["/opt/mcp.py", "--quiet"], None),
        ("remote", "streamable-http", None, [], "http://db:8000/mcp")]
    assert (t.agent.timeout_sec, t.agent.user, t.agent.network.mode) == (321, "agent", "no-network")
    v = t.verifier
    assert (v.timeout_sec, v.user, v.mode, v.network.mode, v.env.raw) == (45, 1001, "separate", "public", {"V": "1"})
    assert v.environment.image == "debian:bookworm-slim" and v.environment.network.mode == "no-network"
    assert v.environment.memory_mb == 256 and v.environment.context_dir == d / "tests" and not v.upload_tests
    assert [(c.command, c.service, c.timeout_sec, c.user) for c in v.collect] == [
        ("dump", "db", 12, "root"), ("sync", "main", 60.0, None)]
    assert t.solution.env.raw == {"S": "s"} and t.solution.dir == d / "solution"
    assert t.trajectory == d / "trajectory.json"
    # The flat attributes other modules read.
    assert (t.image, t.environment_dir, t.workdir, t.cpus, t.memory_mb, t.allow_internet) == (
        "python:3.11-slim-bookworm", None, "/srv", 2.0, 1536, False)
    assert (t.agent_timeout_sec, t.verifier_timeout_sec, t.build_timeout_sec) == (321, 45, 900)
    assert t.extra["verifier_env"] == {"V": "1"}


def test_harbor_defaults(tmp_path):
    t = load_task(harbor(tmp_path, 'schema_version = "1.4"\n'))
    assert t.environment.network == NetworkPolicy("public") and t.allow_internet
    assert t.agent.network == NetworkPolicy("public") and t.agent.network_override is None
    assert t.verifier.timeout_sec == 600 and t.verifier.mode == "shared" and t.verifier.upload_tests
    assert t.agent.timeout_sec is None and t.agent_timeout_sec == DEFAULT_AGENT_TIMEOUT_SEC
    assert (t.environment.cpus, t.environment.memory_mb, t.cpus, t.memory_mb) == (None, None, 1.0, 2048)
    assert t.environment.build_timeout_sec == 600 and t.environment.os == "linux"
    assert t.reward.source == "file" and t.reward.files == ("reward.json", "reward.txt")
    assert t.steps == [] and not t.is_multi_step and t.name == "t"


@pytest.mark.parametrize("env, mode", [
    ("allow_internet = false", "no-network"),
    ("allow_internet = true", "public"),
    ("allow_internet = false\nnetwork_mode = \"no-network\"", "no-network"),
    ("allow_internet = false\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"x\"]", "allowlist"),
    ("network_mode = \"no-network\"", "no-network"),
])
def test_allow_internet_maps_to_network_mode(tmp_path, env, mode):
    t = load_task(harbor(tmp_path, f'version = "1.0"\n[environment]\n{env}\n'))
    assert t.environment.network.mode == mode and t.allow_internet == (mode == "public")


def test_schema_1_0_deprecated_sizes(tmp_path):
    t = load_task(harbor(tmp_path, 'version = "1.0"\n[environment]\nmemory = "2G"\nstorage = "512M"\n'))
    assert (t.environment.memory_mb, t.environment.storage_mb, t.memory_mb) == (2048, 512, 2048)


def test_reward_key_policy():
    from tbscale.tasks.model import RewardSpec
    r = RewardSpec()
    assert r.primary({"reward": 0.5, "style": 1}) == 0.5
    assert r.primary({"score": 1}) == 1.0
    assert r.primary({"a": 1, "b": 0}) is None


# ---- refusals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("toml, expected", [
    ('[environment]\nos = "windows"\n', '[environment].os = "windows": windows tasks are not supported'),
    ('[environment]\nos = "Windows"\nworkdir = "C:\\\\app"\n', "windows tasks are not supported"),
    ('[verifier.environment]\nos = "windows"\n', "[verifier.environment].os"),
    ('[environment]\nos = "macos"\n', "[environment].os: Input should be 'linux' or 'windows'"),
    ('[environment]\ncpus = "two"\n', "[environment].cpus: Input should be a valid integer"),
    ('[environment]\ncpus = 0\n', "`cpus` must be a positive number"),
    ('[agent]\ntimeout_sec = -5\n', "[agent].timeout_sec: `timeout_sec` must be a positive number"),
    ('[environment]\nworkdir = "app"\n', "`workdir` must be an absolute path"),
    ('[environment]\nallowed_hosts = ["x"]\n', 'allowed_hosts is only valid with network_mode = "allowlist"'),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["http://x/"]\n', "is not a hostname, IP address"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["x:80"]\n', "(no URLs or ports)"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.*.com"]\n', "wildcards must be a leading"),
    ('[environment]\nnetwork_mode = "private"\n', "[environment].network_mode: Input should be"),
    ('[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n', "allow_internet = true contradicts"),
    ('[environment]\nmemory = "2G"\nmemory_mb = 1024\n', "conflicts with `memory_mb`"),
    ('[environment]\nmemory = "lots"\n', "expected a size like"),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n',
     'environment_mode = "shared" cannot be combined'),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "sse"\n', "`url` is required for transport 'sse'"),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "stdio"\n', "`command` is required"),
    ('artifacts = [{ source = "/a", destination = "/abs" }]\n', "artifact destination must be a relative path"),
    ('artifacts = [{ source = "/a", destination = "manifest.json" }]\n', "reserved"),
    ('artifacts = ["/a/../etc"]\n', "must not contain '..'"),
    ('artifacts = [{ source = "rel", service = "db" }]\n', "needs an absolute source path"),
    ('artifacts = [{ source = "/d", service = "db" }]\n', "names service 'db', but the task has no"),
    ('[[verifier.collect]]\ncommand = "x"\nservice = "db"\n', "[[verifier.collect]] names service 'db'"),
    ('[task]\nname = "no-org"\n', '[task].name: must be "org/name"'),
    ('[task]\nname = "o/n"\nversion = ""\n', "[task].version"),
    ('schema_version = "2.0"\n', "is not a task.toml schema this loader knows"),
    ('version = "1.0"\nschema_version = "1.1"\n', "both `version` = '1.0' and `schema_version` = '1.1'"),
    ('multi_step_reward_strategy = "median"\n', "multi_step_reward_strategy: Input should be 'mean' or 'final'"),
    ('[[steps]]\nname = "a"\n[[steps]]\nname = "a"\n', "step names must be unique, repeated: a"),
    ('[[steps]]\nname = "a"\nmin_reward = "high"\n', 'min_reward'),
])
def test_refused_with_one_line_naming_file_and_key(tmp_path, toml, expected):
    d = harbor(tmp_path, toml)
    msg = refused(d)
    assert msg.startswith(str(d / "task.toml") + ": "), msg
    assert expected in msg, msg


UNKNOWN_KEYS = [
    ('[environment]\nfoo = 1\n', "unknown key [environment].foo"),
    ('[environment]\ncpu = 2\n', "unknown key [environment].cpu (did you mean `cpus`?)"),
    ('colour = "red"\n', "unknown top-level key `colour`"),
    ('[environment.healthcheck]\ncommand = "x"\nretry = 3\n', "unknown key [environment.healthcheck].retry"),
    ('[agent]\ntimeout = 5\n', "unknown key [agent].timeout"),
    ('[verifier]\nenvironment_mod = "separate"\n', "unknown key [verifier].environment_mod"),
    ('[solution]\nenvs = {}\n', "unknown key [solution].envs"),
    ('[task]\nname = "o/n"\nlicense = "MIT"\n', "unknown key [task].license"),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "stdio"\ncommand = "c"\nenv = {}\n',
     "unknown key [environment.mcp_servers].env (entry 1)"),
    ('artifacts = [{ source = "/a", dest = "b" }]\n', "unknown key artifacts.dest (entry 1)"),
    ('[[steps]]\nname = "a"\n[steps.agent]\nuser = "x"\nshell = "zsh"\n', 'unknown key [steps.agent].shell (step "a")'),
]


@pytest.mark.parametrize("toml, expected", UNKNOWN_KEYS)
def test_unknown_keys_are_ignored_as_harbor_ignores_them_and_named(tmp_path, toml, expected):
    """Harbor's TaskConfig drops keys it does not know; so does tbscale by default, naming each
    (with a hint for a misspelling) in the task's not_enforced list; strict_keys refuses them."""
    files = {"steps/a/instruction.md": "a\n", "steps/a/tests/test.sh": "true\n"} if "[[steps]]" in toml else None
    d = harbor(tmp_path, toml, files=files)
    task = load_task(d)
    key = expected.split("unknown key ", 1)[-1].split("unknown top-level key ", 1)[-1].split(" (did you mean")[0]
    names = [n.key for n in task.not_enforced]
    assert key.strip("`") in names, (names, expected)
    assert all("ignored, as Harbor ignores it" in n.why for n in task.not_enforced)
    if "did you mean" in expected:
        assert "did you mean `cpus`?" in task.not_enforced[0].why
    with pytest.raises(TbscaleError) as err:
        load_task(d, strict=True)
    msg = str(err.value)
    assert msg.startswith(str(d / "task.toml") + ": ") and expected.split(" (entry")[0].split(" (step")[0] in msg, msg


def test_strict_keys_names_every_unknown_key_in_one_message(tmp_path):
    d = harbor(tmp_path, '[environment]\ncpu = 2\nfoo = 1\n[agent]\ntimeout = 5\n')
    assert sorted(n.key for n in load_task(d).not_enforced) == ["[agent].timeout", "[environment].cpu", "[environment].foo"]
    assert load_task(d).environment.cpus is None  # the misspelt key changed nothing, as in Harbor
    msg = refused_strict(d)
    for name in ("[environment].cpu (did you mean `cpus`?)", "[environment].foo", "[agent].timeout"):
        assert name in msg, msg


def refused_strict(path: Path) -> str:
    with pytest.raises(TbscaleError) as err:
        load_task(path, strict=True)
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("setup, expected", [
    (dict(dockerfile=None), "environment/Dockerfile: missing, and"),
    (dict(dockerfile=None, files={"environment/docker-compose.yaml": "services:\n  side:\n    image: x\n"}),
     "services.main sets no image or build"),
    (dict(dockerfile=None, files={"environment/docker-compose.yaml": "volumes: {}\n"}),
     "a compose file needs a `services` mapping"),
    (dict(files={"environment/compose.yaml": COMPOSE_DB, "environment/docker-compose.yaml": COMPOSE_DB}),
     "more than one compose file"),
    (dict(instruction=None), "instruction.md: missing"),
    (dict(test_sh=None), "tests/test.sh: missing (the verifier entry point)"),
    (dict(files={"task.yaml": "instruction: x\n"}), "has both task.toml and task.yaml"),
])
def test_missing_pieces_name_the_file(tmp_path, setup, expected):
    msg = refused(harbor(tmp_path, 'schema_version = "1.4"\n', **setup))
    assert expected in msg and str(tmp_path) in msg, msg


def test_prebuilt_image_and_compose_main_need_no_dockerfile(tmp_path):
    t = load_task(harbor(tmp_path, '[environment]\ndocker_image = "debian:bookworm-slim"\n', dockerfile=None,
                         files={"environment/seed.txt": "x"}))
    assert t.image == "debian:bookworm-slim" and t.environment.upload_dir == tmp_path / "t" / "environment"
    compose = "services:\n  main:\n    image: python:3.11-slim-bookworm\n"
    t = load_task(harbor(tmp_path, "", name="c", dockerfile=None, files={"environment/compose.yaml": compose}))
    assert t.environment.compose_file.name == "compose.yaml" and t.image == "python:3.11-slim-bookworm"


def test_prebuilt_image_wins_over_dockerfile(tmp_path):
    t = load_task(harbor(tmp_path, '[environment]\ndocker_image = "debian:bookworm-slim"\n'))
    assert t.image == "debian:bookworm-slim" and t.environment_dir is None and t.environment.upload_dir is None
    assert t.environment.dockerfile == tmp_path / "t" / "environment" / "Dockerfile"  # kept for a forced build


def test_separate_verifier_needs_a_verifier_image(tmp_path):
    msg = refused(harbor(tmp_path, '[verifier]\nenvironment_mode = "separate"\n'))
    assert "tests/Dockerfile: missing" in msg and "separate verifier environment" in msg


def test_non_utf8_task_files(tmp_path):
    d = harbor(tmp_path, "", files={})
    (d / "task.toml").write_bytes(b'schema_version = "1.4"\n# caf\xe9\n')
    assert refused(d) == f"{d / 'task.toml'}: not UTF-8 text (invalid byte 0xe9 at offset 28)"
    d = harbor(tmp_path, "", name="u")
    (d / "instruction.md").write_bytes(b"\xff\xfeD\x00o\x00")
    assert "instruction.md: not UTF-8 text" in refused(d)


def test_canary_lines_are_not_part_of_the_instruction(tmp_path):
    t = load_task(harbor(tmp_path, "", instruction="<!-- canary GUID 1234 -->\n# terminal-bench-canary x\n\nDo it.\n"))
    assert t.instruction == "Do it."


# ---- env tables --------------------------------------------------------------------------------

def test_env_templates_resolve_from_the_host_and_never_show_host_values(tmp_path, monkeypatch):
    d = harbor(tmp_path, """
        [verifier.env]
        API_KEY = "${TBSCALE_TEST_SECRET}"
        MODEL = "${TBSCALE_TEST_MODEL:-small}"
        PLAIN = "literal"
        DB_PASSWORD = "written-in-the-file"
    """)
    t = load_task(d)  # loading never needs the host variables
    env = t.verifier.env
    assert env.host_vars() == [("TBSCALE_TEST_SECRET", None), ("TBSCALE_TEST_MODEL", "small")]
    assert env.secret_keys() == {"API_KEY", "MODEL", "DB_PASSWORD"}
    monkeypatch.delenv("TBSCALE_TEST_SECRET", raising=False)
    assert env.missing() == ["TBSCALE_TEST_SECRET"]
    with pytest.raises(TbscaleError, match=r"task.toml: \[verifier.env\]: API_KEY = .* needs the host environment "
                                           r"variable TBSCALE_TEST_SECRET"):
        env.resolve()
    monkeypatch.setenv("TBSCALE_TEST_SECRET", "sk-very-secret")
    resolved = env.resolve()
    assert resolved == {"API_KEY": "sk-very-secret", "MODEL": "small", "PLAIN": "literal",
                        "DB_PASSWORD": "written-in-the-file"}
    for shown in (repr(resolved), repr(t), str(env), repr(t.extra)):
        assert "sk-very-secret" not in shown and "written-in-the-file" not in shown
    assert "'PLAIN': 'literal'" in repr(resolved) and "${TBSCALE_TEST_SECRET}" in repr(env)
    assert t.missing_host_vars() == []
    monkeypatch.delenv("TBSCALE_TEST_SECRET")
    assert t.missing_host_vars() == ["TBSCALE_TEST_SECRET"]
    monkeypatch.setenv("TBSCALE_TEST_SECRET", "sk-very-secret")
    # Copies and serialisations of the Task hold the templates, not host values.
    import copy
    import dataclasses
    import json
    assert "sk-very-secret" not in json.dumps(dict(env)) + repr(copy.deepcopy(t)) + repr(dataclasses.asdict(t))


def test_env_template_must_be_the_whole_value():
    table = EnvTable({"A": "prefix-${HOME}", "B": "${HOME}"})
    assert table.resolve({"HOME": "/h"}) == {"A": "prefix-${HOME}", "B": "/h"}


def test_step_verifier_env_is_merged_over_the_task_one(tmp_path):
    d = harbor(tmp_path, """
        [verifier.env]
        A = "task"
        B = "task"
        [[steps]]
        name = "one"
        [steps.verifier.env]
        B = "step"
    """, instruction=None, files={"steps/one/instruction.md": "Step one."})
    assert load_task(d).steps[0].verifier.env.resolve() == {"A": "task", "B": "step"}


# ---- multi-step --------------------------------------------------------------------------------

MULTI = """\
schema_version = "1.4"
[agent]
timeout_sec = 100
user = "agent"
network_mode = "no-network"
[verifier]
timeout_sec = 50
user = "checker"
[environment]
workdir = "/app"
[[steps]]
name = "first"
min_reward = 1.0
[steps.agent]
timeout_sec = 10
[[steps]]
name = "second"
min_reward = { correctness = 0.8, style = 0.5 }
artifacts = ["/app/second.txt"]
[steps.agent]
user = "other"
network_mode = "public"
[steps.verifier]
timeout_sec = 20
environment_mode = "separate"
[steps.healthcheck]
command = "test -f /app/ready"
retries = 2
"""


def test_multi_step_layout(tmp_path):
    d = harbor(tmp_path, MULTI, instruction=None, test_sh="shared\n", files={
        "steps/first/instruction.md": "First.\n",
        "steps/first/solution/solve.sh": "true\n",
        "steps/first/workdir/setup.sh": "mkdir -p x\n",
        "steps/first/workdir/data.txt": "1\n",
        "steps/first/trajectory.json": "{}",
        "steps/second/instruction.md": "Second.\n",
        "steps/second/tests/Dockerfile": "FROM debian:bookworm-slim\n",
        "steps/second/tests/test.sh": "own\n",
        "solution/solve.sh": "task-level\n",
    })
    t = load_task(d)
    assert t.is_multi_step and t.instruction == "First." and t.reward_strategy == "mean"
    first, second = t.steps
    assert (first.name, first.instruction, first.dir) == ("first", "First.", d / "steps" / "first")
    assert first.workdir_dir == d / "steps/first/workdir" and first.setup_script == d / "steps/first/workdir/setup.sh"
    assert first.solution_dir == d / "steps/first/solution" and first.trajectory == d / "steps/first/trajectory.json"
    assert first.tests_dir is None and first.verifier.test_script == d / "tests" / "test.sh"
    assert first.verifier.tests_dirs == [d / "tests"] and first.verifier.mode == "shared"
    assert (first.agent.timeout_sec, first.agent.user, first.agent.network.mode) == (10, "agent", "no-network")
    assert (first.verifier.timeout_sec, first.verifier.user) == (50, "checker")  # unset: the task's value
    assert first.thresholds() == {"reward": 1.0} and first.healthcheck is None
    assert second.solution_dir == d / "solution"  # no step solution: the task's
    assert (second.agent.timeout_sec, second.agent.user, second.agent.network.mode) == (100, "other", "public")
    assert second.verifier.timeout_sec == 20 and second.verifier.mode == "separate"
    assert second.verifier.environment.context_dir == d / "steps/second/tests"
    assert second.verifier.tests_dirs == [d / "tests", d / "steps/second/tests"]
    assert second.thresholds() == {"correctness": 0.8, "style": 0.5}
    assert second.healthcheck.command == "test -f /app/ready" and second.healthcheck.retries == 2
    assert [a.source for a in second.artifacts] == ["/app/second.txt"]


@pytest.mark.parametrize("files, expected", [
    ({}, "steps/first: missing (task.toml declares step \"first\")"),
    ({"steps/first/x": ""}, "steps/first/instruction.md: missing (the instruction of step \"first\")"),
    ({"steps/first/instruction.md": "x", "steps/typo/instruction.md": "x"},
     "steps/typo: not declared as a [[steps]] entry"),
])
def test_multi_step_missing_pieces(tmp_path, files, expected):
    d = harbor(tmp_path, '[[steps]]\nname = "first"\n', instruction=None, files=files)
    assert expected in refused(d)


def test_multi_step_without_any_test_script(tmp_path):
    d = harbor(tmp_path, '[[steps]]\nname = "first"\n', instruction=None, test_sh=None,
               files={"steps/first/instruction.md": "x"})
    msg = refused(d)
    assert "steps/first/tests/test.sh or" in msg and "tests/test.sh: missing" in msg and 'step "first"' in msg


# ---- Terminal-Bench legacy ---------------------------------------------------------------------

def legacy(root: Path, yaml_text: str, name: str = "legacy", compose: str | None = None) -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(textwrap.dedent(yaml_text))
    (d / "Dockerfile").write_text("FROM python:3.11-slim-bookworm\nWORKDIR /app\n")
    (d / "run-tests.sh").write_text("bash $TEST_DIR/x.sh\n")
    (d / "tests" / "x.sh").write_text("echo\n")
    (d / "solution.sh").write_text("true\n")
    if compose is not None:
        (d / "docker-compose.yaml").write_text(compose)
    return d


def test_legacy_every_key(tmp_path):
    d = legacy(tmp_path, """
        # canary comment
        instruction: |
          Do the legacy thing.
        author_name: A
        author_email: a@example.invalid
        difficulty: hard
        category: debugging
        tags: [x, y]
        parser_name: swebench
        max_agent_timeout_sec: 1000
        max_test_timeout_sec: 200
        run_tests_in_same_shell: true
        disable_asciinema: true
        estimated_duration_sec: 42.5
        expert_time_estimate_min: 5
        junior_time_estimate_min: 30
    """, compose="""
services:
  client:
    build: {context: ., dockerfile: Dockerfile}
    working_dir: /work
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
      - LANG=C.UTF-8
      - FROM_HOST
    deploy: {resources: {limits: {cpus: '2', memory: 1g}}}
  db:
    image: postgres
""")
    t = load_task(d)
    assert t.format == "terminal-bench" and t.instruction == "Do the legacy thing."
    assert t.metadata == {"author_name": "A", "author_email": "a@example.invalid", "difficulty": "hard",
                          "category": "debugging", "tags": ["x", "y"], "expert_time_estimate_min": 5,
                          "junior_time_estimate_min": 30, "estimated_duration_sec": 42.5}
    assert (t.agent_timeout_sec, t.verifier_timeout_sec) == (1000, 200)
    assert t.reward.source == "parser" and t.reward.parser_name == "swebench" and t.extra["parser_name"] == "swebench"
    assert t.legacy.run_tests_in_same_shell and t.legacy.test_user is None and t.verifier.user is None
    assert t.legacy.disable_asciinema and t.legacy.estimated_duration_sec == 42.5
    e = t.environment
    assert e.compose_file == d / "docker-compose.yaml" and e.main_service == "client" and e.sidecars == ["db"]
    assert (e.workdir, e.cpus, e.memory_mb, t.workdir, t.cpus, t.memory_mb) == ("/work", 2.0, 1024, "/work", 2.0, 1024)
    assert e.env.raw == {"LANG": "C.UTF-8", "FROM_HOST": "${FROM_HOST}"}
    assert e.context_dir == d and e.dockerfile == d / "Dockerfile"


def test_legacy_defaults_and_test_environment(tmp_path):
    t = load_task(legacy(tmp_path, "instruction: x\n"))
    assert (t.agent_timeout_sec, t.verifier_timeout_sec) == (360, 60)
    assert t.legacy.parser_name == "pytest" and t.legacy.test_user == "root" and t.verifier.user == "root"
    assert t.verifier.env.resolve() == {"TEST_DIR": "/tests"} and t.legacy.test_env == {"TEST_DIR": "/tests"}
    assert t.verifier.command == t.test_command == "bash /tests/run-tests.sh" and t.verifier.cwd is None
    assert t.environment.network.mode == "public" and t.allow_internet and t.agent.network.internet
    # run-tests.sh goes beside tests/ into /tests, straight from the task folder (nothing staged)
    assert t.verifier.tests_dirs == [t.path / "tests"] and t.verifier.tests_files == {"run-tests.sh": t.path / "run-tests.sh"}
    assert t.tests_dir == t.path / "tests" and t.not_enforced == []
    assert t.solution_dir == t.path and t.solution_script == "solution.sh"


def test_legacy_descriptions_make_one_task_per_key_with_the_legacy_ids(tmp_path):
    """The descriptions-era harness made a task of every `descriptions` entry: `base` under the
    folder's name, any other key as `<folder>.<key>` (crack-7z-hash.easy in TB-Core 0.1.1)."""
    text = ("descriptions:\n  - key: base\n    description: Base text.\n  - key: easy\n    description: Easy text.\n"
            "  - key: hard\n    description: Hard text.\n")
    d = legacy(tmp_path, text, name="crack-7z-hash")
    tasks, problems = load_tasks(d)
    assert problems == [] and [(t.id, t.instruction, t.variant) for t in tasks] == [
        ("crack-7z-hash", "Base text.", "base"), ("crack-7z-hash.easy", "Easy text.", "easy"),
        ("crack-7z-hash.hard", "Hard text.", "hard")]
    assert load_task(d).id == "crack-7z-hash" and load_task(d, "crack-7z-hash.hard").instruction == "Hard text."
    # include picks variants by id; the folder name that is also the base task's id picks only it
    assert [t.id for t in load_tasks(tmp_path, include=["crack-7z-hash.easy"])[0]] == ["crack-7z-hash.easy"]
    assert [t.id for t in load_tasks(tmp_path, include=["crack-7z-hash"])[0]] == ["crack-7z-hash"]
    assert [t.id for t in load_tasks(tmp_path, exclude=["crack-7z-hash.hard"])[0]] == ["crack-7z-hash",
                                                                                         "crack-7z-hash.easy"]


def test_legacy_descriptions_without_base_and_with_instruction(tmp_path):
    """No entry is dropped: a file with `instruction` beside `descriptions` (livecodebenchpro's
    `instruction: base`) makes a task of each entry, and says `instruction` was not read."""
    text = ("descriptions:\n  - key: base\n    description: Judge note.\n  - key: problem\n"
            "    description: The problem.\n instruction: base\n").replace("\n instruction", "\ninstruction")
    tasks, _ = load_tasks(legacy(tmp_path, text, name="lcb"))
    assert [(t.id, t.instruction) for t in tasks] == [("lcb", "Judge note."), ("lcb.problem", "The problem.")]
    assert [n.key for n in tasks[1].not_enforced] == ["instruction"]
    only = load_tasks(legacy(tmp_path, "descriptions:\n  - key: hard\n    description: H.\n", name="x"))[0]
    assert [t.id for t in only] == ["x.hard"]
    assert "repeats the key 'a'" in refused(legacy(
        tmp_path, "descriptions:\n  - {key: a, description: x}\n  - {key: a, description: y}\n", name="r"))


def test_legacy_unknown_keys_load_named_all_in_one_message(tmp_path):
    """The legacy harness's pydantic Task dropped keys it did not know (deveval's `language`);
    tbscale loads such a task and names every such key; strict_keys refuses naming them all."""
    d = legacy(tmp_path, "instruction: x\nenv_name:\nlanguage: cpp\ntimeout: 3\n")
    t = load_task(d)
    assert sorted(n.key for n in t.not_enforced) == ["language", "timeout"]
    with pytest.raises(TbscaleError) as err:
        load_task(d, strict=True)
    msg = str(err.value)
    assert "unknown keys `language`, `timeout`" in msg and "\n" not in msg, msg
    assert "shared environment of terminal-bench" in refused(legacy(tmp_path, "instruction: x\nenv_name: py\n",
                                                                    name="e"))


def test_legacy_solution_yaml(tmp_path):
    d = legacy(tmp_path, "instruction: x\n")
    (d / "solution.sh").unlink()
    (d / "solution.yaml").write_text("- command: echo hi\n  block: true\n- command: ls\n  append_enter: true\n")
    t = load_task(d)
    assert t.solution_dir is None and [c["command"] for c in t.legacy.solution_commands] == ["echo hi", "ls"]
    (d / "solution.yaml").write_text("- cmd: echo\n")
    assert "solution.yaml: must be a list of" in refused(d)


@pytest.mark.parametrize("yaml_text, expected", [
    ("instruction: x\nparser_name: junit\n", "parser_name: unknown parser 'junit' (known parsers: pytest, swebench"),
    ("instruction: x\nmax_test_timeout_sec: 0\n", "`max_test_timeout_sec` must be a positive number"),
    ("instruction: x\ndifficulty: extreme\n", "`difficulty` must be one of easy, medium, hard, unknown"),
    ("instruction: x\ntags: a\n", "`tags` must be a list of strings"),
    ("instruction: x\nrun_tests_in_same_shell: maybe\n", "`run_tests_in_same_shell` must be true or false"),
    ("difficulty: easy\n", "`instruction` is missing"),
    ("- a list\n", "the top level must be a mapping"),
])
def test_legacy_refusals(tmp_path, yaml_text, expected):
    d = legacy(tmp_path, yaml_text)
    msg = refused(d)
    assert msg.startswith(str(d / "task.yaml")) and expected in msg, msg


def test_legacy_missing_files_and_bad_bytes(tmp_path):
    d = legacy(tmp_path, "instruction: x\n")
    (d / "run-tests.sh").unlink()
    assert "run-tests.sh: missing" in refused(d)
    d = legacy(tmp_path, "instruction: x\n", name="b")
    (d / "Dockerfile").unlink()
    assert "b/Dockerfile: missing" in refused(d)
    d = legacy(tmp_path, "instruction: x\n", name="c")
    (d / "task.yaml").write_bytes(b"instruction: \xc3\x28\n")
    assert "task.yaml: not UTF-8 text" in refused(d)


# ---- the conformance tasks ---------------------------------------------------------------------

CONFORMANCE_KEYS = {
    "workdir": lambda t: t.environment.workdir == t.workdir == "/srv/work",
    "agent-user": lambda t: t.agent.user == "agent",
    "verifier-user": lambda t: t.verifier.user == "checker",
    "env-tables": lambda t: (t.environment.env.raw, t.verifier.env.raw["CONF_VERIFY_TEMPLATE"], t.solution.env.raw) == (
        {"CONF_ENV_MAIN": "from-environment"}, "${TBSCALE_CONFORMANCE_UNSET_VAR:-template-default}",
        {"CONF_SOLUTION_HINT": "from-solution"}),
    "healthcheck": lambda t: (t.environment.healthcheck.command, t.environment.healthcheck.start_period_sec) == (
        "python3 /opt/probe.py", 30),
    "network-public": lambda t: t.environment.network.mode == t.agent.network.mode == t.verifier.network.mode == "public",
    "network-no-network": lambda t: t.agent.network.mode == t.verifier.network.mode == "no-network",
    "network-allow-internet-false": lambda t: t.schema_version == "1.0" and t.environment.network.mode == "no-network",
    "network-allowlist": lambda t: t.environment.network == NetworkPolicy("allowlist", ("allowed-svc",)),
    "network-phase-overrides": lambda t: (t.environment.network.mode, t.agent.network.mode, t.verifier.network) == (
        "public", "no-network", NetworkPolicy("allowlist", ("echo",))),
    "separate-verifier": lambda t: t.verifier.mode == "separate" and len(t.artifacts) == 2
    and t.artifacts[1].exclude == ["*.tmp"] and t.verifier.environment.network.mode == "no-network",
    "sidecar-collect": lambda t: t.verifier.collect[0].service == t.artifacts[0].service == "counter"
    and t.verifier.mode == "separate",
    "multi-step-final": lambda t: t.reward_strategy == "final"
    and [s.min_reward for s in t.steps] == [{"ready": 1.0}, 1.0, None],
    "multi-step-mean": lambda t: t.reward_strategy == "mean" and t.steps[0].tests_dir is None
    and t.steps[1].setup_script is not None and t.steps[1].healthcheck is not None
    and t.steps[1].verifier.env.raw == {"BASE_VALUE": "base", "EXPECTED_TOTAL": "60"},
    "reward-json-keys": lambda t: t.reward.files[0] == "reward.json",
    "reward-sole-key": lambda t: t.reward.primary({"score": 1.0}) == 1.0,
    "prebuilt-image": lambda t: t.image == "python:3.11-slim-bookworm" and t.environment.dockerfile is not None,
    "prebuilt-upload": lambda t: t.image == "debian:bookworm-slim" and t.environment.upload_dir is not None,
    "compose-sidecar": lambda t: t.environment.sidecars == ["kv"],
    "copy-chmod": lambda t: "COPY --chmod=755" in t.environment.dockerfile.read_text(),
    "skills-dir": lambda t: t.environment.skills_dir == "/opt/skills",
    "mcp-servers": lambda t: [m.transport for m in t.environment.mcp_servers] == ["stdio", "streamable-http"],
    "resource-limits": lambda t: (t.cpus, t.memory_mb) == (2.0, 384),
    "storage-limit": lambda t: t.environment.storage_mb == 1024,
    "gpu-required": lambda t: t.environment.gpus == 1,
    "tb-pytest": lambda t: t.legacy.parser_name == "pytest" and t.legacy.test_user == "root",
    "tb-swebench": lambda t: t.reward.parser_name == "swebench",
    "tb-sweperf": lambda t: t.reward.parser_name == "sweperf",
    "tb-mlebench": lambda t: t.reward.parser_name == "mlebench",
    "tb-swelancer": lambda t: t.reward.parser_name == "swelancer",
}


def test_conformance_tasks_load_and_carry_their_keys():
    tasks, problems = load_tasks(CONFORMANCE, on_error="collect")
    assert problems == []
    assert sorted(t.id for t in tasks) == sorted(CONFORMANCE_KEYS)
    readme = (CONFORMANCE / "README.md").read_text()
    for t in tasks:
        assert CONFORMANCE_KEYS[t.id](t), t.id
        assert f"`{t.id}`" in readme, t.id


def test_conformance_tasks_need_no_internet_and_only_local_bases():
    for dockerfile in CONFORMANCE.rglob("Dockerfile"):
        bases = [ln.split()[1] for ln in dockerfile.read_text().splitlines() if ln.startswith("FROM ")]
        assert set(bases) <= {"debian:bookworm-slim", "python:3.11-slim-bookworm"}, dockerfile
    for path in CONFORMANCE.rglob("*"):
        if path.is_file() and path.suffix in ("", ".sh", ".py", ".toml", ".yaml") and path.name != "README.md":
            text = path.read_text()
            for word in ("apt-get", "pip install", "curl ", "wget ", "https://"):
                assert word not in text, (path, word)


# ---- Harbor's own examples (when the reference copies are on this machine) ---------------------

EXPECTED_REFUSALS = {
    "hello-computer-use": "environment/Dockerfile: missing",
    "hello-cua-cloud": "environment/Dockerfile: missing",
    "hello-world-bat": "windows tasks are not supported",
    "hello-multi-step-bat": "windows tasks are not supported",
}


@pytest.mark.skipif(not (HARBOR / "examples").is_dir(), reason="TBSCALE_HARBOR_CHECKOUT names no Harbor checkout")
@pytest.mark.parametrize("folder", ["examples", "cookbook"])
def test_harbor_examples_load_or_are_refused_as_expected(folder):
    found = discover(HARBOR / folder)
    assert found.tasks
    for f in found.tasks:
        if f.path.name in EXPECTED_REFUSALS:
            assert EXPECTED_REFUSALS[f.path.name] in refused(f.path)
        else:
            t = load_task(f.path, f.id)
            assert t.format == "harbor" and (t.instruction or t.steps)
    if folder == "examples":
        cuda = load_task(HARBOR / folder / "hello-cuda")
        assert cuda.environment.gpus == 1 and cuda.environment.gpu_types == ["A100", "H100"]


# ---- discovery ---------------------------------------------------------------------------------

def test_discovery_at_any_depth(tmp_path):
    harbor(tmp_path / "datasets" / "alpha", "")
    harbor(tmp_path / "datasets" / "beta" / "group", "", name="deep")
    legacy(tmp_path / "legacy-set", "instruction: x\n", name="old")
    outer = harbor(tmp_path, "", name="outer")
    harbor(outer / "environment", "", name="inner")  # inside a task folder: not a task of its own
    harbor(tmp_path / ".hidden", "", name="secret")
    harbor(tmp_path / "__pycache__", "", name="cached")
    ids = [f.id for f in discover(tmp_path).tasks]
    assert ids == ["t", "deep", "old", "outer"]
    assert discover_task_dirs(tmp_path / "datasets" / "beta" / "group" / "deep") == [
        tmp_path / "datasets" / "beta" / "group" / "deep"]


def test_duplicate_folder_names_get_relative_path_ids(tmp_path):
    harbor(tmp_path / "static", "", name="e")
    harbor(tmp_path / "dynamic", "", name="e")
    harbor(tmp_path / "dynamic", "", name="unique")
    tasks, _ = load_tasks(tmp_path)
    assert sorted(t.id for t in tasks) == ["dynamic/e", "static/e", "unique"]
    only, _ = load_tasks(tmp_path, include=["static/e"])
    assert [t.id for t in only] == ["static/e"]


def test_registry_json(tmp_path):
    harbor(tmp_path / "tasks", "", name="local-one")
    (tmp_path / "registry.json").write_text("""[
      {"name": "demo", "version": "1.0", "description": "d", "metrics": [{"type": "mean"}],
       "tasks": [{"name": "local-one", "path": "tasks/local-one"},
                 {"name": "remote-one", "git_url": "https://example.invalid/r.git", "git_commit_id": "abc123",
                  "path": "remote/remote-one"}]},
      {"name": "other", "version": "head", "tasks": [{"name": "local-one", "path": "tasks/local-one"}]}
    ]""")
    found = discover(tmp_path / "registry.json")
    assert [(f.id, f.dataset) for f in found.tasks] == [("local-one", "demo@1.0")]
    (label, msg), = found.missing
    assert label == "demo@1.0/remote-one"
    assert "https://example.invalid/r.git @ abc123" in msg and "remote/remote-one" in msg
    tasks, problems = load_tasks(tmp_path / "registry.json", on_error="collect")
    assert [t.id for t in tasks] == ["local-one"] and "remote-one" in problems[0][1]
    with pytest.raises(TbscaleError, match="remote-one"):
        load_tasks(tmp_path / "registry.json")
    assert [f.id for f in discover(tmp_path / "registry.json", dataset="other").tasks] == ["local-one"]
    with pytest.raises(TbscaleError, match=r"no dataset 'nope' \(datasets: demo@1.0, other@head\)"):
        discover(tmp_path / "registry.json", dataset="nope")
    (tmp_path / "registry.json").write_text('{"recipes": []}')
    with pytest.raises(TbscaleError, match="not a Harbor dataset registry"):
        discover(tmp_path / "registry.json")


def test_dataset_manifest(tmp_path):
    harbor(tmp_path, '[task]\nname = "org/alpha"\n', name="alpha-folder")
    harbor(tmp_path, "", name="beta")
    (tmp_path / "dataset.toml").write_text("""
[dataset]
name = "org/demo"
version = "1.0.0"
[[tasks]]
name = "org/alpha"
digest = "sha256:%s"
[[tasks]]
name = "org/beta"
digest = "sha256:%s"
[[tasks]]
name = "org/gamma"
digest = "sha256:%s"
[[files]]
path = "metric.py"
""" % ("a" * 64, "b" * 64, "c" * 64))
    found = discover(tmp_path / "dataset.toml")
    assert [(f.id, f.dataset, f.digest) for f in found.tasks] == [
        ("alpha-folder", "org/demo@1.0.0", "sha256:" + "a" * 64), ("beta", "org/demo@1.0.0", "sha256:" + "b" * 64)]
    assert [label for label, _ in found.missing] == ["org/gamma"]


def test_discovery_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(TbscaleError, match=r"notes.txt: is a file; give a task folder"):
        discover(tmp_path / "notes.txt")
    with pytest.raises(TbscaleError, match=r"notes.txt: is a file; a task is a folder"):
        load_task(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TbscaleError, match="no task directories found"):
        discover(tmp_path / "empty")
    with pytest.raises(TbscaleError, match="no such file or directory"):
        discover(tmp_path / "missing")
    (tmp_path / "registry.json").write_bytes(b"[\xff]")
    with pytest.raises(TbscaleError, match="registry.json: not UTF-8 text"):
        discover(tmp_path / "registry.json")


LEGACY_CLIENT = """services:
  client:
    build: {dockerfile: Dockerfile}
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: ["sh", "-c", "sleep infinity"]
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"""


@pytest.mark.parametrize("extra, check", [
    ("", lambda t: not t.environment.copy_in and not t.environment.compose_required and t.not_enforced == []),
    ("    tty: true\n    stdin_open: true\n", lambda t: t.environment.tty and t.environment.stdin_open),
    ("      - ./:/app\n", lambda t: t.environment.copy_in == [(t.path.resolve(), "/app")]
     and "copied to /app" in t.not_enforced[0].why),
    ("      - ./tests:/data:ro\n", lambda t: t.environment.copy_in == [((t.path / "tests").resolve(), "/data")]
     and "`:ro` is not enforced" in t.not_enforced[0].why),
    ("    privileged: true\n    shm_size: 1g\n", lambda t: t.environment.compose_required
     and "privileged, shm_size" in t.not_enforced[0].key),
    ("    command: [python, server.py]\n", lambda t: t.environment.compose_required),
])
def test_legacy_single_service_compose_keys_are_acted_on(tmp_path, extra, check):
    text = LEGACY_CLIENT + extra
    if extra.startswith("    command"):
        text = text.replace('    command: ["sh", "-c", "sleep infinity"]\n', "")
    if extra.startswith("      - "):
        text = text + ""  # a volume entry appended to the list above
    t = load_task(legacy(tmp_path, "instruction: x\n", compose=text))
    assert check(t), (t.environment, t.not_enforced)


@pytest.mark.parametrize("extra, expected", [
    ("    ports: ['8080:80']\n", "`ports` publishes fixed host ports"),
    ("    network_mode: host\n", "`network_mode` tbscale switches the container's networks itself"),
    ("    pid: host\n    ports: ['1:1']\n", "`pid` shares a PID namespace outside the trial; `ports`"),
    ("      - /etc:/host-etc\n", "outside the task folder"),
    ("      - data:/data\n", "a named volume is not supported"),
])
def test_legacy_compose_keys_tbscale_cannot_give_are_refused_naming_them(tmp_path, extra, expected):
    msg = refused(legacy(tmp_path, "instruction: x\n", compose=LEGACY_CLIENT + extra))
    assert "docker-compose.yaml: services.client" in msg and expected in msg, msg


def test_mcp_server_headers_as_harbor_0_26_reads_them(tmp_path, monkeypatch):
    from tbscale.tasks.envvars import expand_host_vars

    t = load_task(harbor(tmp_path, '[[environment.mcp_servers]]\nname = "m"\ntransport = "http"\nurl = "http://m:8/"\n'
                                   'headers = { Authorization = "Bearer ${MCP_TOKEN}" }\n'))
    assert t.environment.mcp_servers[0].headers == {"Authorization": "Bearer ${MCP_TOKEN}"} and t.not_enforced == []
    monkeypatch.setenv("MCP_TOKEN", "abc")
    assert expand_host_vars("Bearer ${MCP_TOKEN}", "w") == "Bearer abc"
    monkeypatch.delenv("MCP_TOKEN")
    with pytest.raises(TbscaleError, match="w: needs the host environment variable MCP_TOKEN"):
        expand_host_vars("Bearer ${MCP_TOKEN}", "w")
    assert "`headers` is only for the HTTP transports" in refused(harbor(
        tmp_path, '[[environment.mcp_servers]]\nname = "m"\ntransport = "stdio"\ncommand = "c"\nheaders = { A = "b" }\n',
        name="stdio"))


def test_an_unset_host_variable_is_named_for_the_tables_a_trial_uses(tmp_path, monkeypatch):
    """The attempt refuses a task whose `${VAR}` the host does not set (runner/attempt.py): the
    environment's and verifier's tables count for every agent, the solution's only for the oracle."""
    for var in ("TBSCALE_T_ENV", "TBSCALE_T_SOL"):
        monkeypatch.delenv(var, raising=False)
    both = load_task(harbor(tmp_path, '[environment.env]\nK = "${TBSCALE_T_ENV}"\nD = "${TBSCALE_T_DEF:-x}"\n'
                                      '[solution.env]\nS = "${TBSCALE_T_SOL}"\n', name="both"))
    said = both.unset_host_var(agent="bash")
    assert said is not None and said.startswith(f"{tmp_path / 'both' / 'task.toml'}: [environment.env]: K = ")
    assert "TBSCALE_T_ENV" in said and "TBSCALE_T_DEF" not in said  # a default is enough
    only_solution = load_task(harbor(tmp_path, '[solution.env]\nS = "${TBSCALE_T_SOL}"\n', name="sol"))
    assert only_solution.unset_host_var(agent="bash") is None
    assert "[solution.env]: S = " in only_solution.unset_host_var(agent="oracle")
    monkeypatch.setenv("TBSCALE_T_SOL", "set")
    assert only_solution.unset_host_var(agent="oracle") is None


def test_a_host_value_a_template_takes_is_hidden_from_what_tbscale_writes():
    """A `${VAR}` is how a task asks the host for a key: once resolved, the value is redacted from
    every line and message tbscale writes (tbscale/secrets.py); a default or a literal is not."""
    from tbscale.secrets import redact
    from tbscale.tasks.envvars import expand_host_vars

    table = EnvTable({"KEY": "${TBSCALE_T_HOST_KEY}", "MODE": "${TBSCALE_T_UNSET:-plainmode}",
                      "DB_PASSWORD": "postgres-literal"}, where="t")
    env = table.resolve({"TBSCALE_T_HOST_KEY": "sk-host-value-1"})
    assert env["KEY"] == "sk-host-value-1" and env["MODE"] == "plainmode"
    assert redact("echo sk-host-value-1 plainmode postgres-literal") == "echo *** plainmode postgres-literal"
    assert expand_host_vars("Bearer ${TBSCALE_T_HDR}", "w", {"TBSCALE_T_HDR": "hdr-token-2"}) == "Bearer hdr-token-2"
    assert redact("Authorization: Bearer hdr-token-2") == "Authorization: Bearer ***"


def test_the_process_that_writes_a_runs_lines_hides_the_host_values_before_any_is_resolved(tmp_path, monkeypatch):
    """Under Ray a worker resolves the env and the driver writes the trial line: the driver's Runner
    registers what the task's templates would take from its host (Task.register_host_values)."""
    from tbscale.secrets import redact

    monkeypatch.setenv("TBSCALE_T_DRIVER_KEY", "drv-host-value-3")
    task = load_task(harbor(tmp_path, '[verifier.env]\nK = "${TBSCALE_T_DRIVER_KEY}"\n'
                                      'L = "${TBSCALE_T_NOT_SET_HERE:-fallback-text}"\n', name="drv"))
    assert redact("drv-host-value-3 fallback-text") == "drv-host-value-3 fallback-text"  # nothing resolved yet
    task.register_host_values()
    assert redact("drv-host-value-3 fallback-text") == "*** fallback-text"


def test_a_template_inside_an_mcp_header_is_checked_and_hidden_like_a_tables(tmp_path, monkeypatch):
    """`Bearer ${TOKEN}` is a template too: the attempt refuses the task when the host lacks TOKEN,
    for every agent but the utility ones (oracle, nop), which Harbor 0.26 hands no MCP server and
    does not ask for header variables (harbor/cli/jobs.py); and the process that writes the run's
    lines hides its value before any trial resolves it."""
    from tbscale.secrets import redact

    monkeypatch.delenv("TBSCALE_T_MCP_TOKEN", raising=False)
    task = load_task(harbor(tmp_path, '[[environment.mcp_servers]]\nname = "m"\ntransport = "http"\nurl = "http://m:8/"\n'
                                      'headers = { Authorization = "Bearer ${TBSCALE_T_MCP_TOKEN}", '
                                      'X-Mode = "${TBSCALE_T_MCP_MODE:-plain}" }\n', name="mcp"))
    said = task.unset_host_var(agent="bash")
    assert said == (f"{tmp_path / 'mcp' / 'task.toml'}: [[environment.mcp_servers]] 'm' header Authorization: "
                    "needs the host environment variable TBSCALE_T_MCP_TOKEN, which is not set"), said
    assert task.unset_host_var(agent="oracle") is None and task.unset_host_var(agent="nop") is None
    monkeypatch.setenv("TBSCALE_T_MCP_TOKEN", "mcp-host-value-4")
    assert task.unset_host_var(agent="bash") is None  # the other header has a default
    assert redact("Bearer mcp-host-value-4") == "Bearer mcp-host-value-4"  # nothing resolved yet
    task.register_host_values()
    assert redact("Bearer mcp-host-value-4") == "Bearer ***"
