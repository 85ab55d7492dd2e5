"""Report outputs: byte-identical reruns, provider labelling, self-contained HTML in Chromium."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from runner.analysis import (
    ClosedLoopResults,
    ProviderInfo,
    analyse_closed_loop,
    read_results,
    render_outputs,
    write_outputs,
)
from tests.analysis import _chromium
from tests.analysis import _fixtures as fx

SIM = ProviderInfo(name="simulated", model="simulated-1", simulated=True)
REAL = ProviderInfo(name="gemini", model="gemini-2.5-flash", simulated=False)


def closed(provider: ProviderInfo = SIM, seed: int = 2705) -> ClosedLoopResults:
    return analyse_closed_loop(
        fx.typed(fx.outcomes()), fx.schedule_rows(), provider=provider, seed=seed, replicates=1000
    )


@pytest.fixture(scope="module")
def results() -> ClosedLoopResults:
    return closed()


def test_two_runs_are_byte_identical(tmp_path: Path, results: ClosedLoopResults) -> None:
    a = write_outputs(results, tmp_path / "a")
    b = write_outputs(closed(), tmp_path / "b")
    assert sorted(a) == ["report.html", "results.json", "tables.md"]
    for name in a:
        assert a[name].read_bytes() == b[name].read_bytes(), name
    other = render_outputs(closed(seed=9))
    assert other["results.json"] != a["results.json"].read_bytes()


def test_outputs_carry_no_clock_or_path(results: ClosedLoopResults) -> None:
    for name, data in render_outputs(results).items():
        text = data.decode("utf-8")
        assert not re.search(r"20\d\d-\d\d-\d\dT", text), name
        assert "/tmp" not in text and "/work" not in text, name


def test_every_output_names_the_provider_and_says_simulated(results: ClosedLoopResults) -> None:
    for name, data in render_outputs(results).items():
        text = data.decode("utf-8")
        assert "simulated-1" in text and "SIMULATED" in text, name
    for name, data in render_outputs(closed(REAL)).items():
        text = data.decode("utf-8")
        assert "gemini-2.5-flash" in text and "SIMULATED" not in text, name


def test_results_json_holds_figures_with_inputs(results: ClosedLoopResults) -> None:
    data = json.loads(render_outputs(results)["results.json"])
    assert data["inputs"]["seed"] == 2705 and data["inputs"]["replicates"] == 1000
    assert data["provider"] == {"name": "simulated", "model": "simulated-1", "simulated": True}
    assert data["table4"]["ect"]["U"] == 0 and data["h2"]["n_comparator"] == 66


def test_html_is_self_contained(results: ClosedLoopResults) -> None:
    html = render_outputs(results)["report.html"].decode("utf-8")
    assert not re.search(r"""src\s*=\s*["'](https?:)?//""", html)
    # the only absolute links are the heat-map cells' links to the local viewer (`ect view`)
    hrefs = re.findall(r"""(<[a-z]+) href\s*=\s*["']((?:https?:)?//[^"']*)""", html)
    assert hrefs and all(tag == "<a" and url.startswith("http://127.0.0.1:8765/#/cells?")
                         for tag, url in hrefs), hrefs
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 9


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.chromium
@pytest.mark.skipif(not _chromium.CHROMIUM.exists(), reason="/usr/bin/chromium is absent")
def test_html_opens_in_headless_chromium(tmp_path: Path, results: ClosedLoopResults) -> None:
    paths = write_outputs(results, tmp_path / "out")
    opened = _chromium.open_report(paths["report.html"], tmp_path)
    assert opened.sentinel.get("ready") == "yes", opened.dom[-500:]
    assert opened.sentinel.get("errors") == "0"
    assert opened.sentinel.get("charts") == "9"
    assert opened.console_errors == []
    assert _png_size(opened.screenshot) == (1100, 2600)
    assert opened.screenshot.stat().st_size > 50_000  # a blank page compresses to a few kB


@pytest.mark.chromium
@pytest.mark.skipif(not _chromium.CHROMIUM.exists(), reason="/usr/bin/chromium is absent")
def test_chromium_check_catches_a_script_error(tmp_path: Path, results: ClosedLoopResults) -> None:
    html = render_outputs(results)["report.html"].decode("utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("</body>", "<script>notDefined();</script></body>"))
    opened = _chromium.open_report(broken, tmp_path)
    assert any("notDefined" in line for line in opened.console_errors)
    assert opened.sentinel.get("errors") == "1"


def test_report_regenerates_from_results_json(results: ClosedLoopResults) -> None:
    # results.json sorts its keys; re-rendering from it must give the same report bytes.
    first = render_outputs(results)
    read = read_results(json.loads(first["results.json"]))
    assert read == results  # results.json reads back as the same typed results
    again = render_outputs(read)
    assert again == first
