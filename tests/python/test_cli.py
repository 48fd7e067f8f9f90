"""The CLI's contract: --help everywhere, --version, and exit codes (0 ok, 2 user error)."""
import re

from conftest import run_surogate


def test_version(surogate_bin):
    result = run_surogate(surogate_bin, "--version")
    assert result.returncode == 0
    assert re.match(r"surogate \d+\.\d+\.\d+", result.stdout.strip())


def test_unknown_command_is_a_user_error(surogate_bin):
    """It used to say only "A subcommand is required", without the word it did not know."""
    result = run_surogate(surogate_bin, "frobnicate", "x.yaml")
    assert result.returncode == 2
    assert "'frobnicate' is not a surogate command; the commands are: " in result.stderr, result.stderr
    assert "sft" in result.stderr and "eval" in result.stderr


def test_every_command_has_help(surogate_bin):
    top = run_surogate(surogate_bin, "--help")
    assert top.returncode == 0
    commands = re.findall(r"^  (\w[\w-]*)\s", re.split(r"(?i)subcommands:", top.stdout)[-1], re.M)
    assert re.search(r"(?i)subcommands:", top.stdout)
    assert "info" in commands
    for command in commands:
        result = run_surogate(surogate_bin, command, "--help")
        assert result.returncode == 0, command
        assert "Usage" in result.stdout or "usage" in result.stdout.lower(), command


def test_info_reports_host_and_recipes(surogate_bin):
    result = run_surogate(surogate_bin, "info")
    assert result.returncode == 0
    assert "cpu:" in result.stdout
    assert "recipes:" in result.stdout
    assert "fp8_hybrid" in result.stdout
