"""The snippet in the how-to's section on SDP's programming guide is the tested code."""

from __future__ import annotations

import re
from pathlib import Path

import sdp_guide


def test_the_programming_guide_section_shows_the_tested_examples() -> None:
    guide = (Path(__file__).parents[2] / "docs/how-to/coming-from-sdp.md").read_text("utf-8")
    text = guide.split("### SDP's programming guide, example by example")[1].split("\n##")[0]
    blocks = re.findall(r"```(python|sql)\n(.*?)```", text, re.DOTALL)
    assert [kind for kind, _ in blocks] == ["python"]
    assert blocks[0][1] in sdp_guide.PROJECTS["python"]["ingestion_st.py"]
    assert '.format("kafka")' not in sdp_guide.PROJECTS["python"]["querying.py"]
