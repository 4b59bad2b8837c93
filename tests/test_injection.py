"""Exports and messages that cannot inject (issue 25, item 5).

* CSV: every CSV the CLI, the studies, the validation and the dashboard write goes through
  ``engine.limits.write_csv`` (``csv_safe``): a TEXT cell or column name starting with ``=``, ``+``, ``-``,
  ``@``, tab or CR gets a leading ``'`` (OWASP's CSV-injection rule); numbers, NaN and our own labels are
  untouched.  Checked on the reported reproducers (a calibrate file named ``=cmd|...``, a plan grid value
  ``=cmd|' /C calc'!A0``, a model name in the Summary CSV) and on every CLI writer, by reading the files back
  as text.
* Markdown: user text in the link warnings is shown literally (``app.text.md_escape`` / ``md_message``):
  ``?gpu=[click me](https://evil.example/)`` is no link, ``![px](http://x)`` no image, shortcodes no icon.
* Model names from a config.json are refused outside a conservative character set.
"""
from __future__ import annotations

import ast
import html
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import download, uploader
from streamlit.testing.v1 import AppTest

import engine.sim
from app import controls, exports
from app.text import WORD_JOINER, md_escape, md_message
from engine import Scenario, csv_safe, model_from_hf_config, presets, write_csv
from engine.cli import main
from engine.presets.hf import MAX_NAME_CHARS

ROOT = Path(__file__).resolve().parents[1]
MAIN = str(ROOT / "app" / "main.py")
DANGER = ("=", "+", "-", "@", "\t", "\r")
#: The reported payloads, and one per dangerous first character.
HOSTILE = ['=HYPERLINK("http://evil.example","x")', "=cmd|' /C calc'!A0", "+1+cmd|x", "-2+3+cmd|x",
           "@SUM(1+1)*cmd|x", "\t=1+1", "\r=1+1"]
LLAMA_1B = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
            "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64,
            "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 128256}


def unsafe_cells(csv: str | bytes | Path) -> list:
    """Column names and cells of a CSV, read back as text, that a spreadsheet would evaluate: they start with a
    dangerous character and are not a number (a negative number in a numeric column is a number)."""
    if isinstance(csv, Path):
        csv = csv.read_bytes()
    text = csv.decode() if isinstance(csv, bytes) else csv
    df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    bad = [("column", c) for c in df.columns if str(c).startswith(DANGER)]
    for c in df.columns:
        s = df[c]
        hit = s.str.startswith(DANGER) & pd.to_numeric(s, errors="coerce").isna()
        bad += [(c, v) for v in s[hit].head(5)]
    return bad


# ------------------------------------------------------------------------------------------- csv_safe
@pytest.mark.parametrize("value", HOSTILE + ["=", "-", "+", "@"])
def test_each_dangerous_prefix_gets_a_quote(value):
    out = csv_safe(pd.DataFrame({"t": [value, "plain"]}))
    assert out["t"].tolist() == ["'" + value.replace("\r", "\n"), "plain"]  # a CR is written as a line feed
    assert not unsafe_cells(write_csv(pd.DataFrame({"t": [value]}), index=False))


@pytest.mark.parametrize("value", ["a\r=1+1", "\r=1+1", "a\r\n=1+1"])
def test_a_carriage_return_inside_text_cannot_start_a_row(value):
    """pandas quotes a cell holding a line feed, not one holding a bare CR, which a spreadsheet (and pandas)
    reads as a new row: the CR is written as a line feed, inside a quoted cell."""
    text = write_csv(pd.DataFrame({"t": [value], "n": [1]}), index=False)
    back = pd.read_csv(io.StringIO(text), dtype=str)
    assert len(back) == 1 and back["n"].tolist() == ["1"] and not unsafe_cells(text)
    assert back["t"].iloc[0] == ("'" if value[0] == "\r" else "") + value.replace("\r\n", "\n").replace("\r", "\n")


@pytest.mark.parametrize("value", ["plain", "", " =1", "'=1", "a=b", "a-b", "x@y", "llama-2-7b", "a100-80gb"])
def test_other_text_is_untouched(value):
    assert csv_safe(pd.DataFrame({"t": [value]}))["t"].tolist() == [value]


