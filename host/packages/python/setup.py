"""Bundles the fencing:guard component into the package at build time.

The component is the repository's committed guest/fencing_guard.wasm
(written by scripts/build-component, checked against a fresh build in CI),
or the file $FENCING_GUARD_WASM names. Building needs neither Rust nor
cargo; a build that cannot find a component fails, so no wheel ships
without one. Everything else is in pyproject.toml.
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
COMMITTED = HERE.parents[2] / "guest" / "fencing_guard.wasm"
# The preamble of a WebAssembly component (a core module's says version 1, layer 0).
COMPONENT_HEADER = b"\x00asm\x0d\x00\x01\x00"


def component() -> Path:
    given = os.environ.get("FENCING_GUARD_WASM")
    path = Path(given) if given else COMMITTED
    origin = f"FENCING_GUARD_WASM={given}" if given else "the repository's guest/fencing_guard.wasm"
    if not path.is_file():
        raise SystemExit(
            f"fencing-guard: no component at {path} ({origin}). Build the wheel from a checkout of the "
            "fencing repository (the component is committed there), or set FENCING_GUARD_WASM to a "
            "fencing_guard.wasm."
        )
    with path.open("rb") as f:
        if f.read(len(COMPONENT_HEADER)) != COMPONENT_HEADER:
            raise SystemExit(f"fencing-guard: {path} ({origin}) is not a WebAssembly component")
    return path


class BuildWithComponent(build_py):
    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "fencing_guard" / "fencing_guard.wasm"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(component(), dest)


setup(cmdclass={"build_py": BuildWithComponent})
