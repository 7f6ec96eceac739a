"""Bundles the fencing:guard component into the package at build time.

The component is taken from $FENCING_GUARD_WASM, else from the repository's
release build (target/wasm32-wasip2/release/fencing_rules.wasm), which is
built with cargo first when it is missing. Everything else is in
pyproject.toml.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def component() -> Path:
    given = os.environ.get("FENCING_GUARD_WASM")
    if given:
        path = Path(given)
        if not path.is_file():
            raise SystemExit(f"FENCING_GUARD_WASM={given}: no such file")
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = target / "wasm32-wasip2" / "release" / "fencing_rules.wasm"
    if not path.is_file():
        cmd = ["cargo", "build", "--locked", "-p", "fencing-rules", "--target", "wasm32-wasip2", "--release"]
        try:
            subprocess.run(cmd, cwd=ROOT, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(
                f"cannot build the component ({' '.join(cmd)}): {e}; "
                "run `rustup target add wasm32-wasip2` or set FENCING_GUARD_WASM"
            ) from e
    return path


class BuildWithComponent(build_py):
    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "fencing_guard" / "fencing_rules.wasm"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(component(), dest)


setup(cmdclass={"build_py": BuildWithComponent})
