"""What the benchmarks compare ditto against — torch, transformers, gguf, llama.cpp — and ditto's
Python module, installed on first use: scripts/setup.sh installs only what running ditto needs.

A benchmark calls ensure() before it imports any of them."""
import glob
import importlib
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ("numpy", "torch", "transformers", "safetensors", "tokenizers", "gguf", "llama_cpp",
           "uvicorn")  # uvicorn: llama.cpp's server (bench/serve_load.py)


def ensure():
    missing = [name for name in MODULES if importlib.util.find_spec(name) is None]
    built = glob.glob(os.path.join(ROOT, "build", "python", "ditto", "_ditto*.so"))
    if not missing and built:
        return
    print(f"== installing the references ({', '.join(missing) or 'the Python module'}): scripts/references.sh",
          file=sys.stderr)
    subprocess.run([os.path.join(ROOT, "scripts", "references.sh")], check=True)
    subprocess.run(["cmake", "-S", ROOT, "-B", os.path.join(ROOT, "build"), "-DDITTO_PYTHON=ON",
                    f"-DPython3_EXECUTABLE={sys.executable}"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", os.path.join(ROOT, "build")], check=True)
    importlib.invalidate_caches()
