"""A model file that changes between the child processes of `ditto verify`, planted from outside
the program (tests/python/test_verify.py, test_stages.py)."""
import os
import shutil
import threading

from safetensors.numpy import load_file, save_file


class WeightsPerChild:
    """Gives each child process of `ditto verify` the weights the test chose for it.

    config.json is a FIFO: a child that opens it blocks until this thread has pointed the
    model.safetensors symlink at that child's weights and then writes the config. ditto reads
    config.json before the weights, and verify runs its children one after another, so child k
    loads weights[k]. Nothing in ditto knows it is being tested: this is how a model file that
    changes between processes looks from the outside. Each child gets a FIFO of its own (a new one
    is renamed into place while the last is served), so that a child still reading cannot be
    handed the next child's copy.
    """

    def __init__(self, directory, config_text, weights):
        self.directory, self.config_text, self.weights = directory, config_text, weights
        self.served = 0
        self._new_fifo()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _new_fifo(self):
        path = os.path.join(self.directory, "config.json")
        os.mkfifo(path + ".new")
        os.replace(path + ".new", path)

    def _serve(self):
        link = os.path.join(self.directory, "model.safetensors")
        for path in self.weights:
            with open(os.path.join(self.directory, "config.json"), "w") as fifo:  # a child is waiting
                self._new_fifo()
                os.symlink(path, link + ".new")
                os.replace(link + ".new", link)
                fifo.write(self.config_text)
            self.served += 1


def planted_model(checkpoint_dir, tmp_path, change):
    """A served model directory plus good and changed weights; `change` edits the tensor dict."""
    tensors = load_file(os.path.join(checkpoint_dir, "model.safetensors"))
    good, bad = str(tmp_path / "good.safetensors"), str(tmp_path / "bad.safetensors")
    shutil.copy(os.path.join(checkpoint_dir, "model.safetensors"), good)
    change(tensors)
    save_file(tensors, bad, metadata={"format": "pt"})
    served = tmp_path / "served"
    served.mkdir()
    with open(os.path.join(checkpoint_dir, "config.json")) as f:
        config_text = f.read()
    return str(served), config_text, good, bad
