"""No secret-bearing environment variable reaches a process that runs measured code.

Each test sets real-looking credentials in the parent's environment, starts the process the
way the bot does, and reads what that process actually received from /proc/<pid>/environ
(the kernel's copy: what `os.environ` and any code in the process could read).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.environment import measured_code_environment
from collector.pool import WorkerPool
from collector.timing import Protocol
from collector.worker import WorkerSpec

# Credentials a GitHub Actions job or a runner's host can hold, by name and by value.
SECRETS = {
    "GITHUB_TOKEN": "ghs_" + "A" * 36,
    "GH_TOKEN": "ghp_" + "B" * 36,
    "ACTIONS_RUNTIME_TOKEN": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.runtime",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.oidc",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.example/idtoken?x=1",
    "AWS_ACCESS_KEY_ID": "AKIA" + "C" * 16,
    "AWS_SECRET_ACCESS_KEY": "s3cr3t/" + "D" * 33,
    "AWS_SESSION_TOKEN": "FwoGZXIvYXdzE" + "E" * 40,
    "COLLECTBOT_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    "HF_TOKEN": "hf_" + "F" * 34,
    "VLLM_API_KEY": "sk-vllm-" + "G" * 20,  # an allowed prefix, but a secret's name
    "TORCH_SNEAKY_SETTING": "ghp_" + "H" * 36,  # an allowed name, but a credential's value
    "PIP_INDEX_URL": "https://user:hunter2@pypi.example/simple",
    "DATABASE_URL": "postgres://u:pw@db/x",
}
# Settings that must still get through (the allow-list is not "pass nothing").
SETTINGS = {"TORCH_SHOW_CPP_STACKTRACES": "1", "OMP_NUM_THREADS": "1", "LC_ALL": "C.UTF-8"}


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def assert_clean(env: dict[str, str], raw: bytes = b"") -> None:
    leaked = sorted(name for name in SECRETS if name in env)
    assert not leaked, f"secret variables reached the process: {leaked}"
    blob = raw or "\0".join(f"{k}={v}" for k, v in env.items()).encode()
    for name, value in SECRETS.items():
        assert value.encode() not in blob, f"the value of {name} reached the process"
    for name, value in SETTINGS.items():
        assert env.get(name) == value, f"{name} did not get through"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in {**SECRETS, **SETTINGS}.items():
        monkeypatch.setenv(name, value)
    return {**os.environ}


def test_the_allow_list_drops_secret_names_and_values(secret_env: dict[str, str]) -> None:
    env = measured_code_environment(secret_env)
    assert_clean(env)
    assert env["PATH"] == secret_env["PATH"]


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_a_worker_process_receives_no_secret(secret_env: dict[str, str], start_method: str) -> None:
    """Spawned, or forked from the server that preloaded the backend (which inherits the
    server's environment, the kernel's copy included)."""
    spec = WorkerSpec(backend="torch", device="cpu", protocol=Protocol(), name="w0")
    pool = WorkerPool([spec], case_timeout_s=60, start_method=start_method)
    try:
        pool.wait_ready()
        [worker] = pool.workers
        assert worker.process.pid is not None
        raw = Path(f"/proc/{worker.process.pid}/environ").read_bytes()
        assert_clean(environ_of(worker.process.pid), raw)
    finally:
        pool.close()
    # The parent still has its environment back.
    assert os.environ["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
def test_collect_hands_its_workers_no_secret(secret_env: dict[str, str], tmp_path: Path) -> None:
    """`collectbot collect` run with secrets in its environment: its worker has none."""
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "bot", "collect", "--out", str(out), "--smoke", "--limit", "2",
        "--runs", "1", "--samples", "2", "--warmup", "0", "--target-sample-ms", "0.5",
        "--idle-ratio", "0", "--quiet", "--canary-hang", "m=8",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=secret_env)
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not workers:
            time.sleep(0.2)
            workers = [
                p
                for p in _children(proc.pid)
                if b"multiprocessing" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
        assert workers, "no worker process appeared"
        # The coordinator itself was given the secrets (the workflow's business)...
        assert environ_of(proc.pid)["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"]
        # ...its worker, which runs the measured code, was not.
        for pid in workers:
            assert_clean(environ_of(pid), Path(f"/proc/{pid}/environ").read_bytes())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


@pytest.mark.slow
def test_a_campaign_round_receives_no_secret(
    secret_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    """A campaign runs each ref's own collector (a pull request's code) in a subprocess."""
    from bot.campaign.git import worktree
    from bot.campaign.runner import Campaign, Side
    from tests.factories import small_campaign

    dump = tmp_path / "round-env"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\ncat /proc/$$/environ > {dump}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    cfg = small_campaign(repo, tmp_path / "ab", python=str(wrapper))
    campaign = Campaign(cfg)
    with worktree(campaign.repo, campaign.shas["head"], tmp_path / "tree") as tree:
        side = Side("head", "HEAD", campaign.shas["head"], tree)
        record = campaign._collect(side, tmp_path / "ab" / "r0", cfg.selection_args, "main")
    assert record.status == "complete"
    raw = dump.read_bytes()
    env = dict(e.split("=", 1) for e in raw.decode().split("\0") if "=" in e)
    assert_clean(env, raw)
    assert env["COLLECTBOT_GIT_SHA"] == campaign.shas["head"]
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tree)


from tests.test_campaign import repo as repo  # noqa: E402  (the two-commit repository fixture)


def test_the_collectors_own_settings_still_reach_the_workers() -> None:
    """The backends read their settings from the environment in the worker (the framework
    version the gate expects, vLLM's block size, the manifest)."""
    parent = {
        "COLLECTBOT_FRAMEWORK_VERSION": "0.24.0",
        "COLLECTBOT_VLLM_BLOCK_SIZE": "64",
        "COLLECTBOT_MANIFEST": "/m.yaml",
        "COLLECTBOT_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----",
        "COLLECTBOT_APP_PRIVATE_KEY_FILE": "/keys/app.pem",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HOME": "/cache/hf",
        "HF_TOKEN": "hf_x",
    }
    env = measured_code_environment(parent)
    assert env == {
        "COLLECTBOT_FRAMEWORK_VERSION": "0.24.0",
        "COLLECTBOT_VLLM_BLOCK_SIZE": "64",
        "COLLECTBOT_MANIFEST": "/m.yaml",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HOME": "/cache/hf",
    }


@pytest.mark.slow
def test_workflow_commands_printed_by_measured_code_are_fenced_off(tmp_path: Path) -> None:
    """In an Actions job, a worker (PR code; or the forkserver that imports it, which forked
    workers come from) prints workflow commands; the runner must not act on them: all of them fall between `::stop-commands::<token>` and `::<token>::`, and the
    token is fresh each time (the measured code cannot guess it)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import pathlib\n"
        "cmd = pathlib.Path('/proc/self/cmdline').read_bytes()\n"
        "if b'spawn_main' in cmd or b'multiprocessing.forkserver' in cmd:\n"
        "    print('::set-output name=trigger::true', flush=True)\n"
        "    print('::error title=pwned::from the measured code', flush=True)\n"
        "    import sys; print('::add-mask::x', file=sys.stderr, flush=True)\n"
    )
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    tokens = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        cmd = [
            sys.executable, "-m", "bot", "collect", "--out", str(out), "--smoke", "--limit", "1",
            "--runs", "1", "--samples", "2", "--warmup", "0", "--idle-ratio", "0",
        ]  # fmt: skip
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120
        )
        assert proc.returncode == 0, proc.stdout
        lines = proc.stdout.splitlines()
        commands = [i for i, line in enumerate(lines) if line.startswith("::")]
        first, last = commands[0], commands[-1]
        token = lines[first].removeprefix("::stop-commands::")
        assert len(token) == 32 and lines[last] == f"::{token}::", lines
        hostile = [line for line in lines if "name=trigger" in line or "pwned" in line]
        assert len(hostile) == 2, proc.stdout  # the measured code did print them...
        assert all(first < i < last for i in commands[1:-1])  # ...inside the fence
        assert lines[-1] == str(out)  # the command's own result comes after it
        tokens.append(token)
    # The fence is on stderr: stdout keeps only the result, for `$(collectbot ...)`.
    plain = {**os.environ, "GITHUB_ACTIONS": "true"}  # no printing worker this time
    alone = subprocess.run([*cmd[:5], str(tmp_path / "run-alone"), *cmd[6:]], capture_output=True,
                           text=True, env=plain, timeout=120)  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.strip().splitlines() == [str(tmp_path / "run-alone")]
    assert "::stop-commands::" in alone.stderr
    assert tokens[0] != tokens[1]
