"""setuptools hook: build_py also generates gpuscan/v1 (messages and gRPC stubs) from ../proto.

The stubs are never stored in the source tree; python/tools/gen_stubs.py is the one generator
(CMake and the staleness test run it too).
"""
import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _gen_stubs():
    spec = importlib.util.spec_from_file_location("gpuscan_gen_stubs", HERE / "tools" / "gen_stubs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            # An editable install imports the source tree: the stubs go there (git ignores them).
            root = HERE if getattr(self, "editable_mode", False) else self.build_lib
            _gen_stubs().generate(root, proto_root=HERE.parent / "proto")


setup(cmdclass={"build_py": BuildPyWithStubs})
