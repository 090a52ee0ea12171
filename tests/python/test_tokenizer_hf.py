"""eddy's byte-level BPE tokenizer against Hugging Face's `tokenizers`, both ways.

A tokenizer.json trained by eddy loads in `tokenizers` and one trained by `tokenizers` loads in
eddy, and in both cases the two libraries give the same ids for every text, and decode them back
to the text. eddy runs through tests/tools/tokenizer_tool.cpp, and through the Python binding
eddy.BpeTokenizer.
"""

import json
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPECIALS = ["<|endoftext|>", "<pad>"]
VOCAB_SIZE = 1200

TEXTS = [
    "Hello, world! It's a test; don't panic -- we'll see what they've done.",
    "I'M SHOUTING, YOU'RE NOT, she'd've said 'quoted' and \"double quoted\".",
    "Numbers: 0 7 42 3.14159 1,000,000 2024-11-29 1e-3 0x1F 12345678901234567890",
    "Punctuation... !!! ??? (parens) [brackets] {braces} <angles> a/b\\c @#$%^&*_+=~`|",
    "Multiple   spaces,    runs\tof\t\ttabs, and trailing spaces   ",
    "   leading spaces",
    "line one\nline two\n\n\nthree blank\r\nwindows line\n",
    "Café crème brûlée, naïve façade, Ångström, Straße, ĳ, ŉ",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย",
    "中文字符和日本語のテキスト、한국어 텍스트。全角　スペース",
    "emoji 😀 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ and symbols ∑∫√∞ ≠ ≤ ≥ € £ ¥",
    "non-breaking\u00a0space, thin\u2009space, zero\u200bwidth, soft\u00adhyphen",
    "<|endoftext|>special at the start, <pad><pad> twice, and one at the end<|endoftext|>",
    "a partial <|endoftext and <pad without closing",
    "",
    " ",
    "x",
]


def corpus_text():
    """Every Markdown file of the project, then the texts: prose, code, tables and numbers."""
    documents = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    return "\n".join(path.read_text(encoding="utf-8") for path in documents) + "\n" + "\n".join(TEXTS)


def texts_to_compare():
    readme_lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    return TEXTS + readme_lines + ["\n".join(TEXTS)]


