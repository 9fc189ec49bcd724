"""Every IRL_* default is documented, and the add-on keeps a project's own values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scrapy_irl import config
from scrapy_irl import settings as defaults

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.rst"
NAMES = sorted(n for n in dir(defaults) if n.startswith("IRL_"))


@pytest.mark.parametrize("name", NAMES)
def test_setting_documented_with_its_default(name: str) -> None:
    text = DOCS.read_text()
    match = re.search(rf"\.\. confval:: {name}\n((?:   .*\n|\n)+)", text)
    assert match, f"{name} is not documented in docs/settings.rst"
    value = getattr(defaults, name)
    shown = match.group(1)
    spellings = {repr(value), str(value), json.dumps(value)}
    assert any(f":default: ``{s}``" in shown for s in spellings), (
        f"{name}: docs disagree with the default {value!r}"
    )


def test_config_falls_back_to_defaults_and_rejects_unknown_names() -> None:
    from scrapy.settings import Settings

    assert config.getint(Settings(), "IRL_URLSEEN_BUCKETS") == defaults.IRL_URLSEEN_BUCKETS
    assert config.getint(Settings({"IRL_URLSEEN_BUCKETS": 4}), "IRL_URLSEEN_BUCKETS") == 4
    with pytest.raises(KeyError, match="IRL_NOT_A_SETTING"):
        config.get(Settings(), "IRL_NOT_A_SETTING")
