"""The command line a burn-in records in its results header."""

from __future__ import annotations

import shlex

from pushserver_burnin.settings import shown_command


def test_the_command_is_kept_as_typed_with_the_publish_key_hidden() -> None:
    typed = [
        "pushserver-burnin",
        "subscribers",
        "--host",
        "http://127.0.0.1:8080",
        "--ceiling",
        "1",
        "--label",
        "two words",
        "--publish-key",
        "s3cret",
        "--burnin-publish-key=other",
    ]
    shown = shown_command(typed)
    assert "s3cret" not in shown and "other" not in shown
    assert shlex.split(shown) == [*typed[:8], "--publish-key", "***", "--burnin-publish-key=***"]
