"""setuptools hook: build_py also generates gpuscan/v1 (messages and gRPC stubs) from ../proto,
and ships the native data path's library (libgpuscan_capi.so, see gpuscan._native) where one was
built: $GPUSCAN_NATIVE_LIB, else the one `make` built in ../build (build/python/pkg/gpuscan). Without
one the package installs all the same and its clients take the grpcio path (Client.data_path says
why).

The stubs are never stored in the source tree; python/tools/gen_stubs.py is the one generator
(CMake and the staleness test run it too).
"""
import importlib.util
import os
import shutil
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
LIB_NAME = "libgpuscan_capi.so"


def built_library():
    """The C API to ship: $GPUSCAN_NATIVE_LIB, else the build tree's copy; None: there is none."""
    env = os.environ.get("GPUSCAN_NATIVE_LIB")
    for cand in ([Path(env)] if env else [HERE.parent / "build" / "python" / "pkg" / "gpuscan" / LIB_NAME]):
        if cand.is_file():
            return cand
    return None


class GpuscanDistribution(Distribution):
    def has_ext_modules(self):
        """A wheel that carries the C API is platform-specific, not pure Python."""
        return built_library() is not None


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
            editable = getattr(self, "editable_mode", False)
            root = HERE if editable else self.build_lib
            _gen_stubs().generate(root, proto_root=HERE.parent / "proto")
            lib = built_library()
            if lib is not None and not editable:  # (editable: gpuscan._native finds ../build itself)
                shutil.copyfile(lib, Path(self.build_lib) / "gpuscan" / LIB_NAME)
                print(f"gpuscan: shipping the native data path's {lib}")
            elif lib is None:
                print(f"gpuscan: no {LIB_NAME} built (run make, or set GPUSCAN_NATIVE_LIB): clients take grpcio")


setup(cmdclass={"build_py": BuildPyWithStubs}, distclass=GpuscanDistribution)
