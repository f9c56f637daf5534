"""Tokenizers made here for the tests, trained with Hugging Face `tokenizers` on the project's
text corpus (nothing is downloaded): SentencePiece-style BPE over characters with byte fallback
as Llama 2 and Mistral ship it in tokenizer.json, and vocabulary-only GGUF files (written with the
`gguf` package) holding such a vocabulary or a byte-level one, as llama.cpp and transformers read
them.
"""
import json

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ditto_testing import text_corpus

SPECIAL = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]


def _trained_pieces(vocab_size):
    """(vocabulary in id order, merges) of a BPE trained on words that start with "▁", as
    SentencePiece cuts text; few characters, so that many fall back to bytes."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, limit_alphabet=150,
                                  show_progress=False)
    tokenizer.train_from_iterator(text_corpus.lines(3000, seed=2), trainer)
    model = json.loads(tokenizer.to_str())["model"]
    pieces = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1]) if token not in SPECIAL]
    return pieces, [tuple(merge) for merge in model["merges"]]


def sentencepiece_style(style, vocab_size=3000):
    """A tokenizer.json as Llama 2 ("llama2": Prepend and Replace normalizers, no pre-tokenizer) or
    Mistral ("mistral": Metaspace, prepend_scheme first) ship it: <unk>, <s>, </s>, then the 256
    byte tokens, then the pieces; BPE with byte_fallback; the decoder Replace, ByteFallback, Fuse,
    Strip; BOS before the text (TemplateProcessing)."""
    pieces, merges = _trained_pieces(vocab_size)
    vocab = {token: index for index, token in enumerate(SPECIAL + BYTE_TOKENS + pieces)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if style == "llama2":
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    elif style == "mistral":
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    else:
        raise ValueError(style)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           decoders.Strip(" ", 1, 0)])
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL])
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    if style == "llama2":
        # Matched after normalizing, so as the normalizer's "▁<tab>": only where a stretch starts.
        tokenizer.add_tokens([AddedToken("<tab>", special=False, normalized=True)])
    if style == "mistral":
        tokenizer.add_special_tokens([AddedToken("[INST]", special=True, normalized=False),
                                      AddedToken("[/INST]", special=True, normalized=False)])
        tokenizer.add_tokens([AddedToken("<tab>", special=False, normalized=True, single_word=True)])
    return tokenizer


def byte_level_bpe(vocab_size=4000):
    """A GPT-2 style byte-level BPE trained on the corpus, <|endoftext|> its one special token."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text_corpus.lines(3000, seed=2), trainer)
    return tokenizer


# llama.cpp's token types (tokenizer.ggml.token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def _writer(path, architecture):
    """A GGUF writer with the hyper-parameters llama.cpp reads even for a vocabulary-only load."""
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_block_count(1)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(16)
    return writer


def _finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_sentencepiece_gguf(path, architecture="llama", add_bos=True, add_space_prefix=True, user_defined=()):
    """A vocabulary-only GGUF file of a SentencePiece vocabulary (tokenizer.ggml.model "llama"):
    the pieces of sentencepiece_style with scores that put them in their merge order, <unk> of
    type UNKNOWN, <s> and </s> CONTROL, the byte tokens BYTE, and `user_defined` tokens appended
    as USER_DEFINED."""
    pieces, _ = _trained_pieces(3000)
    tokens = SPECIAL + BYTE_TOKENS + pieces + list(user_defined)
    # The corpus writes special tokens such as <|im_end|> in text, so they are pieces here too; they
    # are CONTROL tokens, as in the models the corpus imitates (and as llama.cpp makes some of them
    # whatever the file says).
    types = ([UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256 +
             [CONTROL if piece in text_corpus.SPECIAL_TOKENS else NORMAL for piece in pieces] +
             [USER_DEFINED] * len(user_defined))
    # SentencePiece scores a BPE piece by its rank; special, byte and user-defined tokens score 0.
    scores = [0.0] * (3 + 256) + [-float(rank) for rank in range(len(pieces))] + [0.0] * len(user_defined)
    writer = _writer(path, architecture)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(add_bos)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(add_space_prefix)
    _finish(writer)
    return path


def write_byte_level_gguf(path, tokenizer, pre, extra_control=()):
    """A vocabulary-only GGUF file of a byte-level BPE `tokenizer` (a tokenizers.Tokenizer whose
    added tokens are special) with the pre-tokenizer name `pre` (tokenizer.ggml.pre)."""
    data = json.loads(tokenizer.to_str())
    vocab = dict(data["model"]["vocab"])
    for token in data["added_tokens"]:
        vocab[token["content"]] = token["id"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    assert [vocab[token] for token in tokens] == list(range(len(tokens)))
    control = {token["content"] for token in data["added_tokens"] if token["special"]} | set(extra_control)
    writer = _writer(path, "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([CONTROL if token in control else NORMAL for token in tokens])
    writer.add_token_merges([" ".join(merge) if isinstance(merge, list) else merge for merge in data["model"]["merges"]])
    writer.add_bos_token_id(vocab["<|endoftext|>"])
    writer.add_eos_token_id(vocab["<|endoftext|>"])
    writer.add_add_bos_token(False)
    _finish(writer)
    return path