def test_numbers_nan_and_none_are_untouched():
    df = pd.DataFrame({"f": [-1.5, 2.0, np.nan, -np.inf], "i": [-3, 0, 4, -7], "b": [True, False, True, False],
                       "t": pd.Series(["-3", None, np.nan, "ok"], dtype=object)})
    out = csv_safe(df)
    for c in ("f", "i", "b"):
        assert out[c].dtype == df[c].dtype and out[c].equals(df[c])
    # a number stored as text is text: quoted (the writers keep numbers in numeric columns)
    assert out["t"].iloc[0] == "'-3" and out["t"].iloc[1] is None and pd.isna(out["t"].iloc[2])
    text = write_csv(df, index=False)
    assert text.splitlines()[1] == "-1.5,-3,True,'-3" and text.splitlines()[2] == "2.0,0,False,"
    back = pd.read_csv(io.StringIO(text))
    assert back["f"].tolist()[:2] == [-1.5, 2.0] and back["i"].tolist() == [-3, 0, 4, -7]


def test_column_names_index_and_every_text_dtype():
    df = pd.DataFrame({"=cmd": ["=a"], "-x": [1.0], "ok": ["b"]}, index=pd.Index(["@i"], name="k"))
    df["s"] = pd.array(["+s"], dtype="string")
    df["c"] = pd.Categorical(["-c"])
    df["m"] = pd.Series(["=m"], index=df.index, dtype=object)
    out = csv_safe(df)
    assert list(out.columns) == ["'=cmd", "'-x", "ok", "s", "c", "m"]
    assert out.iloc[0].tolist() == ["'=a", 1.0, "b", "'+s", "'-c", "'=m"]
    assert out.index.tolist() == ["'@i"]
    assert not unsafe_cells(write_csv(df))


def test_input_frame_is_not_modified_and_numbers_are_not_copied():
    df = pd.DataFrame({"t": ["=x"] * 3, "n": np.arange(3.0) - 1})
    keep = df.copy()
    out = csv_safe(df)
    pd.testing.assert_frame_equal(df, keep)
    assert np.shares_memory(out["n"].to_numpy(), df["n"].to_numpy())  # only text columns are rebuilt
    assert list(df["t"]) == ["=x"] * 3 and list(out["t"]) == ["'=x"] * 3


def test_a_million_row_frame_is_handled_column_wise():
    n = 1_000_000
    df = pd.DataFrame({"x": np.random.default_rng(0).random(n), "s": np.where(np.arange(n) % 2, "abc", "-x")})
    out = csv_safe(df)
    assert (out["s"].str.startswith("'")).sum() == n // 2 and out["x"].dtype == float


def test_write_csv_writes_a_file(tmp_path):
    write_csv(pd.DataFrame({"a": ["=1"], "b": [-2]}), tmp_path / "x.csv", index=False)
    assert (tmp_path / "x.csv").read_text() == "a,b\n'=1,-2\n"


def _to_csv_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "to_csv"]


def test_no_writer_bypasses_write_csv():
    """Every CSV the engine, the CLI, the studies, the validation or the app writes goes through write_csv: no
    other ``.to_csv(`` call and no ``csv`` module writer in engine/ or app/."""
    calls = {}
    for f in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("app/**/*.py")]:
        if f == ROOT / "engine" / "limits.py":
            continue
        lines = _to_csv_calls(f)
        if lines:
            calls[str(f.relative_to(ROOT))] = lines
        text = f.read_text()
        assert "csv.writer" not in text and "csv.DictWriter" not in text, f
    assert calls == {}, calls


def test_committed_validation_csvs_are_unchanged_by_the_rule():
    """Our own content never starts like a formula: the committed CSVs read the same through csv_safe."""
    files = sorted((ROOT / "docs" / "validation").glob("*.csv"))
    assert files
    for f in files:
        df = pd.read_csv(f)
        assert csv_safe(df).equals(df), f
        assert not unsafe_cells(f), f


