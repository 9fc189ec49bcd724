"""benchmarks/crawl.py: ``--set`` settings reach the irl runs with their JSON types."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.crawl import _setting


def test_set_values_are_parsed_as_json_when_they_can_be():
    parser = argparse.ArgumentParser()
    assert _setting("IRL_HOST_DELAY=2.5", parser) == ("IRL_HOST_DELAY", 2.5)
    assert _setting("IRL_RAM_BACKLOG_SECONDS=0", parser) == ("IRL_RAM_BACKLOG_SECONDS", 0)
    assert _setting("IRL_BUDGET_FUNCTION=linear", parser) == ("IRL_BUDGET_FUNCTION", "linear")
    assert _setting('ADDONS={"a.B": 1}', parser) == ("ADDONS", {"a.B": 1})
    assert _setting("X=a=b", parser) == ("X", "a=b")  # only the first = splits


@pytest.mark.parametrize("item", ["IRL_HOST_DELAY", "=3"])
def test_set_without_a_name_and_value_is_refused(item):
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        _setting(item, parser)
