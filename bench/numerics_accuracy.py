"""How far each numerics of a quantised GGUF file is from the exact one, next to llama.cpp.

On windows of a text corpus, every position's next-token distribution from ditto's exact
numerics (the weights dequantised exactly, f32 throughout: transformers' function on the file)
is the reference; for ditto's int8 numerics and for llama.cpp (llama-cpp-python, logits of every
position) on the same file and token ids this prints
  - the mean KL divergence KL(exact || mode) over all positions, in nats,
  - the perplexity of the corpus' next tokens,
  - how often the most likely token is the exact one's.
The corpus is Python's reference documentation as CPython ships it (pydoc_data.topics: English
prose with some code), cut into windows of --tokens tokens.

usage: python bench/numerics_accuracy.py [--gguf smollm2|gemma3|FILE ...] [--windows 24] [--tokens 512]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "python")]
from ditto_testing import references  # noqa: E402

references.ensure()
import numpy as np  # noqa: E402

import ditto  # noqa: E402
from ditto_testing.models import gemma3_gguf, smollm2_gguf  # noqa: E402


def corpus_windows(tokenizer, windows, tokens):
    from pydoc_data.topics import topics
    text = "\n\n".join(topics[name] for name in sorted(topics))
    ids = tokenizer.encode(text)
    stride = max(tokens, (len(ids) - tokens) // max(1, windows - 1))
    starts = [i * stride for i in range(windows) if i * stride + tokens <= len(ids)]
    return [ids[s:s + tokens] for s in starts]


def log_softmax(logits):
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class Figures:
    def __init__(self):
        self.kl = self.nll = self.agree = self.positions = 0.0

    def add(self, reference, logits, window):
        logp = log_softmax(logits)
        p = np.exp(reference)
        self.kl += float((p * (reference - logp)).sum())
        self.nll -= float(logp[np.arange(len(window) - 1), window[1:]].sum())
        self.agree += float((reference.argmax(axis=-1) == logp.argmax(axis=-1)).sum())
        self.positions += len(window)

    def row(self, name, model, predicted):
        return (f"| {model} | {name} | {self.kl / self.positions:.5f} | {np.exp(self.nll / predicted):.4f} | "
                f"{self.agree / self.positions:.4f} |")


def measure(path, windows, tokens, threads):
    from llama_cpp import Llama

    name = os.path.basename(path)
    try:
        exact = ditto.Model.load(path, numerics="exact")
        int8 = ditto.Model.load(path, numerics="int8")
    except ditto.Error as error:
        print(f"| {name} | not measured: {error} | | | |", flush=True)
        return
    tokenizer = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(path)[0])
    llm = Llama(model_path=path, n_ctx=tokens, n_batch=tokens, n_ubatch=tokens, logits_all=True, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    figures = {"ditto exact": Figures(), "ditto int8": Figures(), "llama.cpp": Figures()}
    predicted = 0
    for window in corpus_windows(tokenizer, windows, tokens):
        reference = log_softmax(ditto.Session(exact, capacity=tokens, threads=threads).prefill(window))
        figures["ditto exact"].add(reference, reference, window)
        figures["ditto int8"].add(reference, ditto.Session(int8, capacity=tokens, threads=threads).prefill(window),
                                  window)
        llm.reset()
        llm.eval(window)
        figures["llama.cpp"].add(reference, np.array(llm.scores[:len(window)], dtype=np.float32), window)
        predicted += len(window) - 1
    for mode, f in figures.items():
        print(f.row(mode, f"{name}, {int(f.positions)} positions", predicted), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", nargs="+", default=["smollm2", "gemma3"], help="files, or smollm2 / gemma3")
    parser.add_argument("--windows", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print("| model | numerics | mean KL from exact (nats) | perplexity | top-1 = exact's |")
    print("| --- | --- | ---: | ---: | ---: |")
    for given in args.gguf:
        path = {"smollm2": smollm2_gguf, "gemma3": gemma3_gguf}.get(given, lambda: given)()
        if path is None:
            print(f"| {given} | not installed | | | |")
            continue
        measure(str(path), args.windows, args.tokens, args.threads)


if __name__ == "__main__":
    main()
