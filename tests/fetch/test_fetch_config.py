"""`type: fetch` config is validated at load time, with every problem at its file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ConfigError, Engine
from engine.executors.fetch import FetchConfig
from engine.executors.fetch.config import parse_size


def load(tmp_path: Path, config_yaml: str) -> Engine:
    (tmp_path / "tools.yaml").write_text(
        "tools:\n"
        "  readPage:\n"
        "    type: fetch\n"
        "    description: Read a public web page as Markdown.\n"
        "    config:\n" + config_yaml
    )
    return Engine.from_dir(tmp_path)


def problems(tmp_path: Path, config_yaml: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, config_yaml)
    return [str(issue) for issue in caught.value.issues]


def test_the_issue_example_loads_and_describes_itself(tmp_path: Path) -> None:
    engine = load(
        tmp_path,
        '      allowedDomains: ["*.python.org", "example.com"]\n'
        "      parseMode: markdown\n"
        "      timeout: 10s\n"
        "      maxResponseSize: 200KB\n",
    )
    tool = engine.project.tools["readPage"]
    assert tool.executor.kind == "fetch"
    config = tool.executor.config
    assert (config.timeout, config.max_response_size, config.allowed_domains) == (10.0, 200 * 1024, ("*.python.org", "example.com"))
    assert tool.description == (
        "Read a public web page as Markdown. Only these hosts can be fetched: *.python.org, example.com. "
        "HTML pages are returned as Markdown. Responses are cut off after 200 KB."
    )
    schema = tool.parameters
    assert schema["required"] == ["url"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"url", "method", "headers", "body"}
    assert "Allowed hosts: *.python.org, example.com." in schema["properties"]["url"]["description"]


def test_defaults_follow_the_seed(tmp_path: Path) -> None:
    config = FetchConfig()
    assert config.default_method == "GET" and config.timeout == 10.0 and config.max_response_size == 100 * 1024
    assert config.parse_mode == "markdown" and config.max_redirects == 5
    assert config.allowed_domains == () and config.blocked_domains == () and config.allow_private_networks == ()


def test_a_get_only_tool_offers_neither_method_nor_body(tmp_path: Path) -> None:
    engine = load(tmp_path, "      allowedMethods: [GET]\n")
    assert set(engine.project.tools["readPage"].parameters["properties"]) == {"url", "headers"}


def test_every_bad_setting_is_reported_at_its_line(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "      timeout: 90s\n"  # line 6
        "      maxResponseSize: 5MB\n"
        "      allowedDomains: ['*example.com']\n"
        "      allowPrivateNetworks: ['10.0.0.1/8']\n"
        "      parseMode: html\n"
        "      maxRedirects: 50\n"
        "      defaultHeaders: {Host: internal}\n"
        "      retries: 3\n",
    )
    text = "\n".join(found)
    assert "tools.yaml:6:16: timeout: 90s is more than the 60s ceiling for a fetch" in text
    assert "tools.yaml:7:24: maxResponseSize: 5MB is more than the 1MB ceiling for a fetched response" in text
    assert "tools.yaml:8:23: allowedDomains: '*example.com': '*' may only stand alone or start a pattern as '*.'" in text
    assert "tools.yaml:9:29: allowPrivateNetworks: '10.0.0.1/8' is not a network in CIDR form such as 10.0.0.0/8" in text
    assert "tools.yaml:10:18: parseMode: Input should be 'raw', 'markdown' or 'json'" in text
    assert "tools.yaml:11:21: maxRedirects: Input should be less than or equal to 20" in text
    assert "tools.yaml:12:23: defaultHeaders: header 'Host' is set by the engine and cannot be chosen" in text
    assert "tools.yaml:13:7: unknown field 'retries'" in text
    assert len(found) == 8


def test_default_method_must_be_allowed(tmp_path: Path) -> None:
    (found,) = problems(tmp_path, "      defaultMethod: POST\n      allowedMethods: [GET, HEAD]\n")
    assert "defaultMethod POST is not in allowedMethods (GET, HEAD)" in found


@pytest.mark.parametrize(
    ("text", "size"),
    [(102400, 102400), ("200KB", 204800), ("200kb", 204800), ("512 KiB", 524288), ("1MB", 1048576), ("0.5MB", 524288), ("100", 100), ("64K", 65536)],
)
def test_human_sizes(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["2MB", "0", "-5", "lots", "1.5GB", True, "10 KBs"])
def test_bad_sizes(text: object) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_a_config_written_back_reads_the_same() -> None:
    config = FetchConfig(maxResponseSize=1000, timeout="1500ms", allowedDomains=["*.Python.org"], allowPrivateNetworks=["10.0.0.0/8"])
    dumped = config.model_dump(by_alias=True)
    assert dumped["maxResponseSize"] == 1000 and dumped["allowedDomains"] == ("*.python.org",)
    assert FetchConfig.model_validate(dumped) == config
    assert FetchConfig(maxResponseSize="200KB").model_dump(by_alias=True)["maxResponseSize"] == "200KB"