# ------------------------------------------------------------------------------------------- CLI writers
def _hostile_simulate(monkeypatch):
    """engine.sim.simulate, with a hostile text column in every frame and a hostile summary value: what run
    --out writes must still be inert (it proves each of its writers goes through write_csv)."""
    real = engine.sim.simulate

    def fake(sc, trace=None, **kw):
        r = real(sc, trace=trace, **kw)
        for name in ("requests", "timeseries", "events", "replicas", "timeseries_by_replica"):
            df = getattr(r, name)
            if df is not None:
                df["label"] = [HOSTILE[i % len(HOSTILE)] for i in range(len(df))]
                df["=col"] = 1
        r.summary["note"] = HOSTILE[0]
        return r

    monkeypatch.setattr(engine.sim, "simulate", fake)


def test_run_out_writes_inert_csvs(tmp_path, monkeypatch, capsys):
    _hostile_simulate(monkeypatch)
    out = tmp_path / "run"
    rc = main(["run", "--preset", "default", "--set", "duration_s=6", "--set", "warmup_s=1",
               "--set", "arrival_rate_rps=4", "--set", "num_replicas=2", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    names = {p.name for p in out.glob("*.csv")}
    assert names == {"requests.csv", "timeseries.csv", "events.csv", "summary.csv", "replicas.csv",
                     "timeseries_by_replica.csv"}
    for p in out.glob("*.csv"):
        assert not unsafe_cells(p), p.name
        if p.name != "summary.csv":
            assert "'=col" in pd.read_csv(p).columns, p.name
    summ = pd.read_csv(out / "summary.csv")
    assert summ["note"].iloc[0] == "'" + HOSTILE[0] and summ["requests"].dtype.kind in "if"
    req = pd.read_csv(out / "requests.csv")
    assert set(req["label"].str[0]) == {"'"} and req["arrival_s"].dtype == float


def test_calibrate_quotes_a_formula_file_name(tmp_path, monkeypatch, capsys):
    name = "=cmd|x.json"
    shutil.copy(ROOT / "examples" / "vllm_bench_result.json", tmp_path / name)
    monkeypatch.chdir(tmp_path)
    rc = main(["calibrate", "--data", name, "--preset", "vllm-llama31-8b", "--max-nfev", "2", "--out", "fit.json"])
    assert rc == 0, capsys.readouterr().err
    err = tmp_path / "fit_errors.csv"
    assert not unsafe_cells(err)
    t = pd.read_csv(err)
    assert set(t["case"]) == {"'" + name}
    assert t["rel_error"].dtype == float and (t["rel_error"] < 0).any()  # negative numbers stay numbers


def test_plan_quotes_a_formula_grid_value(tmp_path, capsys):
    out = tmp_path / "plan"
    gpus = ["=cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3"]
    rc = main(["plan", "--preset", "default", "--set", "duration_s=40", "--slo", "ttft_p99_ms=500",
               "--grid", "gpu=" + ",".join(gpus), "--workers", "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert not unsafe_cells(out / "plan.csv")
    t = pd.read_csv(out / "plan.csv")
    assert sorted(t["gpu"]) == sorted("'" + g for g in gpus) and not t["feasible"].any()


def test_sweep_quotes_a_model_name_starting_with_a_dash(tmp_path, registry, capsys):
    # '-' is a character model names may hold (engine.presets.hf.NAME_CHARS): the CSV still cannot start a formula
    presets.register_model(model_from_hf_config(LLAMA_1B, "-evil-1b"))
    out = tmp_path / "sweep"
    rc = main(["sweep", "--preset", "default", "--set", "duration_s=4", "--set", "warmup_s=1",
               "--set", "arrival_rate_rps=2", "--grid", "model=-evil-1b,llama-2-7b", "--replications", "2",
               "--workers", "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    for f in ("sweep.csv", "summary.csv"):
        assert not unsafe_cells(out / f), f
        assert set(pd.read_csv(out / f)["model"]) == {"'-evil-1b", "llama-2-7b"}, f


# ------------------------------------------------------------------------------------------- app downloads
def _frames(n: int = 4) -> dict[str, pd.DataFrame]:
    return {"naive": pd.DataFrame({"arrival_s": np.arange(n) - 1.0, "tier": [HOSTILE[i % len(HOSTILE)]
                                                                             for i in range(n)]})}


def test_app_exports_are_inert():
    assert not unsafe_cells(exports.requests_csv(_frames()))
    assert not unsafe_cells(exports.timeseries_csv(_frames()))
    summ = exports.summary_csv({"=evil": {"ttft_p50_ms": -1.0, "note": HOSTILE[1]}})
    assert not unsafe_cells(summ) and pd.read_csv(io.BytesIO(summ))["ttft_p50_ms"].iloc[0] == -1.0
    assert not unsafe_cells(exports.csv_bytes(pd.DataFrame({"@x": HOSTILE})))


def _config(path: str) -> bytes:
    return json.dumps({**presets.HF_PRESET_CONFIGS["mistral-7b-v0.3"][2], "num_hidden_layers": 12,
                       "_name_or_path": path}).encode()


def _whatif() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.query_params["strategy"] = "naive"
    return at.run()


def test_app_downloads_of_an_uploaded_model_are_inert(media, registry):
    """The reported Summary CSV injection: the model name from a config.json.  A formula is refused at upload;
    a name that may start with '-' is quoted in every download."""
    at = _whatif()
    uploader(at, "config_upload").set_value(("config.json", _config('=HYPERLINK("http://evil.example")'),
                                                     "application/json"))
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("_name_or_path" in e and "not allowed" in e for e in errors), errors
    assert not any("HYPERLINK" in e for e in errors)  # the refused value is not echoed
    assert at.selectbox(key="model").value == "llama-3.1-8b" == presets.SCENARIOS["default"]["model"]  # kept

    uploader(at, "config_upload").set_value(("config.json", _config("acme/-Evil-3B"), "application/json"))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="model").value == "-evil-3b"
    for key in ("dl_summary", "dl_requests", "dl_timeseries"):
        data = download(at, key, media)
        assert not unsafe_cells(data), key
    summ = pd.read_csv(io.BytesIO(download(at, "dl_summary", media)))
    assert summ["model"].tolist() == ["'-evil-3b"] and summ["ttft_p50_ms"].dtype == float


# ------------------------------------------------------------------------------------------- Markdown
def _rendered(md_source: str) -> tuple[str, set[str]]:
    """(visible text, HTML tags) of ``md_source`` under CommonMark + GFM tables/strikethrough."""
    markdown_it = pytest.importorskip("markdown_it")
    out = markdown_it.MarkdownIt("commonmark").enable(["strikethrough", "table"]).render(md_source)
    text = html.unescape(re.sub(r"<[^>]+>", "", out)).strip().replace(WORD_JOINER, "")
    return text, set(re.findall(r"<(\w+)", out))


MD_HOSTILE = ["[click me](https://evil.example/)", "![px](http://x.example/p.png)", "**b** _i_ `c` ~~s~~ <b>x</b>",
              "# h", "- li", "1. x", "> q", "| a | b |", "&lt; &amp;", "a\\*b \\", ":smile: :material/home: :red[x]",
              "$x^2$", "[a]: http://x", "www.evil.example a@b.example http://e.example", "``code``", "<http://x>"]


@pytest.mark.parametrize("text", MD_HOSTILE)
def test_md_escape_shows_the_text_literally(text):
    src = md_escape(text)
    visible, tags = _rendered(src)
    assert visible == text and tags == {"p"}, (src, visible, tags)
    plain = src.replace("\\", "")
    # what Streamlit applies after parsing (emoji/icon shortcodes, GFM autolink literals) finds nothing
    assert not re.search(r":[\w-]+:", plain) and ":material/" not in plain
    assert not re.search(r"https?://|www\.|\w@\w", plain)


def test_md_escape_turns_line_breaks_into_spaces():
    assert _rendered(md_escape("a\n\n# b\r\n- c"))[0] == "a # b - c"


def test_md_message_keeps_our_code_spans_and_escapes_the_rest():
    msg = "URL parameter `gpu`='[click me](https://evil.example/)' dropped; Unknown URL parameter `[x](http://e)`"
    src = md_message(msg)
    assert src.startswith("URL parameter `gpu`=")
    visible, tags = _rendered(src)
    assert tags == {"p", "code"} and "[click me](https://evil.example/)" in visible and "`[x](http://e)`" in visible


def _unescaped(src: str, chars: str) -> list[str]:
    """Characters of ``chars`` in ``src`` not preceded by a backslash escape (outside our `name` code spans)."""
    src = re.sub(r"`[A-Za-z0-9_.]+`", "", src)
    return re.findall(r"(?<!\\)(?:\\\\)*([" + re.escape(chars) + "])", src)


@pytest.mark.parametrize("value", ["[click me](https://evil.example/)", "![px](http://x.example/p.png)",
                                   ":material/home: :smile: www.evil.example"])
def test_url_warning_shows_the_value_literally(value):
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params["gpu"] = value
    at.query_params["duration_s"] = "60"
    at.query_params["strategy"] = "naive"
    at.run()
    assert not at.exception
    warnings = [w.value for w in at.warning if "`gpu`" in w.value]
    assert len(warnings) == 1, [w.value for w in at.warning]
    src = warnings[0]
    assert not _unescaped(src, "[]()!<>*_:"), src
    visible, tags = _rendered(src)
    assert value in visible and "a" not in tags and "img" not in tags, (src, tags)
    assert "](" not in src and ":material/" not in src.replace("\\", "")
    assert at.selectbox(key="gpu").value == "h100-80gb" == presets.SCENARIOS["default"]["gpu"]  # dropped: the preset's


def test_url_issue_messages_keep_their_plain_text():
    """The Issue messages stay plain text (tests and the upload messages quote them); only rendering escapes."""
    _, issues = controls.sanitize_query({"gpu": ["[x](http://e)"]})
    assert any("'[x](http://e)'" in i.message for i in issues)


# ------------------------------------------------------------------------------------------- model names
@pytest.mark.parametrize("path, bad", [
    ('=HYPERLINK("http://evil.example")', "'='"),
    ("acme/[click me](https://evil.example)", "'['"),
    ("acme/![px](http://x)", "'!'"),
    ("acme/<script>", "'<'"),
    ("acme/x\ny", r"'\n'"),
    ("acme/caf\u00e9", "'\u00e9'"),
    ("acme/`code`", "'`'"),
])
def test_config_name_outside_the_character_set_is_refused(path, bad):
    with pytest.raises(ValueError, match=r"^_name_or_path: invalid value: characters ") as e:
        model_from_hf_config({**LLAMA_1B, "_name_or_path": path})
    msg = str(e.value)
    assert bad in msg and "allowed: at most 100 characters among ASCII letters, digits" in msg
    assert path not in msg  # the value itself is not echoed (it may be Markdown or a formula)
    with pytest.raises(ValueError, match=r"^config\.json: _name_or_path: "):
        controls.register_config(_config(path))


def test_name_argument_and_length_are_checked():
    with pytest.raises(ValueError, match=r"^name: invalid value: characters '=' not allowed"):
        model_from_hf_config(LLAMA_1B, "=x")
    ok = "a" * MAX_NAME_CHARS
    assert model_from_hf_config({**LLAMA_1B, "_name_or_path": "acme/" + ok[5:]}).name == ok[5:]
    with pytest.raises(ValueError, match=rf"^_name_or_path: invalid value of {MAX_NAME_CHARS + 1} characters"):
        model_from_hf_config({**LLAMA_1B, "_name_or_path": "a" * (MAX_NAME_CHARS + 1)})


@pytest.mark.parametrize("path, name", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
    ("/data/models/Qwen2.5-7B_v2", "qwen2.5-7b_v2"),
    ("acme/My Model: v1.0", "my model: v1.0"),
])
def test_real_names_pass(path, name):
    m = model_from_hf_config({**LLAMA_1B, "_name_or_path": path})
    assert m.name == name and m.source == f"{path} (config.json)"


def test_presets_and_explicit_labels_still_build():
    # label and source given by the caller (the presets' own text) are not subject to the upload rule
    m = model_from_hf_config(LLAMA_1B, "my-llama", label="My Llama (1B)", source="me/my-llama (config.json)")
    assert m.label == "My Llama (1B)"
    assert Scenario.from_preset("default").model in presets.MODELS
