"""Loaders on the shipped data, the data directory's resolution and checksums, and located
errors on broken copies."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from lemon.data import (
    Benchmark,
    ChoiceItem,
    CodeItem,
    DataError,
    NumericItem,
    PublishedSplit,
    data_dir,
    load_items,
    locate_data,
    mmlu_subjects,
    verify_checksums,
)
from lemon.data.paths import PACKAGED_DATA_DIR

COUNTS = {
    (Benchmark.GSM8K, PublishedSplit.TEST): 1319,
    (Benchmark.GSM8K, PublishedSplit.TRAIN): 7473,
    (Benchmark.SVAMP, PublishedSplit.TEST): 1000,
    (Benchmark.MULTIARITH, PublishedSplit.TEST): 600,
    (Benchmark.AQUA, PublishedSplit.TEST): 254,
    (Benchmark.MMLU, PublishedSplit.TEST): 14042,
    (Benchmark.MMLU, PublishedSplit.DEV): 285,
    (Benchmark.HUMANEVAL, PublishedSplit.TEST): 164,
}


@pytest.mark.parametrize(("benchmark", "source"), list(COUNTS))
def test_counts_and_unique_ids(benchmark: Benchmark, source: PublishedSplit) -> None:
    items = load_items(benchmark, source=source)
    assert len(items) == COUNTS[benchmark, source]
    assert len({item.id for item in items}) == len(items)
    assert all(item.benchmark is benchmark for item in items)


def test_ids_follow_the_documented_scheme() -> None:
    assert [i.id for i in load_items("gsm8k")[:2]] == ["gsm8k:0", "gsm8k:1"]
    assert load_items("gsm8k", source="train")[5].id == "gsm8k-train:5"
    assert load_items("svamp")[0].id == "svamp:chal-1"
    assert load_items("multiarith")[0].id == "multiarith:0"
    assert load_items("aqua")[253].id == "aqua:253"
    assert load_items("mmlu")[0].id == "mmlu:abstract_algebra:0"
    assert load_items("mmlu", source="dev")[0].id == "mmlu-dev:abstract_algebra:0"
    assert load_items("humaneval")[0].id == "humaneval:HumanEval/0"


def test_gsm8k_answers_strip_commas_and_keep_signs() -> None:
    items = [i for i in load_items("gsm8k") if isinstance(i, NumericItem)]
    first = items[0]
    assert first.answer == 18.0
    assert first.question.startswith("Janet")
    with_commas = [i for i in items if "," in i.answer_text]
    assert len(with_commas) == 14  # the README's count
    assert all(i.answer == float(i.answer_text.replace(",", "")) for i in with_commas)
    assert sum(i.answer < 0 for i in items) == 2


def test_svamp_prompt_is_body_then_question() -> None:
    item = load_items("svamp")[0]
    assert isinstance(item, NumericItem)
    assert item.question == (
        "Each pack of dvds costs 76 dollars. If there is a discount of 25 dollars on each pack "
        "How much do you have to pay to buy each pack?"
    )
    assert item.answer == 51.0


def test_aqua_options_lose_their_letter_prefix() -> None:
    item = load_items("aqua")[0]
    assert isinstance(item, ChoiceItem)
    assert item.options[0] == "5(√3 + 1)"
    assert item.answer == "A"
    assert item.letters == "ABCDE"


def test_mmlu_rows_keep_their_index_within_the_subject() -> None:
    subjects = mmlu_subjects()
    assert len(subjects) == 57
    anatomy = [i for i in load_items("mmlu") if i.id.startswith("mmlu:anatomy:")]
    assert anatomy[0].id == "mmlu:anatomy:0"
    assert anatomy[1].question.startswith('A "dished face" profile')
    assert isinstance(anatomy[1], ChoiceItem)
    assert anatomy[1].answer == "B"  # index 1 in the file


def test_mmlu_keeps_unusual_line_separators_inside_fields() -> None:
    # management_test.csv holds U+0085 (NEL) inside a question: str.splitlines would break it
    management = {i.id: i for i in load_items("mmlu") if i.id.startswith("mmlu:management:")}
    assert len(management) == 103
    assert any("\x85" in i.question for i in management.values())


def test_humaneval_items() -> None:
    item = load_items("humaneval")[0]
    assert isinstance(item, CodeItem)
    assert item.entry_point == "has_close_elements"
    assert "def check(candidate)" in item.test


def test_data_directory_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEMON_DATA_DIR", raising=False)
    assert locate_data().origin == "packaged"
    assert data_dir() == PACKAGED_DATA_DIR
    monkeypatch.setenv("LEMON_DATA_DIR", str(tmp_path))
    assert locate_data() == locate_data(tmp_path).__class__(tmp_path, "environment")
    assert locate_data(PACKAGED_DATA_DIR).origin == "argument"
    monkeypatch.setenv("LEMON_DATA_DIR", str(tmp_path / "gone"))
    with pytest.raises(DataError, match=r"gone: data directory does not exist \(set by"):
        data_dir()


def test_shipped_data_matches_its_checksums() -> None:
    sums = (PACKAGED_DATA_DIR / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ", 1)[1] for line in sums}
    on_disk = {
        str(path.relative_to(PACKAGED_DATA_DIR))
        for path in PACKAGED_DATA_DIR.rglob("*")
        if path.is_file() and path.name not in {"SHA256SUMS", "SOURCE.md", "LICENSE", "README.md"}
    }
    assert listed == on_disk  # every data file is listed, and nothing listed is missing
    assert len(listed) == 120  # 57 + 57 MMLU CSVs and six other files
    assert verify_checksums(PACKAGED_DATA_DIR) == []
    for folder in ("gsm8k", "svamp", "multiarith", "aqua", "mmlu", "humaneval"):
        assert (PACKAGED_DATA_DIR / folder / "SOURCE.md").is_file()


def test_checksum_mismatch_is_named(tmp_path: Path) -> None:
    (tmp_path / "svamp").mkdir()
    shutil.copy(PACKAGED_DATA_DIR / "svamp" / "SVAMP.json", tmp_path / "svamp" / "SVAMP.json")
    lines = (PACKAGED_DATA_DIR / "SHA256SUMS").read_text().splitlines()
    kept = [line for line in lines if line.endswith(("svamp/SVAMP.json", "aqua/test.json"))]
    (tmp_path / "SHA256SUMS").write_text("\n".join(kept) + "\n")
    assert verify_checksums(tmp_path) == [f"{tmp_path / 'aqua/test.json'}: missing"]
    with (tmp_path / "svamp" / "SVAMP.json").open("ab") as handle:
        handle.write(b" ")
    (svamp_sum,) = (line.split()[0] for line in kept if line.endswith("SVAMP.json"))
    problems = verify_checksums(tmp_path)
    assert len(problems) == 2
    assert problems[0] == f"{tmp_path / 'aqua/test.json'}: missing"
    assert problems[1].startswith(f"{tmp_path / 'svamp/SVAMP.json'}: sha256 ")
    assert problems[1].endswith(f", expected {svamp_sum}")


def test_missing_data_dir_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist") as caught:
        load_items("gsm8k", directory=tmp_path / "nowhere")
    assert caught.value.render().startswith(str(tmp_path / "nowhere") + ": ")


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_items("svamp", directory=tmp_path)
    assert caught.value.render() == (
        f"{tmp_path.resolve() / 'svamp/SVAMP.json'}: missing svamp test data "
        "(see 'lemon data' for the layout)"
    )


def test_malformed_jsonl_line_is_located(tmp_path: Path) -> None:
    (tmp_path / "gsm8k").mkdir()
    path = tmp_path / "gsm8k" / "test.jsonl"
    path.write_text(
        '{"question": "q", "answer": "x #### 1"}\n{"question": "q", "answer": "no final"}\n'
    )
    with pytest.raises(DataError) as caught:
        load_items("gsm8k", directory=tmp_path)
    assert caught.value.render() == f"{path.resolve()}:2: item 1: answer has no '#### <final>'"
    path.write_text('{"question": "q", "answer": "x #### 1"}\n{"question": \n')
    with pytest.raises(DataError, match=r"test\.jsonl:2: malformed JSON"):
        load_items("gsm8k", directory=tmp_path)


def test_malformed_mmlu_row_is_located(tmp_path: Path) -> None:
    folder = tmp_path / "mmlu" / "test"
    folder.mkdir(parents=True)
    path = folder / "toy_test.csv"
    path.write_text(
        'question,choice0,choice1,choice2,choice3,answer\n"multi\nline",a,b,c,d,0\nq,a,b,c,d,7\n'
    )
    with pytest.raises(DataError) as caught:
        load_items("mmlu", directory=tmp_path)
    assert caught.value.render() == f"{path.resolve()}:4: answer '7' should be 0-3"


def test_malformed_humaneval_gzip_line_is_located(tmp_path: Path) -> None:
    folder = tmp_path / "humaneval"
    folder.mkdir()
    source = data_dir() / "humaneval" / "HumanEval.jsonl.gz"
    with gzip.open(source, "rt") as handle:
        lines = handle.read().splitlines()
    record = json.loads(lines[2])
    del record["entry_point"]
    lines[2] = json.dumps(record)
    with gzip.open(folder / "HumanEval.jsonl.gz", "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"HumanEval\.jsonl\.gz:3: item 2: missing field"):
        load_items("humaneval", directory=tmp_path)


def test_json_array_syntax_error_is_located(tmp_path: Path) -> None:
    folder = tmp_path / "multiarith"
    folder.mkdir()
    shutil.copy(data_dir() / "multiarith" / "MultiArith.json", folder / "MultiArith.json")
    path = folder / "MultiArith.json"
    text = path.read_text().splitlines()
    text[4] = text[4] + ","  # a stray comma on line 5
    path.write_text("\n".join(text))
    with pytest.raises(DataError, match=r"MultiArith\.json:\d+: malformed JSON"):
        load_items("multiarith", directory=tmp_path)
