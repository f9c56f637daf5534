"""ditto against llama.cpp on the same GGUF file (default: SmolLM2-135M-Instruct, Q4_1; or Gemma 3
270M, Q4_K_M: `--model gemma3`): greedy continuations side by side, how many tokens agree, and
every divergence explained by its logit margin. A report, not a test: llama.cpp does not compute
ditto's function. For quantised weights it quantises the activations to 8 bits (Q8_1/Q8_0, Q8_K
for the K-quants) and takes integer dot products, so its logits differ from the exact fp32
products ditto (and transformers) compute; where the top two candidates lie closer than that
difference, the greedy paths part.

A model with a chat template gets the chat questions in it, and the plain texts; one without
(Gemma 3 270M is the pretrained model) the plain texts, after its BOS if its tokenizer adds one.

    .venv/bin/python bench/gguf_vs_llama_cpp.py [--model FILE|gemma3] [-n 32]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "python")]
from ditto_testing import references  # noqa: E402

references.ensure()
import numpy as np  # noqa: E402
import ditto  # noqa: E402
from ditto_testing.models import CHATS, TEXTS, gemma3_gguf, smollm2_gguf  # noqa: E402


def margin(logits):
    """Top-1 minus top-2 logit."""
    top = np.sort(logits)[-2:]
    return float(top[1] - top[0])


def ditto_greedy(model, prompt, count):
    session = ditto.Session(model, capacity=len(prompt) + count, threads=2)
    logits = session.prefill(prompt, all_logits=True)
    rows, tokens, last = [logits], [], logits[-1]
    for _ in range(count):
        tokens.append(int(np.argmax(last)))
        last = session.decode(tokens[-1])
        rows.append(last[None])
    return np.vstack(rows), tokens


def llama_greedy(llm, prompt, count):
    llm.reset()
    llm.eval(prompt)
    tokens = []
    for _ in range(count):
        tokens.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval([tokens[-1]])
    return np.array(llm.scores[:llm.n_tokens]), tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF file, or gemma3 (default: SmolLM2-135M-Instruct)")
    parser.add_argument("-n", type=int, default=32, help="tokens to generate")
    args = parser.parse_args()
    from llama_cpp import Llama

    path = str(gemma3_gguf() if args.model == "gemma3" else args.model or smollm2_gguf())
    model = ditto.Model.load(path, numerics="exact")
    tokenizer_json, chat_template = ditto.gguf_tokenizer(path)
    tokenizer = ditto.Tokenizer.from_json(tokenizer_json)
    llm = Llama(model_path=path, n_ctx=512, logits_all=True, n_threads=2, verbose=False)

    chats = [ditto.apply_chat_template(chat_template, json.dumps([{"role": "user", "content": c}]),
                                       add_generation_prompt=True) for c in CHATS] if chat_template else []
    agreeing = total = 0
    for number, text in enumerate(chats + TEXTS, 1):
        # The chat template writes the BOS itself.
        bos = number > len(chats)
        prompt = tokenizer.encode(text, add_special_tokens=bos)
        assert prompt == llm.tokenize(text.encode(), add_bos=bos, special=True)
        ours, our_tokens = ditto_greedy(model, prompt, args.n)
        theirs, their_tokens = llama_greedy(llm, prompt, args.n)
        same = next((i for i, (a, b) in enumerate(zip(our_tokens, their_tokens)) if a != b), args.n)
        agreeing += same
        total += args.n
        # Logits of the positions both computed on the same tokens: the prompt and the shared prefix.
        shared = len(prompt) + same
        diff = float(np.abs(ours[:shared] - theirs[:shared]).max())
        print(f"== prompt {number}: {len(prompt)} tokens; {same}/{args.n} greedy tokens agree; "
              f"max |logit diff| over the {shared} shared positions {diff:.3f}")
        print(f"   ditto:     {tokenizer.decode(our_tokens)!r}")
        print(f"   llama.cpp: {tokenizer.decode(their_tokens)!r}")
        if same < args.n:
            at = len(prompt) + same - 1  # the position whose logits chose the differing token
            a, b = our_tokens[same], their_tokens[same]
            print(f"   first divergence at generated token {same}: ditto picks {tokenizer.decode([a])!r} "
                  f"({ours[at][a]:.3f} vs {ours[at][b]:.3f}, margin {ours[at][a] - ours[at][b]:.3f}); "
                  f"llama.cpp picks {tokenizer.decode([b])!r} ({theirs[at][b]:.3f} vs {theirs[at][a]:.3f}, "
                  f"margin {theirs[at][b] - theirs[at][a]:.3f}); "
                  f"logit diff there {np.abs(ours[at] - theirs[at]).max():.3f}")
    print(f"== {agreeing}/{total} greedy tokens agree before the first divergence of each prompt")


if __name__ == "__main__":
    main()