def eddy_encode(tool, tokenizer_path, texts, tmp_path):
    texts_path = tmp_path / "texts.json"
    texts_path.write_text(json.dumps(texts), encoding="utf-8")
    result = subprocess.run([str(tool), "encode", str(tokenizer_path), str(texts_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_same_encodings(hf, eddy, texts):
    for text, ids, decoded in zip(texts, eddy["ids"], eddy["decoded"], strict=True):
        assert hf.encode(text).ids == ids, text
        assert decoded == text
        assert hf.decode(ids, skip_special_tokens=False) == text
    # The merges are in use: the texts take far fewer tokens than bytes.
    assert sum(map(len, eddy["ids"])) < 0.6 * sum(len(text.encode()) for text in texts)


def test_eddy_trained_tokenizer_loads_in_tokenizers(tmp_path, tokenizer_tool):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    path = tmp_path / "eddy_tokenizer.json"
    subprocess.run([str(tokenizer_tool), "train", str(corpus), str(VOCAB_SIZE), str(path), *SPECIALS], check=True)

    hf = Tokenizer.from_file(str(path))
    assert hf.get_vocab_size() == VOCAB_SIZE
    assert [hf.token_to_id(token) for token in SPECIALS] == [0, 1]
    texts = texts_to_compare()
    assert_same_encodings(hf, eddy_encode(tokenizer_tool, path, texts, tmp_path), texts)


def tokenizers_trained():
    """A GPT-2-style byte-level BPE tokenizer that `tokenizers` trains on the corpus."""
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    hf.train_from_iterator(corpus_text().splitlines(keepends=True), trainer)
    return hf


def test_tokenizers_trained_tokenizer_loads_in_eddy(tmp_path, tokenizer_tool):
    hf = tokenizers_trained()
    path = tmp_path / "hf_tokenizer.json"
    hf.save(str(path))
    assert hf.get_vocab_size() == VOCAB_SIZE

    texts = texts_to_compare()
    assert_same_encodings(hf, eddy_encode(tokenizer_tool, path, texts, tmp_path), texts)


def test_added_tokens_that_bpe_makes_too_decode_as_bpe_pieces(tmp_path):
    # tokenizers gives an added "é" or "Ġthe" the vocabulary's id, which ordinary text encodes to
    # as well: eddy decoded those ids as the added text, so "in the end" came back "inĠthe end".
    import eddy

    hf = tokenizers_trained()
    assert "Ġthe" in hf.get_vocab()
    hf.add_tokens(["é", "Ġthe", "<tool>"])
    path = tmp_path / "added.json"
    hf.save(str(path))
    loaded = eddy.BpeTokenizer.load(path)
    for text in ["in the end", "非常 好", "<tool> the", "<tool>", "Café"]:
        ids = loaded.encode(text)
        assert ids == hf.encode(text).ids, text
        assert loaded.decode(ids) == hf.decode(ids), text
        # Only an added "é" matched in text breaks its character, in both: its id is byte 0xE9's.
        assert hf.decode(ids) == (text if text != "Café" else "Caf\ufffd"), text


def test_added_tokens_are_matched_in_tokenizers_order(tmp_path):
    # tokenizers matches the added tokens with normalized: false (special tokens) over the whole
    # text first, then the others in the text between: one pass over both split "\n<|endoftext|>"
    # into an added "\n<" and the special token's bytes, and "xab" into "xa" + "b".
    import eddy

    hf = tokenizers_trained()
    hf.add_special_tokens(["ab"])
    hf.add_tokens(["\n<", "xa"])
    path = tmp_path / "overlapping.json"
    hf.save(str(path))
    loaded = eddy.BpeTokenizer.load(path)
    for text in ["a\n<|endoftext|>", "hi\n<pad>", "xab", "xa b\n<", "<|endoftext|>xa\n<|endoftext|>"]:
        assert loaded.encode(text) == hf.encode(text).ids, text
    # Saved again, the flags are kept: tokenizers reads eddy's file the same way.
    resaved = tmp_path / "resaved.json"
    loaded.save(resaved)
    again = Tokenizer.from_file(str(resaved))
    for text in ["a\n<|endoftext|>", "xab"]:
        assert again.encode(text).ids == hf.encode(text).ids, text


def test_a_special_token_spelled_as_a_byte_is_that_bytes_token(tmp_path):
    # Training with the special token "!" was refused: "!" is also a byte's token.
    import eddy

    texts = corpus_text().splitlines(keepends=True)
    tokenizer = eddy.BpeTokenizer.train(texts, 400, special_tokens=["!", "<pad>"])
    path = tmp_path / "bang.json"
    tokenizer.save(path)
    hf = Tokenizer.from_file(str(path))
    assert tokenizer.token_to_id("!") == 0 and tokenizer.vocab_size == 400
    for text in ["Hello, world! Wow!!", "no bang", "<pad>!"]:
        ids = tokenizer.encode(text)
        assert ids == hf.encode(text).ids, text
        assert tokenizer.decode(ids) == hf.decode(ids, skip_special_tokens=False) == text, text


def test_python_binding_matches_tokenizers(tmp_path):
    import eddy  # the package built into build/python (ctest puts it on PYTHONPATH)

    tokenizer = eddy.BpeTokenizer.train(corpus_text().splitlines(keepends=True), VOCAB_SIZE,
                                        special_tokens=SPECIALS)
    assert tokenizer.vocab_size == VOCAB_SIZE
    assert tokenizer.special_tokens == SPECIALS
    assert tokenizer.token_to_id("<pad>") == 1 and tokenizer.token_to_id("not a token") is None
    assert tokenizer.id_to_token(1) == "<pad>"
    assert eddy.BpeTokenizer.split_words("I don't  know") == ["I", " don", "'t", " ", " know"]

    path = tmp_path / "tokenizer.json"
    tokenizer.save(path)
    hf = Tokenizer.from_file(str(path))
    loaded = eddy.BpeTokenizer.load(path)
    for text in texts_to_compare():
        ids = tokenizer.encode(text)
        assert ids == hf.encode(text).ids == loaded.encode(text), text
        assert tokenizer.decode(ids) == text
    # Ids ending inside a character decode as `tokenizers` does, with U+FFFD for the broken bytes.
    first_byte_of_e_acute = tokenizer.token_to_id("Ã")
    assert tokenizer.decode([first_byte_of_e_acute]) == hf.decode([first_byte_of_e_acute]) == "\ufffd"

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                                  "model": {"type": "BPE", "merges": []}}))
    with pytest.raises(eddy.Error, match="broken.json: model.vocab: missing"):
        eddy.BpeTokenizer.load(broken)
